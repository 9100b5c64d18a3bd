"""The page model: what each page of the shop shows and what can be clicked on it.

A :class:`Page` is a list of text nodes in document order plus the clickables, built straight
from a session state and the catalog. The text observations are rendered from it with no HTML
in between; the Flask templates render the same content as HTML, and a test proves that the
visible text nodes of the served HTML, joined by `` [SEP] ``, equal :func:`render_text`.

Node roles (what ``text_rich`` marks): ``text`` (plain), ``button`` (a button or link button),
``option`` (an option value; ``selected`` when chosen), ``product`` (an ASIN link; ``selected``
when that product was visited in this session).
"""

from __future__ import annotations

import json
import pprint
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # types only: the page model imports nothing of the shop at run time
    from gagpo.servers.webshop.goals import Goal
    from gagpo.servers.webshop.product import Product
    from gagpo.servers.webshop.reward import RewardParts

Role = Literal["text", "button", "option", "product"]
PageKind = Literal["search", "results", "item", "item_sub", "done"]

BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews")
"""The sub-pages the item page links to (the original's default, without its ``--attrs``)."""
ATTRIBUTES = "Attributes"
URL_SUB_PAGES = (*SUB_PAGES, ATTRIBUTES)
"""Sub-pages a URL may name: the original also serves the Attributes page (its product's
attributes, category, query and product category) though no button links to it."""
SEARCH_LABEL = "Instruction: "
"""The instruction's label on the search page; the other pages' label has no space."""
INSTRUCTION_LABEL = "Instruction:"
SCORE_LABEL = "Your score (min 0.0, max 1.0)"
THANK_YOU = "Thank you for shopping with us!"
RESULTS_PER_PAGE = 10
SEARCH_PLACEHOLDER = "search[<query>]"


@dataclass(frozen=True, slots=True)
class Node:
    text: str
    role: Role = "text"
    selected: bool = False


@dataclass(frozen=True, slots=True)
class Page:
    kind: PageKind
    nodes: tuple[Node, ...]
    clickables: tuple[str, ...]
    """Lower-cased texts that ``click[...]`` accepts, in page order."""
    has_search_bar: bool = False

    def available_actions(self) -> dict:
        """The original's ``get_available_actions()`` shape."""
        return {"has_search_bar": self.has_search_bar, "clickables": list(self.clickables)}

    def admissible_actions(self) -> list[str]:
        """Actions that do something here: ``search[<query>]`` (a template: any query) when
        the page has a search bar, then ``click[x]`` for every clickable but the search
        button."""
        actions = [SEARCH_PLACEHOLDER] if self.has_search_bar else []
        actions += [f"click[{c}]" for c in self.clickables if c != "search"]
        return actions


def render_text(page: Page) -> str:
    """The ``text`` observation: visible text nodes joined by `` [SEP] ``."""
    return " [SEP] ".join(n.text for n in page.nodes)


def render_text_rich(page: Page) -> str:
    """The ``text_rich`` observation: one node per line, buttons and clicked buttons marked,
    and ``You have clicked <value>.`` lines first for every chosen option."""
    lines: list[str] = []
    clicked: list[str] = []
    for n in page.nodes:
        if n.role == "button":
            lines.append(f"[button] {n.text} [button_]")
        elif n.role == "option":
            mark = "clicked button" if n.selected else "button"
            lines.append(f"  [{mark}] {n.text} [{mark}_]")
            if n.selected:
                clicked.append(n.text)
        elif n.role == "product":
            mark = "clicked button" if n.selected else "button"
            lines.append(f"\n[{mark}] {n.text} [{mark}_]")
        else:
            lines.append(n.text)
    prefix = "".join(f"You have clicked {t}.\n" for t in reversed(clicked))
    return prefix + "".join(line + "\n" for line in lines)


