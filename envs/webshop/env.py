"""WebShop-v0: the shop as a Gymnasium text environment.

In-process by default (the shop's engine runs inside the env: no server, no HTML on the hot
path); ``server_url=...`` talks to a shop served by ``gagpo serve webshop`` over its JSON API
instead. Both give identical transcripts for the same actions.
"""

from __future__ import annotations

from typing import Any

from envs.base import TextEnv
from servers.webshop.goals import GoalKind, split_range
from servers.webshop.observe import EXTRA_INFOS, OBSERVATION_MODES, ObservationMode, describe
from servers.webshop.shop import MAX_STEPS  # noqa: F401  (re-exported)


class _LocalBackend:
    """Runs the shop's engine in this process."""

    def __init__(
        self, catalog, goals: GoalKind, num_products: int | None, mode: ObservationMode,
        request_infos: tuple[str, ...] = (),
    ):
        from servers.webshop import open_shop

        self.shop = open_shop(catalog, goals=goals, num_products=num_products)
        self.mode = mode
        self.request_infos = request_infos
        self.state = None

    @property
    def num_goals(self) -> int:
        return len(self.shop.goals)

    def start(self, goal: int) -> dict[str, Any]:
        self.state = self.shop.initial_state(goal)
        return describe(self.shop, self.state, self.mode, request_infos=self.request_infos)

    def step(self, action: str) -> dict[str, Any]:
        result = self.shop.step(self.state, action)
        self.state = result.state
        return describe(self.shop, self.state, self.mode, result, self.request_infos)

    def goal(self, index: int):
        return self.shop.goals[index]

    def close(self) -> None:
        self.state = None


class WebShopEnv(TextEnv):
    """WebShop (Yao et al. 2022) on gagpo's fast shop.

    Args:
        observation_mode: ``"text"`` (visible text nodes joined by `` [SEP] ``, the default),
            ``"text_rich"`` (buttons marked) or ``"html"`` (the served page).
        server_url: base URL of a served shop (``gagpo serve webshop``); None runs in-process.
        catalog: a folder of the original WebShop data files; None uses the embedded
            generated catalog.
        goals: ``"human"`` (the WebShop paper's goals) or ``"synthetic"`` (verl-agent's).
        num_products: keep the first N products of a catalog folder, or the size of the
            generated catalog (default 1,000).
        split: the split random resets draw from: ``"train"`` (goals 1500..), ``"eval"``
            (500-1499) or ``"test"`` (0-499).
        request_infos: extra infos to compute at every step: ``"expert_action"`` (the
            goal-aware expert's next action; for demonstrations and scripted baselines).

    ``reset(options={"task": i})`` opens goal ``i``; ``reset(options={"split": "test"})``
    draws a goal of that split with the env's seeded RNG. Infos carry the contract's keys
    (see :mod:`envs.base`) plus ``available_actions`` (the original's ``{has_search_bar,
    clickables}``), ``page``, ``goal_index``, ``feedback`` after a rejected action and
    ``reward_parts`` after a purchase.
    """

    def __init__(
        self,
        observation_mode: ObservationMode = "text",
        server_url: str | None = None,
        catalog: str | None = None,
        goals: GoalKind = "human",
        num_products: int | None = None,
        split: str = "train",
        request_infos: tuple[str, ...] | list[str] = (),
        render_mode: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(render_mode=render_mode)
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}")
        self.observation_mode = observation_mode
        request_infos = tuple(request_infos)
        unknown = set(request_infos) - set(EXTRA_INFOS)
        if unknown:
            raise ValueError(f"unknown request_infos {sorted(unknown)}; known: {EXTRA_INFOS}")
        if server_url is None:
            self._backend = _LocalBackend(
                catalog, goals, num_products, observation_mode, request_infos
            )
        else:
            from envs.webshop.client import RemoteBackend

            self._backend = RemoteBackend(
                server_url, observation_mode, timeout=timeout, request_infos=request_infos
            )
        split_range(split, self._backend.num_goals)  # validates the name
        self.report_label = (
            "WebShop (served shop)" if server_url
            else "WebShop" if catalog else "WebShop (embedded generated catalog)"
        )
        """How reports name this environment: results on generated data say so."""
        self.split = split
        self._done = True

    @property
    def num_goals(self) -> int:
        return self._backend.num_goals

    def split_tasks(self, split: str | None = None) -> range:
        """Goal indices of ``split`` (default: the env's), in order."""
        return split_range(split or self.split, self.num_goals)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        task = options.get("task")
        if task is None:
            goals = split_range(options.get("split", self.split), self.num_goals)
            if len(goals) == 0:
                raise ValueError(f"split {options.get('split', self.split)!r} has no goals")
            task = goals[int(self.np_random.integers(len(goals)))]
        task = _goal_index(task, self.num_goals)
        out = self._backend.start(task)
        self._done = False
        self._last_observation = out["observation"]
        return out["observation"], out["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._backend.state is None:
            raise RuntimeError("call reset() before step()")
        out = self._backend.step(action if isinstance(action, str) else str(action))
        self._done = out["done"]
        self._last_observation = out["observation"]
        return out["observation"], out["reward"], out["done"], False, out["info"]

    def goal(self, index: int):
        """The :class:`~servers.webshop.goals.Goal` of goal ``index`` (for experts and tests)."""
        return self._backend.goal(index)

    def close(self) -> None:
        self._backend.close()
        super().close()


def _goal_index(task: Any, n: int) -> int:
    if isinstance(task, str) and task.startswith("webshop:"):
        task = task.split(":", 1)[1]
    try:
        index = int(task)
    except (TypeError, ValueError):
        raise ValueError(f"task must be a goal index or 'webshop:<i>', not {task!r}") from None
    if not 0 <= index < n:
        raise ValueError(f"goal index {index} out of range (0..{n - 1})")
    return index
