"""The adapter: any registered gagpo environment behind OpenEnv's ``Environment``, one
instance per session (:class:`GagpoEnvironment`), and what one server serves
(:class:`ServedEnv`: the env id, its arguments, its splits and tasks).

- Actions are the env's text commands: ``{"command": "search[red shoes]"}``.
- Observations carry the text and the contract's infos: ``admissible_actions``, ``won``,
  ``score``, ``state_key``, ``action_valid``, ``task_id``, ``task_type``, ``instruction``; the
  env's own info keys (``page``, ``feedback``, ``expert_action``...) travel in ``info``, and
  ``terminated``/``truncated`` beside OpenEnv's ``done``; paths of the server's file system
  (ALFWorld's ``gamefile``) do not leave it.
- ``reset`` takes ``task`` (the env's index or id), ``split``, ``seed`` and, as OpenEnv's task
  API has it, ``index`` (the position in ``split``): G sessions reset with one task and one
  seed start identical.
"""

from __future__ import annotations

import json
import operator
import threading
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import gagpo.envs  # noqa: F401  (registers the environments)
from gagpo.envs import probe
from gagpo.envs.base import INFO_KEYS
from gagpo.integrations.openenv.models import TextAction, TextObservation, TextState

try:
    from openenv.core.env_server.interfaces import Environment
except ImportError as e:  # the extra is not installed
    raise ImportError(
        f"serving over OpenEnv needs the openenv extra: pip install 'gagpo[openenv]' ({e})"
    ) from e


@dataclass
class ServedEnv:
    """What one server serves: ``gym.make(env_id, **env_kwargs)`` per session, and what the
    env declares (read once, from one probe instance: sessions and the task API share it)."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_action_chars: int | None = None
    """Longest command taken (default: the env's action space's ``max_length``)."""

    def __post_init__(self) -> None:
        with probe(self.env_id, **self.env_kwargs) as env:
            self.splits: list[str] = list(env.splits)
            self.split: str = env.split
            self.max_steps: int | None = env.max_steps
            self.report_label: str = env.report_label
            self._tasks = {s: list(env.split_tasks(s)) for s in self.splits}
            if self.max_action_chars is None:
                self.max_action_chars = int(env.action_space.max_length)
        self.create_lock = threading.Lock()
        self.resets = 0
        """Episodes started, all sessions together (for tests and benchmarks)."""
        self.steps = 0
        """Steps played, all sessions together (for tests and benchmarks)."""

    def tasks(self, split: Any) -> list[Any]:
        """The tasks of ``split``, in order, as ``reset``'s ``task`` takes them."""
        if split not in self._tasks:
            raise ValueError(f"unknown split {split!r}: {self.env_id} has {self.splits}")
        return self._tasks[split]

    def make(self) -> gym.Env:
        with self.create_lock:  # envs share catalogs and caches that load on first use
            return gym.make(self.env_id, **self.env_kwargs)


def _plain(value: Any) -> Any:
    """``value`` as JSON has it (NumPy scalars and arrays, tuples; anything else as text)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


SERVER_ONLY_KEYS = frozenset({"gamefile"})
"""Info keys that stay on the server: ALFWorld's ``gamefile`` is a path of the server's file
system (``task_id`` names the game to a client)."""


def observation(text: str, info: dict[str, Any], reward: float | None = None,
                terminated: bool = False, truncated: bool = False) -> TextObservation:
    """A :class:`TextObservation` of one reset or step of a gagpo env."""
    extra = {k: v for k, v in info.items() if k not in INFO_KEYS and k not in SERVER_ONLY_KEYS}
    return TextObservation(
        text=text, **{k: info[k] for k in INFO_KEYS}, reward=reward,
        done=bool(terminated or truncated), terminated=bool(terminated),
        truncated=bool(truncated), info=json.loads(json.dumps(extra, default=_plain)),
    )


class GagpoEnvironment(Environment[TextAction, TextObservation, TextState]):
    """One session's environment: a gagpo env behind OpenEnv's ``Environment``.

    The gagpo env is made on the first ``reset`` (the task API and OpenEnv's probes build
    instances they never play). The task API lists the served env's splits and tasks."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, served: ServedEnv) -> None:
        super().__init__()
        self.served = served
        self._env: gym.Env | None = None
        self._state = TextState(env_id=served.env_id, split=served.split,
                                splits=served.splits, max_steps=served.max_steps,
                                report_label=served.report_label,
                                max_action_chars=served.max_action_chars or 0)

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> TextObservation:
        """Start an episode: ``task`` (the env's index or id) or ``index`` (position in
        ``split``), ``split``, ``seed``; unknown keys are refused, not ignored."""
        unknown = sorted(set(kwargs) - {"task", "split", "index"})
        if unknown:
            raise ValueError(f"reset takes seed, episode_id, task, index and split; "
                             f"not {unknown}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or seed < 0):
            raise ValueError(f"seed must be an integer >= 0 or null, not {seed!r:.60}")
        task, split = kwargs.get("task"), kwargs.get("split")
        if "index" in kwargs:
            if task is not None:
                raise ValueError("give task or index, not both")
            task = self._task_at(split if split is not None else self.served.split,
                                 kwargs["index"])
        options = {k: v for k, v in (("task", task), ("split", split)) if v is not None}
        if self._env is None:
            self._env = self.served.make()
        obs, info = self._env.reset(seed=seed, options=options)
        self.served.resets += 1
        self._state = self._state.model_copy(update={
            "episode_id": episode_id, "step_count": 0, "task_id": info["task_id"],
            "split": split or self.served.split})
        return observation(obs, info)

    def _task_at(self, split: Any, index: Any) -> Any:
        tasks = self.served.tasks(split)
        if isinstance(index, bool) or not isinstance(index, int):
            raise ValueError(f"index must be an integer, not {index!r:.60}")
        if not 0 <= index < len(tasks):
            raise ValueError(f"index {index} is out of range 0..{len(tasks) - 1} of "
                             f"split {split!r}")
        return tasks[index]

    def step(self, action: TextAction, timeout_s: float | None = None,
             **kwargs: Any) -> TextObservation:
        if self._env is None:
            raise RuntimeError("call reset before step")
        limit = self.served.max_action_chars
        if limit is not None and len(action.command) > limit:
            raise ValueError(f"the command has {len(action.command)} characters; this server "
                             f"takes at most {limit}")
        obs, reward, terminated, truncated, info = self._env.step(action.command)
        self._state.step_count += 1
        self.served.steps += 1
        return observation(obs, info, float(reward), terminated, truncated)

    @property
    def state(self) -> TextState:
        return self._state

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    # -- OpenEnv's task API --------------------------------------------------------------------

    def list_splits(self) -> list[str]:
        return list(self.served.splits)

    def num_tasks(self, split: str) -> int:
        return len(self.served.tasks(split))

    def _task(self, split: str, index: int) -> dict[str, Any]:
        return {"split": split, "index": index, "task": self.served.tasks(split)[index]}

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [self._task(split, i) for i in range(self.num_tasks(split))]

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        n = self.num_tasks(split)
        if not 0 <= operator.index(index) < n:
            raise IndexError(index)
        return self._task(split, index)

    def get_task_range(self, split: str, start: int | None = None,
                       stop: int | None = None) -> list[dict[str, Any]]:
        return [self._task(split, i) for i in range(self.num_tasks(split))[start:stop]]
