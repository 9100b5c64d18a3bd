"""The shop's HTML pages, for people, browsers and agents written for the original WebShop.

Pages take their whole state from the URL, in the original WebShop's URL shapes, so the
server keeps no memory between requests. ``/fixed_<i>`` is goal i; any other session id maps
to goal ``crc32(id) % n_goals``. Visited products are not tracked on these pages (no server
memory). A URL part the shop cannot read (a malformed literal, a search the shop refuses, an
unknown goal or product) is answered with a 4xx error page.
"""

from __future__ import annotations

import ast
import re
import secrets
import zlib
from typing import Any

from flask import Flask, Response, redirect, request
from werkzeug.exceptions import abort

from gagpo.servers.webshop.html import render_html, results_url, search_url
from gagpo.servers.webshop.pages import URL_SUB_PAGES
from gagpo.servers.webshop.product import Product
from gagpo.servers.webshop.reward import compute_reward
from gagpo.servers.webshop.shop import MAX_QUERY_CHARS, Shop, State, is_text, query_problem

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
_FIXED_ID = re.compile(r"fixed_(\d{1,9})")
_PAGE_NUM = re.compile(r"\d{1,7}")
# URL literals longer than this cannot hold a legal query (each character of a query is at
# most a few characters of literal), so they are refused before literal_eval sees them.
_MAX_LITERAL_CHARS = 8 * MAX_QUERY_CHARS


class PageViews:
    """The page routes, bound to one shop (no module-level state)."""

    def __init__(self, shop: Shop) -> None:
        self.shop = shop

    def register(self, app: Flask) -> None:
        both = ["GET", "POST"]
        add = app.add_url_rule
        add("/", "root", self.root, methods=both)
        add("/<session_id>", "index", self.index, methods=both)
        add(
            "/search_results/<session_id>/<keywords>/<page>",
            "search_results",
            self.search_results,
            methods=both,
        )
        add(
            "/item_page/<session_id>/<asin>/<keywords>/<page>/<options>",
            "item_page",
            self.item_page,
            methods=both,
        )
        add(
            "/item_sub_page/<session_id>/<asin>/<keywords>/<page>/<sub_page>/<options>",
            "item_sub_page",
            self.item_sub_page,
            methods=both,
        )
        add("/done/<session_id>/<asin>/<options>", "done", self.done, methods=both)

    def root(self) -> Response:
        """A fresh session id, as the original: its goal is fixed by the id."""
        return redirect(search_url(request.script_root, f"s{secrets.token_hex(5)}"))

    def index(self, session_id: str) -> Response | str:
        goal = self._goal(session_id)
        query = request.values.get("search_query")
        if query is not None:
            _check_query(query)
            keywords = query.lower().split(" ")
            return redirect(results_url(request.script_root, session_id, keywords, 1), 303)
        return self._page(State(goal=goal), session_id)

    def search_results(self, session_id: str, keywords: str, page: str) -> str:
        goal = self._goal(session_id)
        state = State(
            goal=goal, page="results", keywords=_keywords(keywords), page_num=_page_num(page)
        )
        return self._page(state, session_id)

    def item_page(self, session_id: str, asin: str, keywords: str, page: str, options: str) -> str:
        goal = self._goal(session_id)
        product = self._product(asin)
        state = State(
            goal=goal,
            page="item",
            keywords=_keywords(keywords),
            page_num=_page_num(page),
            asin=product.asin,
            options=_options(options),
        )
        return self._page(state, session_id)

    def item_sub_page(
        self, session_id: str, asin: str, keywords: str, page: str, sub_page: str, options: str
    ) -> str:
        goal = self._goal(session_id)
        product = self._product(asin)
        if sub_page not in URL_SUB_PAGES:
            abort(404, f"No such product page: choose one of {', '.join(URL_SUB_PAGES)}.")
        state = State(
            goal=goal,
            page="item_sub",
            keywords=_keywords(keywords),
            page_num=_page_num(page),
            asin=product.asin,
            options=_options(options),
            sub_page=sub_page,
        )
        return self._page(state, session_id)

    def done(self, session_id: str, asin: str, options: str) -> str:
        goal = self._goal(session_id)
        product = self._product(asin)
        chosen = _options(options)
        parts = compute_reward(product, self.shop.goals[goal], dict(chosen))
        state = State(
            goal=goal, page="done", asin=product.asin, options=chosen, reward=parts.reward
        )
        return render_html(
            self.shop, state, session_id, root=request.script_root, reward_parts=parts
        )

    def _page(self, state: State, session_id: str) -> str:
        return render_html(self.shop, state, session_id, root=request.script_root)

    def _goal(self, session_id: str) -> int:
        """``fixed_<i>`` -> goal i; any other id -> a goal fixed by a hash of the id (stable
        across processes, unlike Python's ``hash``)."""
        if not _SESSION_ID.fullmatch(session_id):
            abort(404, "Unknown session id: use letters, digits, '_' and '-' only.")
        n = len(self.shop.goals)
        if session_id.startswith("fixed_"):
            m = _FIXED_ID.fullmatch(session_id)
            if m is None or int(m.group(1)) >= n:
                abort(404, f"No such goal: fixed_<i> needs 0 <= i < {n}.")
            return int(m.group(1))
        return zlib.crc32(session_id.encode()) % n

    def _product(self, asin: str) -> Product:
        product = self.shop.catalog.get(asin) if len(asin) <= 32 else None
        if product is None:
            abort(404, "No product with that ASIN.")
        return product


