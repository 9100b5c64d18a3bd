"""Scripted policies for WebShop-v0: the goal-aware expert, the original's rule baseline and a
random policy. For tests, demonstrations and baselines (the expert reads the goal, which an
agent never sees).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from servers.webshop.goals import Goal
from servers.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE
from servers.webshop.search import TOP_K
from servers.webshop.shop import Shop, State

MAX_RESULT_PAGES = -(-TOP_K // 10)


def goal_option_values(goal: Goal) -> list[str]:
    options = goal.goal_options
    return list(options.values()) if isinstance(options, dict) else list(options)


def expert_action(shop: Shop, state: State) -> str | None:
    """The expert's next action from ``state``: search the goal product's title, open the goal
    product, choose the goal's options, buy. ``None`` once the episode is over."""
    goal = shop.goal_of(state)
    target = goal.asin
    if state.page == "done":
        return None
    if state.page == "search":
        return f"search[{goal.name}]"
    if state.page == "results":
        page = shop.page(state)
        if target.lower() in page.clickables:
            return f"click[{target.lower()}]"
        hits = shop.results(state.keywords)
        if target in {shop.catalog.products[i].asin for i in hits} and state.page_num < 5:
            return f"click[{NEXT_PAGE.lower()}]"
        if state.keywords != tuple(goal.name.lower().split(" ")):
            return f"search[{goal.name}]"
        return f"search[{goal.instruction_text}]"
    if state.page == "item_sub":
        return f"click[{PREV_PAGE.lower()}]"
    # item page
    if state.asin != target:
        return f"click[{BACK_TO_SEARCH.lower()}]"
    product = shop.catalog.get(target)
    chosen = dict(state.options)
    for value in goal_option_values(goal):
        value = value.strip().lower()
        groups = [g for g, vs in product.options.items() if value in vs]
        if groups and all(chosen.get(g) != value for g in groups):
            return f"click[{value}]"
    return f"click[{BUY_NOW.lower()}]"


def rule_baseline_action(info: dict[str, Any]) -> str:
    """The WebShop paper's rule baseline: search the instruction, click the first result,
    buy with no options."""
    page = info.get("page")
    if page == "search":
        return f"search[{info['instruction']}]"
    if page == "results":
        products = [c for c in info["available_actions"]["clickables"]
                    if c not in (BACK_TO_SEARCH.lower(), NEXT_PAGE.lower(), PREV_PAGE.lower())]
        return f"click[{products[0]}]" if products else f"click[{BACK_TO_SEARCH.lower()}]"
    if page == "item_sub":
        return f"click[{PREV_PAGE.lower()}]"
    return f"click[{BUY_NOW.lower()}]"


def random_action(info: dict[str, Any], rng: np.random.Generator) -> str:
    """Uniform over the admissible actions; a search uses the instruction as its query."""
    actions = info["admissible_actions"]
    action = actions[int(rng.integers(len(actions)))]
    if action.startswith("search["):
        return f"search[{info['instruction']}]"
    return action
