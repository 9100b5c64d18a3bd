"""The shop's pages as HTML, for people, browsers, and agents written for the original WebShop:
the HTML observation mode (:mod:`~gagpo.servers.webshop.observe`) and the served pages
(:mod:`~gagpo.servers.webshop.web.pages_view`) both render here, from ``templates/``.

Templates are compiled once per process (the original recompiled them on every render) and
render from the catalog, goal and search data, never from :class:`~gagpo.servers.webshop.pages.Page`
nodes: a test parses the served HTML the original way and checks that it gives exactly the
page model's text, so the two independent renderings keep each other honest. For that reason
every page carries no visible text beyond the page model's nodes (extra UI uses attributes:
placeholders, aria-labels). Those nodes are the original's, in its order, so that clients
reading its text nodes work unchanged. The done page's values are formatted by
:func:`~gagpo.servers.webshop.pages.done_sections`, shared with the page model, since they are the
original's formats (Python reprs, JSON, pprint) rather than layout.

Conventions kept from the original so that its agents and parsers work unchanged: the search
box is ``#search_input`` (field ``search_query``), the instruction sits in
``#instruction-text h4``, buttons are ``<button class="btn ...">``, product links are
``<a class="product-link">ASIN</a>``, options are radio inputs (``name`` = group, ``value`` =
value) with a ``<label>``, the product image is ``#product-image``, the done page's score is
the ``<pre>`` inside ``#reward`` (its text node follows the label's with nothing between), and
URLs have the original's shapes (see :func:`results_url` and friends).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2

from gagpo.servers.webshop.pages import RESULTS_PER_PAGE, SUB_PAGES, done_sections
from gagpo.servers.webshop.reward import RewardParts, compute_reward
from gagpo.servers.webshop.shop import Shop, State, unique

TEMPLATE_DIR = Path(__file__).parent / "templates"
PLACEHOLDER_IMAGE = "placeholder.svg"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
    autoescape=True,  # every value is escaped: search terms and catalog text are untrusted
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,  # compile once, keep forever
)
_TEMPLATE_NAMES = ("search", "results", "item", "item_sub", "done", "error")
# The element ids of the done page's fields: the original's, so that clients can find them.
_PURCHASED_IDS = (
    "asin", "options", "purchased_attrs", "purchased-category", "purchased-query", "purchased-pc"
)
_TARGET_IDS = (
    "goal-asin", "goal-options", "goal-attrs", "goal-price", "goal-instruction-text",
    "goal-category", "goal-pc", "goal-query",
)
_templates: dict[str, jinja2.Template] = {}


def _template(name: str) -> jinja2.Template:
    t = _templates.get(name)
    if t is None:
        t = _templates[name] = _env.get_template(f"{name}.html")
    return t


# ------------------------------------------------------------------------------------- URLs
# Path segments hold Python literals, as in the original (``['red', 'dress']``,
# ``{'color': 'red'}``). A '/' inside a literal would split the segment (servers decode %2F
# before routing), so it is written as the escape \x2f, which literal_eval reads back as '/'.


def _str_literal(s: str) -> str:
    return repr(s).replace("/", "\\x2f")  # repr never puts '/' inside an escape sequence


def keywords_literal(keywords: Sequence[str]) -> str:
    """``['red', 'dress']``: the original's URL form of a keyword list."""
    return "[" + ", ".join(_str_literal(k) for k in keywords) + "]"


def options_literal(options: Mapping[str, str]) -> str:
    """``{'color': 'red'}``: the original's URL form of the chosen options."""
    items = sorted(options.items())
    return "{" + ", ".join(f"{_str_literal(g)}: {_str_literal(v)}" for g, v in items) + "}"


def _seg(text: str) -> str:
    return quote(str(text), safe="',:")


def search_url(root: str, sid: str) -> str:
    return f"{root}/{_seg(sid)}"


def results_url(root: str, sid: str, keywords: Sequence[str], page: int) -> str:
    return f"{root}/search_results/{_seg(sid)}/{_seg(keywords_literal(keywords))}/{int(page)}"


def item_url(
    root: str,
    sid: str,
    asin: str,
    keywords: Sequence[str],
    page: int,
    options: Mapping[str, str],
) -> str:
    return (
        f"{root}/item_page/{_seg(sid)}/{_seg(asin)}/{_seg(keywords_literal(keywords))}/"
        f"{int(page)}/{_seg(options_literal(options))}"
    )


def item_sub_url(
    root: str,
    sid: str,
    asin: str,
    keywords: Sequence[str],
    page: int,
    sub_page: str,
    options: Mapping[str, str],
) -> str:
    return (
        f"{root}/item_sub_page/{_seg(sid)}/{_seg(asin)}/{_seg(keywords_literal(keywords))}/"
        f"{int(page)}/{_seg(sub_page)}/{_seg(options_literal(options))}"
    )


def done_url(root: str, sid: str, asin: str, options: Mapping[str, str]) -> str:
    return f"{root}/done/{_seg(sid)}/{_seg(asin)}/{_seg(options_literal(options))}"


