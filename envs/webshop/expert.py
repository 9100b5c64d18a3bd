"""Scripted WebShop-v0 play: the goal-aware expert and the original's rule baseline, for tests,
demonstrations and baselines (the expert reads the goal, which an agent never sees). A uniform
random policy is :class:`gagpo.agents.policies.scripted.RandomPolicy`.
"""

from __future__ import annotations

from typing import Any

from gagpo.servers.webshop.expert import expert_action, goal_option_values
from gagpo.servers.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE

__all__ = ["expert_action", "goal_option_values", "rule_baseline_action"]


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
