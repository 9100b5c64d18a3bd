"""The shop's engine: sessions as immutable states, and the transitions between them.

One session = one goal. A :class:`State` holds everything a page depends on (page, search
keywords, result page, product, chosen options, sub-page, and the products visited, which
only ``text_rich`` shows). :meth:`Shop.step` maps (state, action) to the next state without
side effects, so the same engine serves the in-process environment, the JSON API (state in a
signed token) and the HTML pages (state in the URL), in any number of processes.

Transitions (as the original): ``search[q]`` works from any page but the done page
(keywords = ``q.lower().split(' ')``, result page 1, options reset); ``click[x]`` must name a
clickable of the current page (case-insensitive), anything else is a no-op with feedback;
``< Prev`` goes from a sub-page back to the item (options kept) and from the item back to the
results (options reset); ``Back to Search`` resets all but the goal; ``Next >`` has no upper
bound; an option value sets its group; ``Buy Now`` ends the episode with the reward.

Fixed presentation bugs (documented): a value that two option groups share sets the first group
not already holding it (the original always set the later group); a value repeated inside one
group is listed once.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gagpo.servers.lru import ENTRY_OVERHEAD, BoundedLRU
from gagpo.servers.webshop.catalog import Catalog
from gagpo.servers.webshop.goals import Goal
from gagpo.servers.webshop.pages import (
    ATTRIBUTES,
    BACK_TO_SEARCH,
    BUY_NOW,
    INSTRUCTION_LABEL,
    NEXT_PAGE,
    PREV_PAGE,
    RESULTS_PER_PAGE,
    SUB_PAGES,
    Node,
    Page,
    done_sections,
    done_texts,
)
from gagpo.servers.webshop.product import Product
from gagpo.servers.webshop.reward import RewardParts, compute_reward
from gagpo.servers.webshop.search import TOP_K, SearchEngine

MAX_QUERY_CHARS = 1000
_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class State:
    """Everything a session's page depends on. Hashable; equal states render equal pages."""

    goal: int
    page: str = "search"
    keywords: tuple[str, ...] = ()
    page_num: int = 1
    asin: str = ""
    options: tuple[tuple[str, str], ...] = ()
    """Chosen options as (group, value) pairs, sorted by group."""
    sub_page: str = ""
    visited: frozenset[str] = frozenset()
    """ASINs opened in this session (shown as clicked in ``text_rich`` only)."""
    reward: float | None = None
    """Set on the done page."""

    def key_parts(self) -> tuple:
        """What the state key is made of: page, query, result page, product, options,
        sub-page. ``visited`` is presentation only and not part of the key."""
        return (self.page, self.keywords, self.page_num, self.asin, self.options, self.sub_page)


@dataclass(frozen=True, slots=True)
class StepResult:
    state: State
    reward: float
    done: bool
    valid: bool
    feedback: str = ""
    reward_parts: RewardParts | None = None


def parse_action(action: str) -> tuple[str, str] | None:
    """``("search"|"click", argument)`` or ``None`` for anything else."""
    if not isinstance(action, str):
        return None
    m = _ACTION.match(action)
    if m is None:
        return None
    return m.group(1), m.group(2)


