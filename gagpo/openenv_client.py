"""Moved to :mod:`gagpo.integrations.openenv.client` (the models to
:mod:`gagpo.integrations.openenv.models`); this module keeps the names it had."""

from gagpo.integrations.openenv.client import GagpoEnvClient
from gagpo.integrations.openenv.models import TextAction, TextObservation, TextState

__all__ = ["GagpoEnvClient", "TextAction", "TextObservation", "TextState"]
