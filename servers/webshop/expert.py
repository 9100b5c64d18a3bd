"""The goal-aware expert: the shortest sensible path to reward 1 from any shop state.

It reads the goal, which an agent never sees: it is for tests, demonstrations and warm starts.
Environments expose its choice as ``info["expert_action"]`` when asked (``request_infos``), so
that it works whatever process the shop runs in.
"""

from __future__ import annotations

from gagpo.servers.webshop.goals import Goal
from gagpo.servers.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE
from gagpo.servers.webshop.shop import Shop, State


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