def state_url(root: str, sid: str, state: State) -> str:
    """The URL of the page that ``state`` shows, in session ``sid``."""
    options = dict(state.options)
    if state.page == "search":
        return search_url(root, sid)
    if state.page == "results":
        return results_url(root, sid, state.keywords, state.page_num)
    if state.page == "item":
        return item_url(root, sid, state.asin, state.keywords, state.page_num, options)
    if state.page == "item_sub":
        return item_sub_url(root, sid, state.asin, state.keywords, state.page_num,
                            state.sub_page, options)
    return done_url(root, sid, state.asin, options)


# ----------------------------------------------------------------------------------- pages


def render_html(
    shop: Shop,
    state: State,
    session_id: str | None = None,
    *,
    root: str = "",
    reward_parts: RewardParts | None = None,
) -> str:
    """The HTML page of ``state``.

    Args:
        session_id: the session id its links carry; ``fixed_<goal>`` by default, which the
            served shop maps back to the same goal.
        root: URL prefix of the shop (a WSGI script root), "" when served at the top.
        reward_parts: the done page's reward breakdown; computed from the state when None.
    """
    sid = session_id if session_id is not None else f"fixed_{state.goal}"
    goal = shop.goal_of(state)
    ctx: dict[str, Any] = {
        "kind": state.page,
        "root": root,
        "placeholder": f"{root}/static/{PLACEHOLDER_IMAGE}",
        "instruction": goal.instruction_text,
        "search_action": search_url(root, sid),
        "back_url": search_url(root, sid),
        "has_search_bar": shop.page(state).has_search_bar,
        "query": " ".join(state.keywords),  # pre-fills the search box (an attribute, not text)
    }
    if state.page == "search":
        return _template("search").render(ctx)
    if state.page == "results":
        return _template("results").render(ctx | _results_context(shop, state, sid, root))
    product = shop.catalog.get(state.asin)
    if product is None:
        raise KeyError(f"unknown product {state.asin!r}")
    chosen = dict(state.options)
    ctx["product"] = product
    ctx["image"] = product.image or ctx["placeholder"]
    if state.page == "done":
        if reward_parts is None:
            reward_parts = compute_reward(product, goal, chosen)
        score = state.reward if state.reward is not None else reward_parts.reward
        sections = done_sections(product, goal, chosen, reward_parts)
        ctx |= {
            "purchased": list(zip(_PURCHASED_IDS, sections["purchased"], strict=True)),
            "target": list(zip(_TARGET_IDS, sections["target"], strict=True)),
            "goal": sections["goal"],
            "reward_info": sections["reward_info"],
            "score": f"{score}",
            "new_session_url": f"{root}/",
        }
        return _template("done").render(ctx)
    item_here = item_url(root, sid, product.asin, state.keywords, state.page_num, chosen)
    if state.page == "item_sub":
        ctx |= {
            "sub_page": state.sub_page,
            "prev_url": item_here,
            "bullets": [b for b in product.bullet_points if b.strip()],
        }
        return _template("item_sub").render(ctx)
    groups = []
    for gi, (group, values) in enumerate(product.options.items()):
        entries = []
        for vi, value in enumerate(unique(values)):
            entries.append(
                {
                    "id": f"opt-{gi}-{vi}",
                    "value": value,
                    "checked": chosen.get(group) == value,
                    "url": item_url(
                        root,
                        sid,
                        product.asin,
                        state.keywords,
                        state.page_num,
                        {**chosen, group: value},
                    ),
                }
            )
        groups.append({"name": group, "values": entries})
    ctx |= {
        "groups": groups,
        "prev_url": results_url(root, sid, state.keywords, state.page_num),
        "sub_pages": [
            (s, item_sub_url(root, sid, product.asin, state.keywords, state.page_num, s, chosen))
            for s in SUB_PAGES
        ],
        "buy_url": done_url(root, sid, product.asin, chosen),
    }
    return _template("item").render(ctx)


def _results_context(shop: Shop, state: State, sid: str, root: str) -> dict[str, Any]:
    hits = shop.results(state.keywords)
    start = (state.page_num - 1) * RESULTS_PER_PAGE
    shown = hits[start : start + RESULTS_PER_PAGE] if start >= 0 else ()
    products = []
    for i in shown:
        p = shop.catalog.products[i]
        products.append(
            {
                "asin": p.asin,
                "title": p.title,
                "price": p.price_tag,
                "image": p.image or f"{root}/static/{PLACEHOLDER_IMAGE}",
                "url": item_url(root, sid, p.asin, state.keywords, state.page_num, {}),
                "visited": p.asin in state.visited,
            }
        )
    return {
        "page_num": state.page_num,
        "total": len(hits),
        "products": products,
        "prev_url": (
            results_url(root, sid, state.keywords, state.page_num - 1)
            if state.page_num > 1
            else None
        ),
        "next_url": results_url(root, sid, state.keywords, state.page_num + 1),
    }


def render_error(status: int, message: str, *, root: str = "") -> str:
    """A small HTML error page (never a traceback)."""
    return _template("error").render(
        kind="error", root=root, status=status, message=message, home_url=f"{root}/"
    )