@dataclass
class Shop:
    """Catalog + search + goals, and the pure functions over sessions."""

    catalog: Catalog
    goals: Sequence[Goal]
    search_engine: SearchEngine
    page_cache_size: int = 8192
    page_cache_bytes: int = 64 << 20
    """The page memo's bounds: entries, and estimated bytes of states and pages together
    (a session state can be large, and which states arrive is the client's choice)."""
    _pages: BoundedLRU[State, Page] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pages = BoundedLRU(self.page_cache_size, self.page_cache_bytes, page_entry_size)

    # -- sessions ---------------------------------------------------------------------------
    def initial_state(self, goal: int) -> State:
        if not 0 <= goal < len(self.goals):
            raise IndexError(f"goal index {goal} out of range (0..{len(self.goals) - 1})")
        return State(goal=goal)

    def goal_of(self, state: State) -> Goal:
        return self.goals[state.goal]

    def results(self, keywords: tuple[str, ...]) -> tuple[int, ...]:
        return self.search_engine.search(keywords, k=TOP_K)

    # -- transitions ------------------------------------------------------------------------
    def step(self, state: State, action: str) -> StepResult:
        """Apply ``action`` to ``state``. Never raises on bad actions: they are no-ops with
        ``valid=False`` and a feedback sentence."""
        if state.page == "done":
            return StepResult(state, 0.0, True, False, "The episode is over: the item was bought.")
        parsed = parse_action(action)
        if parsed is None:
            return self._invalid(
                state, f"Unknown action {_clip(action)!a}: use search[query] or click[button]."
            )
        name, arg = parsed
        if name == "search":
            return self._search(state, arg)
        return self._click(state, arg.strip().lower())

    def _invalid(self, state: State, feedback: str) -> StepResult:
        return StepResult(state, 0.0, False, False, feedback)

    def _search(self, state: State, query: str) -> StepResult:
        problem = query_problem(query)
        if problem is not None:
            return self._invalid(state, problem)
        keywords = tuple(query.lower().split(" "))
        new = State(goal=state.goal, page="results", keywords=keywords, visited=state.visited)
        return StepResult(new, 0.0, False, True)

    def _click(self, state: State, target: str) -> StepResult:
        page = self.page(state)
        if target == "search" or target not in page.clickables:
            return self._invalid(state, f"{_clip(target)!a} is not a clickable on this page.")
        if target == BACK_TO_SEARCH.lower():
            return StepResult(State(goal=state.goal, visited=state.visited), 0.0, False, True)
        if state.page == "results":
            if target == NEXT_PAGE.lower():
                return StepResult(replace(state, page_num=state.page_num + 1), 0.0, False, True)
            if target == PREV_PAGE.lower():
                return StepResult(replace(state, page_num=state.page_num - 1), 0.0, False, True)
            asin = target.upper()
            new = replace(state, page="item", asin=asin, options=(), visited=state.visited | {asin})
            return StepResult(new, 0.0, False, True)
        if state.page == "item_sub":  # only < Prev is left
            return StepResult(replace(state, page="item", sub_page=""), 0.0, False, True)
        # item page
        if target == PREV_PAGE.lower():
            new = replace(state, page="results", asin="", options=(), sub_page="")
            return StepResult(new, 0.0, False, True)
        for sub in SUB_PAGES:
            if target == sub.lower():
                return StepResult(replace(state, page="item_sub", sub_page=sub), 0.0, False, True)
        product = self.catalog.get(state.asin)
        assert product is not None  # an item page only exists for a known product
        if target == BUY_NOW.lower():
            parts = compute_reward(product, self.goal_of(state), dict(state.options))
            new = replace(state, page="done", reward=parts.reward)
            return StepResult(new, parts.reward, True, True, reward_parts=parts)
        return StepResult(
            replace(state, options=choose_option(product, dict(state.options), target)),
            0.0,
            False,
            True,
        )

    # -- pages ------------------------------------------------------------------------------
    def page(self, state: State) -> Page:
        """The page model of ``state`` (memoised: pages are pure functions of the state)."""
        page = self._pages.get(state)
        if page is None:
            page = self._build_page(state)
            self._pages.put(state, page)
        return page

    def _build_page(self, state: State) -> Page:
        instruction = self.goal_of(state).instruction_text
        header = (Node(INSTRUCTION_LABEL), *_texts(instruction))
        if state.page == "search":
            return Page(
                "search",
                (Node("WebShop"), *header, Node("Search", "button")),
                ("search",),
                has_search_bar=True,
            )
        if state.page == "results":
            hits = self.results(state.keywords)
            start = (state.page_num - 1) * RESULTS_PER_PAGE
            shown = hits[start : start + RESULTS_PER_PAGE] if start >= 0 else ()
            nodes = [
                *header,
                Node(BACK_TO_SEARCH, "button"),
                Node(f"Page {state.page_num} (Total results: {len(hits)})"),
            ]
            clickables = [BACK_TO_SEARCH.lower()]
            if state.page_num > 1:
                nodes.append(Node(PREV_PAGE, "button"))
                clickables.append(PREV_PAGE.lower())
            nodes.append(Node(NEXT_PAGE, "button"))
            clickables.append(NEXT_PAGE.lower())
            for i in shown:
                p = self.catalog.products[i]
                nodes.append(Node(p.asin, "product", p.asin in state.visited))
                nodes.extend(_texts(p.title, p.price_tag))
                clickables.append(p.asin.lower())
            return Page("results", tuple(nodes), tuple(clickables))
        product = self.catalog.get(state.asin)
        assert product is not None
        if state.page == "done":
            return self._done_page(state, product)
        base = [*header, Node(BACK_TO_SEARCH, "button"), Node(PREV_PAGE, "button")]
        clickables = [BACK_TO_SEARCH.lower(), PREV_PAGE.lower()]
        if state.page == "item_sub":
            if state.sub_page == "Description":
                base.extend(_texts(product.description))
            elif state.sub_page == "Features":
                base.extend(_texts(*product.bullet_points))
            elif state.sub_page == ATTRIBUTES:  # served by URL only, as the original
                base.extend(_texts(*product.attributes, product.category, product.query,
                                   product.product_category))
            return Page("item_sub", tuple(base), tuple(clickables))
        chosen = dict(state.options)
        values_offered = []
        for group, values in product.options.items():
            base.extend(_texts(group))
            for value in unique(values):
                if value.strip():
                    base.append(Node(value.strip(), "option", chosen.get(group) == value))
                values_offered.append(value)
        base.extend(_texts(product.title, f"Price: {product.price_tag}", "Rating: N.A."))
        base.extend(Node(s, "button") for s in SUB_PAGES)
        base.append(Node(BUY_NOW, "button"))
        # The original lists buttons first, then option values.
        clickables.extend(s.lower() for s in SUB_PAGES)
        clickables.append(BUY_NOW.lower())
        return Page("item", tuple(base), tuple(unique(clickables + values_offered)))

    def _done_page(self, state: State, product: Product) -> Page:
        """The original's done page: purchase, goal, score and reward details."""
        goal = self.goal_of(state)
        options = dict(state.options)
        sections = done_sections(product, goal, options, compute_reward(product, goal, options))
        return Page("done", tuple(_texts(*done_texts(sections, f"{state.reward}"))), ())


