"""ALFWorld-v0: ALFWorld's household text games on the reference engine (alfworld + textworld).

    import gymnasium, envs
    env = gymnasium.make("ALFWorld-v0")                          # generated ALFWorld-style games
    env = gymnasium.make("ALFWorld-v0", data_dir="~/alfworld", split="valid_unseen")  # official

Modules: :mod:`~gagpo.envs.alfworld.env` (the Gymnasium env), :mod:`~gagpo.envs.alfworld.games`
(the loader of official and generated game folders), :mod:`~gagpo.envs.alfworld.generator`
(offline generation of ALFRED-style games), :mod:`~gagpo.envs.alfworld.engine` (starting the
reference engine), :mod:`~gagpo.envs.alfworld.speedups` (memoisation that keeps its output
identical), :mod:`~gagpo.envs.alfworld.state` (state keys from facts),
:mod:`~gagpo.envs.alfworld.expert`.

Nothing here imports alfworld or textworld until an env is made, so ``import gagpo.envs`` works
without them; :func:`available` says whether they are installed.
"""

from __future__ import annotations

from typing import Any

from gagpo.envs.alfworld.engine import available
from gagpo.envs.alfworld.limits import MAX_STEPS

__all__ = ["MAX_STEPS", "AlfworldEnv", "available", "generate_games"]


def __getattr__(name: str) -> Any:
    if name == "AlfworldEnv":
        from gagpo.envs.alfworld.env import AlfworldEnv

        return AlfworldEnv
    if name == "generate_games":
        from gagpo.envs.alfworld.generator import generate_games

        return generate_games
    raise AttributeError(name)
