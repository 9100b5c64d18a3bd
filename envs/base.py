"""The contract every gagpo environment keeps.

Observations and actions are ``str``; their spaces are :class:`gymnasium.spaces.Text` with a
charset wide enough for real text. ``reset(seed=..., options={"task": ..., "split": ...})``
returns ``(observation, info)``; the same task and seed give the same initial state, so that a
group of G copies starts identical. ``step(action)`` returns ``(observation, reward,
terminated, truncated, info)`` and never raises on a bad action: it answers with feedback
text, reward 0 and ``info["action_valid"] = False``.

``info`` always holds the keys of :class:`TextInfo` (each documented there; :data:`INFO_KEYS`
lists them), built by :meth:`TextEnv.make_info`, the ``state_key`` by :func:`make_state_key`.
Besides ``reset``/``step``, callers rely on what :class:`TextEnv` declares: ``max_steps``,
``report_label``, ``splits``/``split`` and ``split_tasks(split)``.
:func:`gagpo.envs.checker.check_env` checks an environment against all of it.

Episode ends are kept here, once for every environment (:class:`TextEnv`): an episode ends
when the environment terminates it (won, bought) or after ``max_steps`` steps (truncated). A
``step`` after the end changes nothing and pays 0: it repeats ``terminated``/``truncated``,
keeps ``won``, ``score`` and ``state_key``, lists no admissible action, sets
``action_valid = False`` and says in ``info["feedback"]`` (and the observation) to call
``reset()``. ``reset`` checks its arguments (:func:`reset_options`, :func:`task_index`) and
raises ``TypeError``/``ValueError`` naming the argument and what it accepts; ``step`` before
any ``reset`` or after ``close`` raises ``RuntimeError``.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypedDict, cast, get_args, get_origin, get_type_hints

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gagpo.common.digest import digest
from gagpo.common.numbers import check_number, short_repr


class TextInfo(TypedDict):
    """The keys every ``info`` holds, after ``reset`` and after every ``step``; environments
    add their own keys beside them (WebShop-v0's ``page``, ALFWorld-v0's ``gamefile``...)."""

    task_id: str
    """Stable id of the task (the same across processes and runs)."""
    task_type: str
    """The task's kind, what results are broken down by (WebShop: the product category;
    ALFWorld: one of its six task types)."""
    instruction: str
    """The task's instruction text."""
    admissible_actions: list[str]
    """Actions that do something in the current state."""
    state_key: str
    """A short string, equal for two copies of one task exactly when their true environment
    states are equal, whatever path led there. Computed from the state, never from the text
    (:func:`make_state_key`). It does not name the task: keys of different tasks may be equal,
    so compare keys within one task's copies (the trainer groups by task first)."""
    won: bool
    """Whether the task is accomplished."""
    score: float
    """The environment's own score (WebShop reward in [0, 1], ALFWorld 0/1)."""
    action_valid: bool
    """After a step, whether the action was understood and applicable (``True`` after reset)."""


INFO_TYPES: dict[str, Any] = get_type_hints(TextInfo)
"""Each :class:`TextInfo` key's type."""
INFO_KEYS: tuple[str, ...] = tuple(INFO_TYPES)
"""The keys of :class:`TextInfo`, in order."""

RESET_OPTIONS = ("task", "split")
"""The keys ``reset(options=...)`` understands."""

Transition = tuple[str, float, bool, bool, dict[str, Any]]
"""``step``'s answer: observation, reward, terminated, truncated and the info (a
:class:`TextInfo` plus the environment's own keys)."""

# Printable ASCII plus the Latin-1 supplement, general punctuation and common symbols: product
# text uses curly quotes, '›' and accented letters. Characters outside still pass through
# (Text.contains is only used by checkers), but sampling and checks stay meaningful.
TEXT_CHARSET = frozenset(
    [chr(c) for c in range(32, 127)]
    + ["\n", "\t"]
    + [chr(c) for c in range(0xA0, 0x250)]
    + [chr(c) for c in range(0x2000, 0x2070)]
    + [chr(c) for c in range(0x20A0, 0x20C0)]
    + [chr(c) for c in range(0x2100, 0x2200)]
)


def text_space(max_length: int) -> spaces.Text:
    """A Text space for observations or actions of at most ``max_length`` characters."""
    return spaces.Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)


def make_state_key(*parts: Any) -> str:
    """The ``state_key`` of a state made of ``parts``: a short, stable digest (same parts ->
    same key, in every process). It is :func:`gagpo.common.digest.digest`, which the served
    shop's JSON API uses too, so keys a client reads there equal the in-process env's."""
    return digest(*parts)


