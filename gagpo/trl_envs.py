"""Moved to :mod:`gagpo.integrations.trl`; this module keeps the names it had."""

from gagpo.integrations.trl import (
    MAX_LISTED_ACTIONS,
    TOOLS,
    ALFWorldTools,
    TextEnvTools,
    WebShopTools,
)

__all__ = ["MAX_LISTED_ACTIONS", "TOOLS", "ALFWorldTools", "TextEnvTools", "WebShopTools"]
