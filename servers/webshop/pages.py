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

from dataclasses import dataclass
from typing import Literal

Role = Literal["text", "button", "option", "product"]
PageKind = Literal["search", "results", "item", "item_sub", "done"]

BACK_TO_SEARCH = "Back to Search"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BUY_NOW = "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews")
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