class TextEnv(gym.Env[str, str]):
    """Base class of gagpo's text environments: spaces, metadata, the info contract and the
    episode's edges (checked reset arguments, truncation, steps after the end, close).

    Subclasses set ``max_steps``, ``report_label`` and ``split``, implement ``splits``,
    :meth:`split_tasks`, :meth:`_reset` and :meth:`_step` (building infos with
    :meth:`make_info`), and set ``max_observation_length`` / ``max_action_length`` if they
    need more. Gymnasium's ``reset``/``step`` are implemented here on top of them.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"]}
    max_observation_length: int = 1_000_000
    max_action_length: int = 100_000
    split: str
    """The split random resets draw from (one of ``splits``)."""
    max_steps: int | None = None
    """Steps after which an episode is truncated: an int > 0 every environment sets (None, this
    default, only says it forgot). The environment itself ends the episode there (``gym.make``'s
    ``TimeLimit`` only flags truncation); agents mention it in prompts."""
    report_label: str
    """How reports name this environment and its data (e.g. results on generated data say
    so)."""
    step_only_infos: tuple[str, ...] = ()
    """Info keys that describe one step only (dropped from the infos of steps after the end)."""

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.observation_space = text_space(self.max_observation_length)
        self.action_space = text_space(self.max_action_length)
        self._last_observation = ""
        self._last_info: dict[str, Any] | None = None  # None: no episode (new or closed env)
        self._ended: tuple[bool, bool] | None = None  # (terminated, truncated) once it ended
        self._steps = 0
        self._closed = False

    # -- what subclasses implement -------------------------------------------------------------

    @property
    def splits(self) -> Collection[str]:
        """The split names ``split`` accepts."""
        raise NotImplementedError

    def split_tasks(self, split: str | None = None) -> Sequence[Any]:
        """The tasks of ``split`` (default: the env's ``split``), in a fixed order: each one a
        valid ``reset(options={"task": ...})`` for that split. Evaluations run a prefix of it,
        trainers draw from it."""
        raise NotImplementedError

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        """Start an episode of ``task`` (None: draw one from ``split`` with ``self.np_random``)."""
        raise NotImplementedError

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        """One step of a running episode: ``(observation, reward, terminated, info)``."""
        raise NotImplementedError

    def _ended_observation(self, feedback: str) -> str:
        """The observation of a step after the end (default: the feedback sentence)."""
        return feedback

    def _ended_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """The info of a step after the end, from a copy of the last one (extend to clear
        environment-specific keys)."""
        for key in self.step_only_infos:
            info.pop(key, None)
        info["admissible_actions"] = []
        info["action_valid"] = False
        if "expert_action" in info:
            info["expert_action"] = None
        return info

    # -- Gymnasium's API -----------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode: ``options={"task": ..., "split": ...}`` (both optional)."""
        task, split = reset_options(options, self.splits, self.split)
        super().reset(seed=seed)
        self._last_info, self._ended, self._steps = None, None, 0
        obs, info = self._reset(task, split)
        self._closed = False
        self._last_observation, self._last_info = obs, info
        return obs, info

    def step(self, action: str) -> Transition:
        """One step; after the episode's end, a no-op that says to call ``reset()``."""
        if self._last_info is None:
            if self._closed:
                raise RuntimeError("the env is closed: call reset() to start a new episode")
            raise RuntimeError("call reset() before step()")
        if self._ended is not None:
            return self._after_end()
        obs, reward, terminated, info = self._step(
            action if isinstance(action, str) else str(action)
        )
        self._steps += 1
        limit = self.max_steps
        truncated = not terminated and limit is not None and self._steps >= limit
        if terminated or truncated:
            self._ended = (bool(terminated), bool(truncated))
        self._last_observation, self._last_info = obs, info
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _after_end(self) -> Transition:
        terminated, truncated = self._ended or (False, False)
        why = "the task ended" if terminated else f"truncated after {self._steps} steps"
        feedback = f"The episode is over ({why}): call reset() to start a new one."
        info = self._ended_info(dict(self._last_info or {}))
        info["feedback"] = feedback
        obs = self._ended_observation(feedback)
        self._last_observation = obs
        return obs, 0.0, terminated, truncated, info

    def close(self) -> None:
        """Free what the env holds; ``step`` raises until the next ``reset``."""
        self._last_info, self._ended = None, None
        self._closed = True
        super().close()

    @staticmethod
    def make_info(**fields: Any) -> TextInfo:
        """The info dict of the contract: every :class:`TextInfo` key (``action_valid``
        defaults to True; ``won``, ``score`` and ``action_valid`` are made ``bool``/``float``),
        in :data:`INFO_KEYS` order, then the environment's own extra keys as given.

        Raises:
            TypeError: a :class:`TextInfo` key is missing.
        """
        fields.setdefault("action_valid", True)
        missing = [k for k in INFO_KEYS if k not in fields]
        if missing:
            raise TypeError(f"make_info() misses the contract's info keys {missing}")
        info = {k: fields.pop(k) for k in INFO_KEYS}
        for key, kind in _EXACT.items():
            info[key] = kind(info[key])
        return cast(TextInfo, {**info, **fields})

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        if self.render_mode == "human":
            print(self._last_observation)
        return None


def reset_options(
    options: Any, splits: Collection[str], default_split: str
) -> tuple[Any, str]:
    """``(task, split)`` from ``reset``'s ``options``, checked.

    ``options`` must be None or a dict holding only ``task`` and ``split``; ``split`` one of
    ``splits`` (default ``default_split``). ``task`` comes back as given (None: draw one): each
    environment knows its task ids, and checks indices with :func:`task_index`.

    Raises:
        TypeError: ``options`` is not a dict, or ``split`` not a string.
        ValueError: an unknown key (a misspelt ``task`` would silently draw a random task),
            or an unknown split.
    """
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise TypeError(
            f"options must be a dict such as {{'task': 0, 'split': 'train'}} or None, "
            f"not {type(options).__name__} {short_repr(options)}"
        )
    unknown = [k for k in options if k not in RESET_OPTIONS]
    if unknown:
        raise ValueError(f"unknown reset option(s) {unknown}; options takes {list(RESET_OPTIONS)}")
    split = options.get("split")
    split = default_split if split is None else split_name(split, splits, "options['split']")
    return options.get("task"), split


def split_name(split: Any, splits: Collection[str], name: str = "split") -> str:
    """``split`` checked to be one of ``splits`` (``name``: the argument, for the message).

    Raises:
        TypeError: not a string.
        ValueError: not one of ``splits``.
    """
    if not isinstance(split, str):
        raise TypeError(
            f"{name} must be a split name, one of {list(splits)}, "
            f"not {type(split).__name__} {short_repr(split)}"
        )
    if split not in splits:
        raise ValueError(f"{name} must be one of {list(splits)}, not {split!r}")
    return split


def step_limit(max_steps: Any) -> int:
    """``max_steps`` checked to be an integer >= 1 (an env's truncation limit)."""
    check_number("max_steps", max_steps, ">= 1", integer=True)
    return int(max_steps)


def task_index(task: Any, n: int, accepts: str) -> int:
    """``task`` as an index in ``0..n-1``: an ``int``, a NumPy integer or anything else with
    ``__index__``, never a bool, float, string or bytes (``int()`` would quietly make ``True``,
    ``1.7`` and ``b"1"`` task 1, and raise OverflowError on ``inf``).

    Args:
        accepts: what ``options["task"]`` accepts, in words, for the error message.

    Raises:
        TypeError: not an integer.
        ValueError: out of range.
    """
    if isinstance(task, (bool, np.bool_)):
        raise TypeError(f"options['task'] must be {accepts}, not the bool {task!r}")
    try:
        index = operator.index(task)
    except TypeError:
        raise TypeError(
            f"options['task'] must be {accepts}, not {type(task).__name__} {short_repr(task)}"
        ) from None
    if not 0 <= index < n:
        raise ValueError(
            f"options['task'] = {index} is out of range 0..{n - 1}: it must be {accepts}"
        )
    return index


def info_problems(info: Any) -> list[str]:
    """What keeps ``info`` from holding the contract, in words: each missing
    :class:`TextInfo` key, each value not of its key's type, an empty ``state_key``. An empty
    list: the info holds it."""
    if not isinstance(info, Mapping):
        return [f"info is a {type(info).__name__}, not a dict"]
    problems = []
    for key, kind in INFO_TYPES.items():
        if key not in info:
            problems.append(f"info has no {key!r} ({_type_name(kind)})")
        elif not _is_a(info[key], kind):
            problems.append(f"info[{key!r}] is {_type_name(type(info[key]))} "
                            f"{short_repr(info[key])}, not {_type_name(kind)}")
    if isinstance(info.get("state_key"), str) and not info["state_key"]:
        problems.append("info['state_key'] is empty")
    return problems


def check_info(info: dict[str, Any]) -> None:
    """Raise ``AssertionError`` if ``info`` misses a key of the contract or has a wrong type."""
    problems = info_problems(info)
    assert not problems, "; ".join(problems)


def _is_a(value: Any, kind: Any) -> bool:
    """``isinstance`` for the types :class:`TextInfo` uses (``list[str]`` checks items)."""
    if get_origin(kind) is list:
        (item,) = get_args(kind)
        return isinstance(value, list) and all(isinstance(v, item) for v in value)
    return isinstance(value, kind)


def _type_name(kind: Any) -> str:
    """``str``, ``list[str]``, ``numpy.bool``: builtins bare, other types with their module."""
    if get_origin(kind):
        return str(kind)
    module = getattr(kind, "__module__", "builtins")
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


# The keys make_info converts: engines hand over numpy bools, ints for scores.
_EXACT = {key: kind for key, kind in INFO_TYPES.items() if kind in (bool, float)}
