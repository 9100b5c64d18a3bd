"""Corridor-v0: a text environment made for the trainer's tests, where learning is certain.

The agent walks a corridor of ``length`` rooms. In every room ``take 3`` (door 3) is the one
right action (from the last room it wins the task), ``take up`` (the ladder) loses at once, and
anything else is an invalid action that changes nothing. A policy that learns to take door 3
wins every episode. The two commands were picked among many for the fresh tiny model, which
scores them about even (it takes door 3 about half of the time), so that learning and
unlearning both show.

Its behaviour depends on the reset's seed, as users' envs often do: the seed picks how the lamps
burn (the observations show it, the state and so its key hold it) and the order in which the
two actions are listed; the task picks the corridor's walls. Importing this module registers
``Corridor-v0`` (``"corridor:Corridor-v0"`` for ``gym.make`` and the trainer, with ``tests/`` on
the path).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import gymnasium as gym

from gagpo.envs.base import TextEnv, make_state_key, split_name, step_limit, task_index

WALLS = ("stone", "brick", "wooden", "glass", "marble", "iron", "paper", "clay")
LAMPS = ("dim", "bright", "flickering", "steady", "cold", "warm")
SPLITS = {"train": WALLS[:6], "test": WALLS[6:]}
FORWARD, BACK = "take 3", "take up"
MAX_STEPS = 4


class Corridor(TextEnv):
    report_label = "Corridor (a test environment)"

    def __init__(self, split: str = "train", length: int = 2, max_steps: int = MAX_STEPS,
                 request_infos: Sequence[str] = (), render_mode: str | None = None) -> None:
        super().__init__(render_mode)
        self.expert = "expert_action" in request_infos  # the scripted teacher reads it
        self.split = split_name(split, SPLITS)
        self.length = length
        self.max_steps = step_limit(max_steps)
        self.room, self.lamps, self.walls, self.outcome = 0, "", "", ""
        self.actions: list[str] = []

    @property
    def splits(self) -> Collection[str]:
        return SPLITS

    def split_tasks(self, split: str | None = None) -> Sequence[Any]:
        return list(range(len(SPLITS[split_name(split or self.split, SPLITS)])))

    def _observation(self) -> str:
        if self.outcome:
            return self.outcome
        return (f"You stand in room {self.room + 1} of {self.length} of the {self.walls} "
                f"corridor. The lamps are {self.lamps}.")

    def _info(self, valid: bool = True) -> dict[str, Any]:
        won = self.room == self.length
        return self.make_info(
            task_id=f"corridor-{self.walls}", task_type=self.walls,
            instruction=f"Walk to the end of the {self.walls} corridor.",
            admissible_actions=[] if self.outcome else self.actions,
            state_key=make_state_key(self.room, self.lamps, self.actions, self.outcome),
            won=won, score=float(won), action_valid=valid,
            **({"expert_action": None if self.outcome else FORWARD} if self.expert else {}))

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        walls = SPLITS[split]
        i = int(self.np_random.integers(len(walls))) if task is None else task_index(
            task, len(walls), "an index")
        self.walls, self.room, self.outcome = walls[i], 0, ""
        self.lamps = LAMPS[int(self.np_random.integers(len(LAMPS)))]
        self.actions = [FORWARD, BACK][::1 if self.np_random.random() < 0.5 else -1]
        return self._observation(), self._info()

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        action = action.strip()
        if action == FORWARD:
            self.room += 1
            if self.room == self.length:
                self.outcome = "You reach the end of the corridor. You won!"
        elif action == BACK:
            self.outcome = "You fall into a pit. You lost."
        else:
            return "Nothing happens.", 0.0, False, self._info(valid=False)
        won = self.room == self.length
        return self._observation(), float(won), bool(self.outcome), self._info()


if "Corridor-v0" not in gym.registry:
    gym.register("Corridor-v0", entry_point=Corridor, max_episode_steps=MAX_STEPS)
