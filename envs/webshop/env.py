"""WebShop-v0: the shop as a Gymnasium text environment.

In-process by default (the shop's engine runs inside the env: no server, no HTML on the hot
path); ``server_url=...`` talks to a shop served by ``gagpo serve webshop`` over its JSON API
instead. Both give identical transcripts for the same actions.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from gagpo.envs.base import TextEnv, make_state_key, split_name, step_limit, task_index
from gagpo.servers.webshop.goals import SPLITS, GoalKind, split_range
from gagpo.servers.webshop.limits import MAX_STEPS
from gagpo.servers.webshop.observe import (
    EXTRA_INFOS,
    OBSERVATION_MODES,
    ObservationMode,
    view,
    with_feedback,
)
from gagpo.servers.webshop.shop import StepResult

_TASK_ID = re.compile(r"webshop:([0-9]{1,12})")
_ACCEPTS = "a goal index (int) or a task id 'webshop:<i>'"


class _LocalBackend:
    """Runs the shop's engine in this process."""

    def __init__(
        self, catalog, goals: GoalKind, num_products: int | None, mode: ObservationMode,
        request_infos: tuple[str, ...] = (),
    ):
        from gagpo.servers.webshop import open_shop

        self.shop = open_shop(catalog, goals=goals, num_products=num_products)
        self.mode = mode
        self.request_infos = request_infos
        self.state = None

    @property
    def num_goals(self) -> int:
        return len(self.shop.goals)

    def start(self, goal: int) -> dict[str, Any]:
        self.state = self.shop.initial_state(goal)
        return self._answer()

    def step(self, action: str) -> dict[str, Any]:
        result = self.shop.step(self.state, action)
        self.state = result.state
        return self._answer(result)

    def observe(self) -> dict[str, Any]:
        return self._answer()

    def _answer(self, result: StepResult | None = None) -> dict[str, Any]:
        """The shop's view of the session, its facts made the contract's info."""
        v = view(self.shop, self.state, self.mode, result, self.request_infos)
        info = TextEnv.make_info(**v.facts, state_key=make_state_key(*v.key_parts))
        return {"observation": v.observation, "reward": v.reward, "done": v.done, "info": info}

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
        max_steps: the env truncates episodes after this many steps (default
            :data:`~gagpo.servers.webshop.limits.MAX_STEPS`, the papers' and the registered
            ``TimeLimit``'s).

    ``reset(options={"task": i})`` opens goal ``i`` (an int, or the task id
    ``"webshop:<i>"``); ``reset(options={"split": "test"})`` draws a goal of that split with
    the env's seeded RNG. Infos carry the contract's keys (see :mod:`gagpo.envs.base`) plus
    ``available_actions`` (the original's ``{has_search_bar, clickables}``), ``page``,
    ``goal_index``, ``feedback`` after a rejected action and ``reward_parts`` after a purchase.
    After the purchase or the truncation, steps are no-ops that say to call ``reset()``.
    """

    step_only_infos = ("reward_parts",)

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
        max_steps: int = MAX_STEPS,
    ) -> None:
        super().__init__(render_mode=render_mode)
        self.split = split_name(split, self.splits)
        self.max_steps = step_limit(max_steps)
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
            from gagpo.envs.webshop.client import RemoteBackend

            self._backend = RemoteBackend(
                server_url, observation_mode, timeout=timeout, request_infos=request_infos,
                max_steps=self.max_steps,
            )
        self.report_label = (
            "WebShop (served shop)" if server_url
            else "WebShop" if catalog else "WebShop (embedded generated catalog)"
        )
        """How reports name this environment: results on generated data say so."""

    @property
    def num_goals(self) -> int:
        return self._backend.num_goals

    def split_tasks(self, split: str | None = None) -> range:
        """Goal indices of ``split`` (default: the env's), in order."""
        return split_range(split or self.split, self.num_goals)

    @property
    def splits(self) -> Collection[str]:
        return tuple(SPLITS)

    def _reset(self, task: Any, split: str) -> tuple[str, dict[str, Any]]:
        if task is None:
            goals = split_range(split, self.num_goals)
            if len(goals) == 0:
                raise ValueError(f"split {split!r} has no goals")
            task = goals[int(self.np_random.integers(len(goals)))]
        out = self._backend.start(_goal_index(task, self.num_goals))
        return out["observation"], out["info"]

    def _step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        out = self._backend.step(action)
        return out["observation"], out["reward"], out["done"], out["info"]

    def _ended_observation(self, feedback: str) -> str:
        # As for any rejected action: the sentence, then the unchanged page.
        return with_feedback(self._backend.observe()["observation"], feedback,
                             self.observation_mode)

    def _ended_info(self, info: dict[str, Any]) -> dict[str, Any]:
        info = super()._ended_info(info)
        info["available_actions"] = {"has_search_bar": False, "clickables": []}
        return info

    def goal(self, index: int):
        """The :class:`~gagpo.servers.webshop.goals.Goal` of goal ``index`` (for experts and
        tests)."""
        return self._backend.goal(index)

    def close(self) -> None:
        self._backend.close()
        super().close()


def _goal_index(task: Any, n: int) -> int:
    """Goal index of ``options["task"]``: an int (or NumPy integer) or ``"webshop:<i>"``."""
    if isinstance(task, str):
        m = _TASK_ID.fullmatch(task)
        if m is None:
            raise ValueError(f"options['task'] must be {_ACCEPTS}, not {task!r:.60}")
        task = int(m.group(1))
    return task_index(task, n, _ACCEPTS)
