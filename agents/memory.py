"""The agent's memory of one episode: the last k (observation, action) pairs and a step count."""

from __future__ import annotations

from collections import deque

from gagpo.common.numbers import check_number


class EpisodeMemory:
    """A sliding window over one episode's steps.

    Only the last ``history_length`` pairs are kept (prompts show no more), but every step is
    counted, so prompts can say how far the episode has gone.
    """

    def __init__(self, history_length: int = 2) -> None:
        check_number("history_length", history_length, ">= 0", integer=True)
        self.history_length = history_length
        self._window: deque[tuple[str, str]] = deque(maxlen=history_length)
        self.steps = 0
        """Steps taken in this episode."""

    def add(self, observation: str, action: str) -> None:
        """Record that ``action`` was taken when ``observation`` was shown."""
        self._window.append((observation, action))
        self.steps += 1

    def recent(self) -> list[tuple[str, str]]:
        """The window, oldest first."""
        return list(self._window)

    def clear(self) -> None:
        self._window.clear()
        self.steps = 0

    def __len__(self) -> int:
        return len(self._window)
