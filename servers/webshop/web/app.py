"""The served shop: HTML pages for people and browsers, and a JSON API for programs.

Both keep no per-session memory on the server, so any number of worker processes or hosts can
serve one shop (gunicorn -w N, several hosts behind a load balancer) and nothing needs freeing:

* HTML pages take their whole state from the URL, in the original WebShop's URL shapes.
  ``/fixed_<i>`` is goal i; any other session id maps to goal ``crc32(id) % n_goals``.
  Visited products are not tracked on these pages (no server memory).
* The JSON API (``/api/v1``) carries each session's state in a signed token
  (:mod:`gagpo.servers.webshop.tokens`) that every response renews and every request sends back;
  observations come from :func:`gagpo.servers.webshop.observe.describe`, the same function the
  in-process environment uses, so transcripts are identical.

API (request and response bodies are JSON; ``...`` is ``describe()``'s
``{observation, reward, done, info}``):

* ``GET /api/v1/info`` -> ``{products, goals, goal_kind, splits, observation_modes, max_steps}``
* ``POST /api/v1/sessions`` ``{goal: int|null, observation_mode}`` -> 201 ``{session, ...}``
  (null: a uniformly drawn goal)
* ``POST /api/v1/sessions/step`` ``{session, action, observation_mode}`` -> ``{session, ...}``
* ``POST /api/v1/sessions/observe`` ``{session, observation_mode}`` -> ``{session, ...}``
* every session call also takes ``request_infos`` (e.g. ``["expert_action"]``) for extra infos;
  a shop made with ``expert_infos=False`` (``--no-expert-infos``) answers 403 to
  ``expert_action``, and ``/api/v1/info`` lists the extras it offers as ``request_infos``
* ``POST /api/v1/sessions/close`` ``{session}`` -> ``{closed: true}``: sessions live in their
  tokens, so there is nothing to free; it exists so clients can be written as for a stateful
  server.

Errors are ``{"error": message}``: 400 malformed body or fields, 403 a withheld extra info,
404 unknown goal or bad token (forged, tampered, or holding a state the shop's transitions
never make), 405 wrong method, 413 body over 256 kB. Invalid actions are not errors: 200 with
``info.action_valid == false``, exactly as in-process. Responses are strict JSON (no NaN or
Infinity).

The token secret comes from ``secret=``, else ``$GAGPO_WEBSHOP_SECRET``, else a random key
made on first use and kept, owner-only, in the cache folder
(:func:`gagpo.servers.webshop.tokens.resolve_secret`): every process of one user on one machine
shares it; shops on several machines need one secret given to each.

The server keeps no sessions, so a client can replay a token: step it again, or buy twice from
one item page. A score reported by a client is therefore only as trustworthy as that client;
the token proves that this shop (or one sharing its secret) produced the state, not that the
episode was played once or without help.
"""

from __future__ import annotations

import ast
import random
import re
import secrets
import zlib
from typing import Any

from flask import Flask, Response, jsonify, redirect, request
from flask.json.provider import DefaultJSONProvider
from gagpo.servers.webshop.catalog import Product
from gagpo.servers.webshop.goals import split_range
from gagpo.servers.webshop.html import render_error, render_html, results_url, search_url
from gagpo.servers.webshop.observe import EXTRA_INFOS, OBSERVATION_MODES, describe
from gagpo.servers.webshop.pages import URL_SUB_PAGES
from gagpo.servers.webshop.reward import compute_reward
from gagpo.servers.webshop.shop import (
    MAX_QUERY_CHARS,
    MAX_STEPS,
    Shop,
    State,
    is_text,
    query_problem,
)
from gagpo.servers.webshop.tokens import BadToken, decode_state, encode_state, resolve_secret
from werkzeug.exceptions import HTTPException, abort

API = "/api/v1"
MAX_CONTENT_LENGTH = 256 * 1024
"""Episode length the environments use (WebShop-v0); the server itself does not cut episodes."""

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
_FIXED_ID = re.compile(r"fixed_(\d{1,9})")
_PAGE_NUM = re.compile(r"\d{1,7}")
# URL literals longer than this cannot hold a legal query (each character of a query is at
# most a few characters of literal), so they are refused before literal_eval sees them.
_MAX_LITERAL_CHARS = 8 * MAX_QUERY_CHARS
_CSP = "default-src 'self'; img-src * data:; script-src 'self'; style-src 'self'"


def create_app(
    shop: Shop | None = None,
    *,
    secret: str | None = None,
    expert_infos: bool = True,
    **open_shop_kwargs: Any,
) -> Flask:
    """The shop's Flask app.

    Args:
        shop: the shop to serve; ``open_shop(**open_shop_kwargs)`` when None.
        secret: signs API session tokens; see the module docstring for the default.
        expert_infos: whether clients may ask for ``expert_action`` (the goal-aware expert's
            next move, which plays the episode for them); False answers such requests 403.
    """
    if shop is None:
        from gagpo.servers.webshop import open_shop

        shop = open_shop(**open_shop_kwargs)
    elif open_shop_kwargs:
        raise TypeError("pass either a shop or open_shop arguments, not both")
    secret = resolve_secret(secret)

    app = Flask(__name__, static_folder="static", template_folder=None)
    app.json = _StrictJSON(app)
    app.config["MAX_CONTENT_LENGTH"] = MAX_CONTENT_LENGTH
    app.extensions["gagpo_webshop"] = shop
    views = _Views(shop, secret, expert_infos)
    views.register(app)
    _register_error_handlers(app)
    return app


