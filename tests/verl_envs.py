"""Environments for the verl tests' bad-input cases, registered on import (``gymnasium.make
("verl_envs:RaisingShop-v0")`` imports this module, in any process)."""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

from gagpo.envs.webshop.env import WebShopEnv

RAISE_AT_STEP = 2


class RaisingShop(WebShopEnv):
    """WebShop-v0 whose step number ``RAISE_AT_STEP`` raises (a bug in a user's env)."""

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        self.steps_taken = 0
        return super()._reset(task, split)

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        self.steps_taken += 1
        if self.steps_taken > RAISE_AT_STEP:
            raise RuntimeError("the shop's database went away")
        return super()._step(action)


if "RaisingShop-v0" not in registry:
    register(id="RaisingShop-v0", entry_point="verl_envs:RaisingShop", max_episode_steps=15)