# --------------------------------------------------------------------------------- done page
# The done page lists what the original's lists, under the same labels and in the same order
# (a client may read any of it): the purchase, the goal, the score, and the reward's parts.
# Values are formatted as the original's template prints them: Python reprs of lists and
# dicts, JSON for the chosen options, pprint for the goal and the reward details.

NO_PRICE_LIMIT_INT = 1_000_000


def done_sections(
    product: Product, goal: Goal, options: Mapping[str, str], parts: RewardParts
) -> dict[str, Any]:
    """The done page's labelled values (everything but the score), formatted as the
    original's template prints them.

    Returns:
        ``{"purchased": [(label, value)...], "target": [(label, value)...], "goal": str,
        "reward_info": str}``.
    """
    g = goal_dict(goal)
    purchased = [
        ("asin", product.asin),
        ("options", _html_safe_json(dict(options))),
        ("attrs", repr(list(product.attributes))),
        ("category", product.category),
        ("query", product.query),
        ("product category", product.product_category),
    ]
    target = [
        ("asin", g["asin"]),
        ("options", repr(g["goal_options"])),
        ("attrs", repr(g["attributes"])),
        ("price upper", repr(g["price_upper"])),
        ("instuction text", g["instruction_text"]),  # the original's label, misspelt
        ("category", g["category"]),
        ("product category", g["product_category"]),
        ("query", g["query"]),
    ]
    return {
        "purchased": purchased,
        "target": target,
        "goal": pprint.pformat(g),
        "reward_info": pprint.pformat(reward_info(parts, goal)),
    }


def _html_safe_json(value: Any) -> str:
    """JSON as Flask's ``tojson`` filter writes it (sorted keys, ASCII, and the characters
    that are special in HTML as \\u escapes): the text the original's page shows."""
    text = json.dumps(value, sort_keys=True)
    for ch in "<>&'":
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


def goal_dict(goal: Goal) -> dict[str, Any]:
    """A goal as the original's goal dict (lists for sequences; the integer 1000000 for "no
    price limit" and the integer weight 1 of human goals, as the original stores them)."""
    options = goal.goal_options
    price_upper = goal.price_upper
    if price_upper == NO_PRICE_LIMIT_INT:
        price_upper = NO_PRICE_LIMIT_INT
    weight = goal.weight
    if not isinstance(options, dict) and weight == 1:
        weight = 1
    return {
        "asin": goal.asin,
        "category": goal.category,
        "query": goal.query,
        "name": goal.name,
        "product_category": goal.product_category,
        "instruction_text": goal.instruction_text,
        "attributes": list(goal.attributes),
        "price_upper": price_upper,
        "goal_options": dict(options) if isinstance(options, dict) else list(options),
        "weight": weight,
    }


def reward_info(parts: RewardParts, goal: Goal) -> dict[str, Any]:
    """The original's verbose reward info: the parts, and each part's weight in the score."""
    n_att = len(goal.attributes)
    n_opt = len(goal.goal_options)
    denominator = n_att + n_opt + 1
    info: dict[str, Any] = {
        "r_type": parts.r_type,
        "r_att": parts.r_att,
        "w_att": n_att / denominator,
        "query_match": parts.query_match,
        "category_match": parts.category_match,
        "title_score": parts.title_score,
    }
    if parts.r_option is not None:
        info["r_option"] = parts.r_option
        info["w_option"] = n_opt / denominator
    if parts.r_price is not None:
        info["r_price"] = parts.r_price
        info["w_price"] = 1 / denominator
    return info


def done_texts(sections: Mapping[str, Any], score: str) -> list[str]:
    """The done page's visible texts, in order, as the page model shows them (stripped)."""
    texts = [THANK_YOU, "Purchased"]
    for label, value in sections["purchased"]:
        texts += [label, value]
    texts.append("Target")
    for label, value in sections["target"]:
        texts += [label, value]
    texts += ["Goal", sections["goal"], "Reward", SCORE_LABEL, score, "Reward Details",
              sections["reward_info"]]
    return texts