class _StrictJSON(DefaultJSONProvider):
    """Flask's JSON, refusing NaN and Infinity (not JSON: clients' parsers reject them). The
    API never has such a number to send; if it ever did, that is a logged 500, not bad JSON."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("allow_nan", False)
        return super().dumps(obj, **kwargs)


def goal_kind(shop: Shop) -> str:
    """``synthetic`` goals carry their options as a dict, ``human`` goals as a list."""
    return "synthetic" if shop.goals and isinstance(shop.goals[0].goal_options, dict) else "human"


class _Views:
    """The routes, bound to one shop (no module-level state)."""

    def __init__(self, shop: Shop, secret: str, expert_infos: bool = True) -> None:
        self.shop = shop
        self.secret = secret
        self.extra_infos = EXTRA_INFOS if expert_infos else ()
        self.rng = random.SystemRandom()

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
        add(f"{API}/info", "api_info", self.api_info, methods=["GET"])
        add(f"{API}/sessions", "api_open", self.api_open, methods=["POST"])
        add(f"{API}/sessions/step", "api_step", self.api_step, methods=["POST"])
        add(f"{API}/sessions/observe", "api_observe", self.api_observe, methods=["POST"])
        add(f"{API}/sessions/close", "api_close", self.api_close, methods=["POST"])

    # -- HTML pages -------------------------------------------------------------------------
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

    # -- JSON API ---------------------------------------------------------------------------
    def api_info(self) -> Response:
        n = len(self.shop.goals)
        splits = {}
        for name in ("test", "eval", "train"):
            r = split_range(name, n)
            splits[name] = [r.start, r.stop]
        return jsonify(
            products=len(self.shop.catalog),
            goals=n,
            goal_kind=goal_kind(self.shop),
            splits=splits,
            observation_modes=list(OBSERVATION_MODES),
            max_steps=MAX_STEPS,
            request_infos=list(self.extra_infos),
        )

    def api_open(self) -> tuple[Response, int]:
        body = _json_body()
        goal = body.get("goal")
        n = len(self.shop.goals)
        if goal is None:
            goal = self.rng.randrange(n)  # uniform (the original never drew goal 0)
        elif not _is_int(goal):
            abort(400, "'goal' must be an integer or null")
        elif not 0 <= goal < n:
            abort(404, f"unknown goal {goal}: goals are 0..{n - 1}")
        mode = _mode(body)
        state = self.shop.initial_state(goal)
        return self._reply(state, mode), 201

    def api_step(self) -> Response:
        body = _json_body()
        state = self._state(body)
        action = body.get("action")
        if not isinstance(action, str):
            abort(400, "'action' must be a string such as 'search[red shoes]' or 'click[...]'")
        if not is_text(action):
            abort(400, "'action' is not valid Unicode text (it holds a lone surrogate)")
        mode = _mode(body)
        result = self.shop.step(state, action)
        return self._reply(result.state, mode, result)

    def api_observe(self) -> Response:
        body = _json_body()
        state = self._state(body)
        return self._reply(state, _mode(body))

    def api_close(self) -> Response:
        body = _json_body()
        self._state(body)  # a bad token is still an error, for symmetry with the others
        # Sessions live in their tokens, not on the server: there is nothing to free.
        return jsonify(closed=True)

    def _reply(self, state: State, mode: str, result=None) -> Response:
        extras = _request_infos(request.get_json(silent=True))
        withheld = [e for e in extras if e not in self.extra_infos]
        if withheld:
            abort(403, f"this shop withholds {withheld} from clients (--no-expert-infos)")
        out = describe(self.shop, state, mode, result, extras)
        return jsonify(session=encode_state(state, self.secret), **out)

    def _state(self, body: dict) -> State:
        token = body.get("session")
        if not isinstance(token, str):
            abort(400, "'session' must be the token string a previous response returned")
        try:
            return decode_state(token, self.secret, self.shop)
        except BadToken as e:
            abort(404, f"bad session token: {e}")


# -- request parsing helpers ----------------------------------------------------------------


def _json_body() -> dict:
    try:
        body = request.get_json(force=True, silent=True)  # 413 still raises
    except RecursionError:  # absurdly deep nesting is malformed, not a crash
        body = None
    if not isinstance(body, dict):
        abort(400, "the request body must be a JSON object")
    return body


def _mode(body: dict) -> str:
    mode = body.get("observation_mode", "text")
    if mode is None:
        mode = "text"
    if not isinstance(mode, str) or mode not in OBSERVATION_MODES:
        abort(400, f"'observation_mode' must be one of {list(OBSERVATION_MODES)}")
    return mode


def _request_infos(body: Any) -> tuple[str, ...]:
    asked = body.get("request_infos") if isinstance(body, dict) else None
    if asked is None:
        return ()
    if not isinstance(asked, list) or any(a not in EXTRA_INFOS for a in asked):
        abort(400, f"'request_infos' must be a list drawn from {list(EXTRA_INFOS)}")
    return tuple(asked)


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


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_api() -> bool:
    return request.path == API or request.path.startswith(API + "/")


def _register_error_handlers(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        message = e.description or e.name
        if _is_api():
            return jsonify(error=message), e.code
        return render_error(e.code or 500, message, root=request.script_root), e.code

    @app.errorhandler(Exception)
    def crash(e: Exception):
        # Never a traceback to the client; the log keeps it for the operator.
        app.logger.exception("unhandled error on %s %s", request.method, request.path)
        if _is_api():
            return jsonify(error="internal server error"), 500
        return render_error(500, "Something went wrong on our side.", root=request.script_root), 500

    @app.after_request
    def harden(response: Response) -> Response:
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        if response.mimetype == "text/html":
            response.headers.setdefault("Content-Security-Policy", _CSP)
        return response
