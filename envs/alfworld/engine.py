"""The reference engine: TextWorld's PDDL backend with ALFWorld's wrappers, started for one game.

Nothing here re-implements the game: observations, admissible commands, ``won`` and facts all come
from ``textworld.envs.PddlEnv`` (fast-downward underneath) wrapped, as ALFWorld's own
``AlfredTWEnv`` does, by ``AlfredDemangler`` (object ids -> "apple 1") and ``AlfredInfos``.

Importing the ``alfworld`` package has side effects (it creates ``~/.cache/alfworld`` and sets
``$ALFWORLD_DATA`` for the whole process, which would hide the user's setting from our loader), so
its data files are read by path and its wrappers are imported behind :func:`_quiet_alfworld_import`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from gagpo.envs.alfworld.limits import MAX_STEPS

# Keys of the infos we ask the engine for (TextWorld's EnvInfos: the caller asks for what it needs).
REQUESTED_INFOS = {"admissible_commands": True, "won": True, "facts": True, "extras": ["gamefile"]}


class AlfworldMissing(ImportError):
    """The ``alfworld`` / ``textworld`` packages are not installed."""


def available() -> bool:
    """Whether the reference engine can be started here (alfworld, textworld and fast-downward)."""
    return all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld"))


def require() -> None:
    if not available():
        raise AlfworldMissing(
            "ALFWorld-v0 needs the alfworld and textworld packages: pip install 'gagpo[alfworld]'"
        )


@cache
def package_dir() -> Path:
    """The installed ``alfworld`` package folder, found without importing the package. The
    generator builds new games from its data files (domain, grammar, constants, goal library,
    layouts); playing needs none of them (game files carry their domain and grammar, and the
    default set ships with gagpo: :mod:`gagpo.envs.alfworld.default_set`)."""
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise AlfworldMissing(
            "generating ALFWorld-style games needs ALFWorld's data files and the planner: "
            "pip install 'gagpo[alfworld]' (the default games ship with gagpo and need neither)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def domain_text() -> str:
    """ALFWorld's PDDL domain (alfworld/data/alfred.pddl)."""
    return (package_dir() / "data" / "alfred.pddl").read_text()


def grammar_text() -> str:
    """ALFWorld's text grammar (alfworld/data/alfred.twl2); its task text is 'UNKNOWN GOAL'."""
    return (package_dir() / "data" / "alfred.twl2").read_text()


@cache
def load_data_module(relpath: str) -> ModuleType:
    """Execute one of alfworld's plain-data modules (gen/constants.py, gen/goal_library.py) by
    path, under a private name, so that the package's ``__init__`` never runs."""
    path = package_dir() / relpath
    name = "_gagpo_alfworld_" + relpath.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _quiet_alfworld_import() -> Iterator[None]:
    """Import alfworld modules without touching the home folder or the user's $ALFWORLD_DATA.

    ``alfworld.info`` runs ``mkdirs($ALFWORLD_DATA or ~/.cache/alfworld)`` and then writes the
    variable back into ``os.environ``. Pointing it at an existing temporary folder for the duration
    of the import, then restoring the variable, leaves no trace.
    """
    if "alfworld.info" in sys.modules:
        yield
        return
    saved = os.environ.get("ALFWORLD_DATA")
    os.environ["ALFWORLD_DATA"] = tempfile.gettempdir()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = saved


@cache
def alfred_wrappers() -> tuple[type, type]:
    """ALFWorld's ``AlfredDemangler`` and ``AlfredInfos`` TextWorld wrappers."""
    require()
    with _quiet_alfworld_import():
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    return AlfredDemangler, AlfredInfos


def request_infos(**overrides: Any) -> Any:
    """The ``textworld.EnvInfos`` our env asks for."""
    import textworld

    kwargs = {**REQUESTED_INFOS, **overrides}
    kwargs["extras"] = list(kwargs.get("extras", []))
    return textworld.EnvInfos(**kwargs)


def start(game: str | os.PathLike[str] | dict[str, Any], infos: Any | None = None) -> Any:
    """A TextWorld environment (``Filter``-wrapped: ``reset() -> (obs, infos)``, ``step(cmd) ->
    (obs, score, done, infos)``) playing ``game``, a game.tw-pddl path or its parsed JSON.

    The wrapper stack is ALFWorld's (PddlEnv, AlfredDemangler without shuffling, AlfredInfos),
    without the step limit, which the gym layer above applies.
    """
    require()
    from textworld.envs import PddlEnv
    from textworld.envs.wrappers import Filter

    demangler, alfred_infos = alfred_wrappers()
    infos = infos if infos is not None else request_infos()
    env = Filter(alfred_infos(demangler(PddlEnv(infos), shuffle=False)))
    env.load(str(game) if isinstance(game, os.PathLike) else game)
    return env


def start_stock(game_file: str | os.PathLike[str], max_episode_steps: int | None = None) -> Any:
    """The stock gym environment of ALFWorld's ``AlfredTWEnv`` for one game: TextWorld's gym
    layer over the same wrappers, which reloads the game on every reset. Used by the transcript
    test and the benchmark as the reference to compare against. ``max_episode_steps``: None
    for ALFWorld-v0's (:data:`gagpo.envs.alfworld.limits.MAX_STEPS`)."""
    require()
    import textworld.gym

    demangler, alfred_infos = alfred_wrappers()
    infos = request_infos(facts=False)
    env_id = textworld.gym.register_games(
        [str(game_file)],
        infos,
        batch_size=1,
        asynchronous=False,
        max_episode_steps=MAX_STEPS if max_episode_steps is None else max_episode_steps,
        wrappers=[demangler(shuffle=False), alfred_infos],
    )
    return textworld.gym.make(env_id)
