"""The contract every gagpo environment keeps.

Observations and actions are ``str``; their spaces are :class:`gymnasium.spaces.Text` with a
charset wide enough for real text. ``reset(seed=..., options={"task": ..., "split": ...})``
returns ``(observation, info)``; the same task and seed give the same initial state, so that a
group of G copies starts identical. ``step(action)`` returns ``(observation, reward,
terminated, truncated, info)`` and never raises on a bad action: it answers with feedback
text, reward 0 and ``info["action_valid"] = False``.

``info`` always holds the keys of :data:`INFO_KEYS`:

``task_id``
    stable id of the task (the same across processes and runs).
``instruction``
    the task's instruction text.
``admissible_actions``
    ``list[str]`` of actions that do something in the current state.
``state_key``
    a short string, equal for two copies of one task exactly when their true environment
    states are equal, whatever path led there. Computed from the state, never from the text.
``won``
    whether the task is accomplished.
``score``
    the environment's own score (WebShop reward in [0, 1], ALFWorld 0/1).
``action_valid``
    after a step, whether the action was understood and applicable (``True`` after reset).
"""

from __future__ import annotations

import hashlib
from typing import Any

import gymnasium as gym
from gymnasium import spaces

INFO_KEYS = (
    "task_id",
    "instruction",
    "admissible_actions",
    "state_key",
    "won",
    "score",
    "action_valid",
)

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
    """A short, stable digest of a state tuple (same parts -> same key, in every process)."""
    return hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).hexdigest()


class TextEnv(gym.Env[str, str]):
    """Base class of gagpo's text environments: spaces, metadata and the info contract.

    Subclasses set ``max_observation_length`` / ``max_action_length`` if they need more and
    implement ``reset`` and ``step``, building infos with :meth:`make_info`.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"]}
    max_observation_length: int = 1_000_000
    max_action_length: int = 100_000

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.observation_space = text_space(self.max_observation_length)
        self.action_space = text_space(self.max_action_length)
        self._last_observation = ""

    @staticmethod
    def make_info(
        *,
        task_id: str,
        instruction: str,
        admissible_actions: list[str],
        state_key: str,
        won: bool,
        score: float,
        action_valid: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """The info dict of the contract, plus environment-specific ``extra`` keys."""
        return {
            "task_id": task_id,
            "instruction": instruction,
            "admissible_actions": admissible_actions,
            "state_key": state_key,
            "won": bool(won),
            "score": float(score),
            "action_valid": bool(action_valid),
            **extra,
        }

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last_observation
        if self.render_mode == "human":
            print(self._last_observation)
        return None


def check_info(info: dict[str, Any]) -> None:
    """Raise ``AssertionError`` if ``info`` misses a key of the contract or has a wrong type."""
    missing = [k for k in INFO_KEYS if k not in info]
    assert not missing, f"info misses {missing}"
    assert isinstance(info["task_id"], str)
    assert isinstance(info["instruction"], str)
    assert isinstance(info["admissible_actions"], list)
    assert all(isinstance(a, str) for a in info["admissible_actions"])
    assert isinstance(info["state_key"], str) and info["state_key"]
    assert isinstance(info["won"], bool)
    assert isinstance(info["score"], float)
    assert isinstance(info["action_valid"], bool)
