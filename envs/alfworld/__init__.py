"""ALFWorld-v0: ALFWorld's household text games on the reference engine (alfworld + textworld).

    import gymnasium, envs
    env = gymnasium.make("ALFWorld-v0")                          # generated ALFWorld-style games
    env = gymnasium.make("ALFWorld-v0", data_dir="~/alfworld", split="valid_unseen")  # official

Modules: :mod:`~envs.alfworld.env` (the Gymnasium env), :mod:`~envs.alfworld.games` (the loader of
official and generated game folders), :mod:`~envs.alfworld.generator` (offline generation of
ALFRED-style games), :mod:`~envs.alfworld.engine` (starting the reference engine),
:mod:`~envs.alfworld.speedups` (memoisation that keeps its output identical),
:mod:`~envs.alfworld.state` (state keys from facts), :mod:`~envs.alfworld.expert`.

Nothing here imports alfworld or textworld until an env is made, so ``import envs`` works
without them; :func:`available` says whether they are installed.
"""

from __future__ import annotations

from typing import Any

from envs.alfworld.engine import available

__all__ = ["AlfworldEnv", "available", "generate_games"]


def __getattr__(name: str) -> Any:
    if name == "AlfworldEnv":
        from envs.alfworld.env import AlfworldEnv

        return AlfworldEnv
    if name == "generate_games":
        from envs.alfworld.generator import generate_games

        return generate_games
    raise AttributeError(name)
