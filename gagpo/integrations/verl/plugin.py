"""The ``verl.plugins`` entry point: ``import verl`` imports this module (in every process,
Ray workers included), which registers the ``gagpo_env`` agent loop and the ``gagpo`` trainer.

verl logs a plugin that fails to import at debug level only, so a broken install would show up
as "Agent loop gagpo_env not registered" far from its cause. This module says why, loudly, on
stderr and in the log, before re-raising.
"""

from __future__ import annotations

import logging
import sys
import traceback

try:
    from gagpo.integrations.verl import agent_loop, trainer  # noqa: F401  (they register)
except Exception:
    message = ("gagpo: the verl plugin failed to import, so the gagpo_env agent loop and the "
               "gagpo trainer are NOT registered:\n" + traceback.format_exc())
    print(message, file=sys.stderr, flush=True)
    logging.getLogger(__name__).error(message)
    raise
