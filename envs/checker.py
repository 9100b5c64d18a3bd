"""gagpo's environment checker: Gymnasium's checker, then the contract of :mod:`gagpo.envs.base`.

Gymnasium's checker knows spaces, seeding and the shape of ``reset``/``step``; it cannot know
what gagpo's callers rely on besides: the declarations of :class:`~gagpo.envs.base.TextEnv`
(``max_steps``, ``report_label``, ``splits``, ``split_tasks``) and the
:class:`~gagpo.envs.base.TextInfo` keys of every info. :func:`check_env` checks both and names
every declaration missing::

    from gagpo.envs.checker import check_env
    check_env(gymnasium.make("WebShop-v0"))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from gagpo.envs.base import TextEnv, info_problems


class ContractError(AssertionError):
    """An environment breaks gagpo's env contract; the message names each broken part."""


def check_env(env: gym.Env) -> None:
    """Check ``env`` (made or unwrapped) against gagpo's contract and Gymnasium's checker: an
    int ``max_steps`` > 0, a non-empty ``report_label`` string, ``split`` one of ``splits``,
    ``split_tasks()`` a non-empty sequence of tasks; then Gymnasium's checks; then every
    :class:`~gagpo.envs.base.TextInfo` key, of its type, in the infos of a ``reset`` on the
    first task and of a ``step``.

    The declarations come first: ``reset`` needs them, and a missing one is named here rather
    than failing inside Gymnasium's checker.

    Raises:
        ContractError: what the contract misses, each part named.
        AssertionError: Gymnasium's checker failed.
    """
    inner = env.unwrapped
    name = type(inner).__name__
    if not isinstance(inner, TextEnv):
        raise ContractError(f"{name} is not a gagpo.envs.base.TextEnv")
    problems = declaration_problems(inner)
    if not problems:
        gymnasium_check_env(inner, skip_render_check=True)
        problems = episode_problems(inner)
    if problems:
        raise ContractError(f"{name} breaks gagpo's env contract: " + "; ".join(problems))


def declaration_problems(env: TextEnv) -> list[str]:
    """What ``env`` does not declare, or declares wrong (empty: all there)."""
    problems = []
    limit = env.max_steps
    if limit is None:
        problems.append("max_steps is not set (the episode limit, an int > 0)")
    elif isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        problems.append(f"max_steps is {limit!r}, not an int > 0")
    label = getattr(env, "report_label", None)
    if label is None:
        problems.append("report_label is not set (a str: how reports name the env)")
    elif not isinstance(label, str) or not label:
        problems.append(f"report_label is {label!r}, not a non-empty str")
    splits = _call("splits", lambda: list(env.splits), problems)
    split = getattr(env, "split", None)
    if splits is not None and split not in splits:
        problems.append(f"split is {split!r}, not one of splits {splits}")
        return problems  # split_tasks() lists the env's split
    tasks = _call("split_tasks(split)", env.split_tasks, problems)
    if tasks is not None:
        if not isinstance(tasks, Sequence) or isinstance(tasks, str):
            problems.append(f"split_tasks() returns {type(tasks).__name__}, not a sequence")
        elif len(tasks) == 0:
            problems.append(f"split_tasks() lists no task of split {split!r}")
    return problems


def episode_problems(env: TextEnv) -> list[str]:
    """What the infos of a reset (on the first task) and of one step miss."""
    task = env.split_tasks()[0]
    _, info = env.reset(seed=0, options={"task": task})
    problems = [f"reset's {p}" for p in info_problems(info)]
    if problems:
        return problems
    actions = info["admissible_actions"]
    *_, info = env.step(actions[0] if actions else "")
    return [f"step's {p}" for p in info_problems(info)]


def _call(what: str, get: Callable[[], Any], problems: list[str]) -> Any:
    """``get()``, or None with a problem noted when the env does not implement ``what``."""
    try:
        return get()
    except NotImplementedError:
        problems.append(f"{what} is not implemented")
        return None
