"""LossyCorridor-v0: Corridor-v0 (tests/corridor.py) whose worker process dies once, for the
tests of what a trainer does with episodes lost to a dead env worker. Importing this module
registers it (``"lossy_corridor:LossyCorridor-v0"`` with ``tests/`` on the path, as worker
processes have it)."""

from __future__ import annotations

import os
from typing import Any

import corridor
import gymnasium as gym


class LossyCorridor(corridor.Corridor):
    """The first env, over all processes, to reach its second step kills its worker process
    there (``die_flag``: a file path, created then, that tells the others it happened). The
    ladder ends nothing here (a rejected action), so every episode is live at that step."""

    def __init__(self, die_flag: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.die_flag, self.taken = die_flag, 0

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        self.taken = 0
        return super()._reset(task, split)

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.die_flag and self.taken == 1:
            try:
                os.close(os.open(self.die_flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(3)  # the worker dies mid-episode, with the episodes it holds
        self.taken += 1
        return super()._step("climb" if action.strip() == corridor.BACK else action)


if "LossyCorridor-v0" not in gym.registry:
    gym.register("LossyCorridor-v0", entry_point=LossyCorridor,
                 max_episode_steps=corridor.MAX_STEPS)