# -- URL parsing ----------------------------------------------------------------------------


def _literal(text: str, what: str) -> Any:
    if len(text) > _MAX_LITERAL_CHARS:
        abort(413, f"The {what} in the URL is too long.")
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        abort(400, f"The {what} in the URL is not a valid literal.")


def _keywords(text: str) -> tuple[str, ...]:
    """``['red', 'dress']`` (the original's form) or a plain string of words."""
    if text.startswith("["):
        value = _literal(text, "keywords")
        if not isinstance(value, (list, tuple)) or not all(isinstance(k, str) for k in value):
            abort(400, "Keywords must be a list of strings.")
        keywords = tuple(value)
    else:
        if len(text) > _MAX_LITERAL_CHARS:
            abort(413, "The keywords in the URL are too long.")
        keywords = tuple(text.lower().split(" "))
    _check_query(" ".join(keywords))
    return keywords


def _check_query(query: str) -> None:
    """A search the shop would refuse (the envs' rule: text, a visible character, not too
    long) is a 4xx page, not a results page."""
    problem = query_problem(query)
    if problem is not None:
        abort(413 if len(query) > MAX_QUERY_CHARS else 400, problem)


def _page_num(text: str) -> int:
    """A result page number. Page 0 is served as the original serves it (no products, and
    Next > leads to page 1); negative pages are refused (the original's list slicing shows
    results from the end of the list there)."""
    if not _PAGE_NUM.fullmatch(text):
        abort(400, "The page number must be a whole number, 0 or more.")
    return int(text)


def _options(text: str) -> tuple[tuple[str, str], ...]:
    """``{'color': 'red'}`` -> sorted (group, value) pairs. As in the original, a group or
    value the product does not offer is kept (its clients send such URLs): it shows as chosen
    nowhere, and the reward compares the chosen values with the goal's whatever they are."""
    value = _literal(text, "options")
    if not isinstance(value, dict) or not all(
        isinstance(g, str) and isinstance(v, str) for g, v in value.items()
    ):
        abort(400, "Options must be a dict of strings, like {'color': 'red'}.")
    if not all(is_text(g) and is_text(v) for g, v in value.items()):
        abort(400, "Options must be valid Unicode text.")
    return tuple(sorted(value.items()))