def page_entry_size(state: State, page: Page) -> int:
    """Bytes one page-memo entry holds, estimated quickly (a generic deep size costs more than
    building the page): every string measured exactly, each node, tuple slot and set entry
    counted at a generous constant."""
    size = sys.getsizeof
    strings = (
        sum(map(size, state.keywords))
        + sum(map(size, state.visited))
        + sum(size(g) + size(v) for g, v in state.options)
        + size(state.asin)
        + size(state.sub_page)
        + sum(size(n.text) for n in page.nodes)
        + sum(map(size, page.clickables))
    )
    slots = len(state.keywords) + len(state.options) + len(page.clickables)
    fixed = 1024 + ENTRY_OVERHEAD
    return strings + 128 * len(page.nodes) + 64 * len(state.visited) + 16 * slots + fixed


def choose_option(product: Product, chosen: dict[str, str], value: str) -> tuple:
    """Options after clicking ``value``: the first group offering it that does not already
    hold it (the original always picked the last such group)."""
    groups = [g for g, values in product.options.items() if value in values]
    target = next((g for g in groups if chosen.get(g) != value), groups[0] if groups else None)
    if target is not None:
        chosen = {**chosen, target: value}
    return tuple(sorted(chosen.items()))


def query_problem(query: str) -> str | None:
    """Why ``query`` is not a search (the feedback sentence), or None when it is one: a query
    is text (no lone surrogates) with a visible character (not only spaces and control
    characters such as NUL), at most ``MAX_QUERY_CHARS`` long."""
    if not is_text(query):
        return "Search query is not valid text (lone surrogates)."
    if not has_visible(query):
        return "Empty search: write search[some words]."
    if len(query) > MAX_QUERY_CHARS:
        return f"Search query too long ({len(query)} characters; at most {MAX_QUERY_CHARS})."
    return None


def has_visible(text: str) -> bool:
    """Whether ``text`` shows anything: not only spaces and control characters (NUL, ESC,
    zero-width spaces)."""
    return any(c.isprintable() and not c.isspace() for c in text)


def is_text(text: str) -> bool:
    """False for strings holding lone surrogates: legal in JSON and Python literals, but not
    text (they cannot be written out as UTF-8 in a page or a token)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unique(items) -> list:
    return list(dict.fromkeys(items))


def _texts(*texts: str) -> list[Node]:
    """Plain text nodes, stripped, empty ones dropped (as a visible-text parse sees them)."""
    return [Node(t.strip()) for t in texts if t and t.strip()]


def _clip(text: str, n: int = 60) -> str:
    """The start of an offending action, for feedback (quoted with ascii(): feedback text
    stays within the observation space's charset whatever the model wrote)."""
    text = str(text)
    return text if len(text) <= n else text[:n] + "..."
