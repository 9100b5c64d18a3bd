"""The shop's JSON API (``/api/v1``), for programs.

Each session's state travels in a signed token (:mod:`gagpo.servers.webshop.web.tokens`) that
every response renews and every request sends back; observations come from
:func:`gagpo.servers.webshop.observe.describe`, made of the same facts
(:func:`~gagpo.servers.webshop.observe.view`) that the in-process environment turns into its
info, so transcripts are identical.

Request and response bodies are JSON; ``...`` is ``describe()``'s
``{observation, reward, done, info}`` and the episode's ``{steps, max_steps, truncated}``:

* ``GET /api/v1/info`` -> ``{products, goals, goal_kind, splits, observation_modes, max_steps}``
  (``max_steps``: a session's step limit unless it asks for another, WebShop-v0's)
* ``POST /api/v1/sessions`` ``{goal: int|null, observation_mode, max_steps: int|null}`` -> 201
  ``{session, ...}`` (goal null: a uniformly drawn goal; max_steps null: WebShop-v0's 15)
* ``POST /api/v1/sessions/step`` ``{session, action, observation_mode}`` -> ``{session, ...}``
* ``POST /api/v1/sessions/observe`` ``{session, observation_mode}`` -> ``{session, ...}``
* every session call also takes ``request_infos`` (e.g. ``["expert_action"]``) for extra infos;
  a shop made with ``expert_infos=False`` (``--no-expert-infos``) answers 403 to
  ``expert_action``, and ``/api/v1/info`` lists the extras it offers as ``request_infos``
* ``POST /api/v1/sessions/close`` ``{session}`` -> ``{closed: true}``: sessions live in their
  tokens, so there is nothing to free; it exists so clients can be written as for a stateful
  server.

Episodes end as WebShop-v0's do: ``done`` on the purchase, ``truncated`` when ``max_steps``
steps (valid or not) have bought nothing. The token counts them. A step after the end is a
no-op, as in-process: the unchanged page, reward 0, ``action_valid`` false and a ``feedback``
saying the episode is over (after a truncation also no admissible actions); ``observe`` still
shows the page.

Errors are ``{"error": message}``: 400 malformed body or fields, 403 a withheld extra info,
404 unknown goal or bad token (forged, tampered, or holding a state the shop's transitions
never make), 405 wrong method, 413 body over 256 kB. Invalid actions are not errors: 200 with
``info.action_valid == false``, exactly as in-process.
"""

from __future__ import annotations

import random
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import abort

from gagpo.servers.webshop.goals import split_range
from gagpo.servers.webshop.limits import MAX_SESSION_STEPS, MAX_STEPS
from gagpo.servers.webshop.observe import EXTRA_INFOS, OBSERVATION_MODES, describe
from gagpo.servers.webshop.shop import Shop, StepResult, is_text
from gagpo.servers.webshop.web.tokens import BadToken, Session, decode_session, encode_session

API = "/api/v1"


def is_api_request() -> bool:
    """Whether the current request is for the API (its errors are JSON, not pages)."""
    return request.path == API or request.path.startswith(API + "/")


def goal_kind(shop: Shop) -> str:
    """``synthetic`` goals carry their options as a dict, ``human`` goals as a list."""
    return "synthetic" if shop.goals and isinstance(shop.goals[0].goal_options, dict) else "human"


class ApiViews:
    """The API routes, bound to one shop (no module-level state)."""

    def __init__(self, shop: Shop, secret: str, expert_infos: bool = True) -> None:
        self.shop = shop
        self.secret = secret
        self.extra_infos = EXTRA_INFOS if expert_infos else ()
        self.rng = random.SystemRandom()

    def register(self, app: Flask) -> None:
        add = app.add_url_rule
        add(f"{API}/info", "api_info", self.api_info, methods=["GET"])
        add(f"{API}/sessions", "api_open", self.api_open, methods=["POST"])
        add(f"{API}/sessions/step", "api_step", self.api_step, methods=["POST"])
        add(f"{API}/sessions/observe", "api_observe", self.api_observe, methods=["POST"])
        add(f"{API}/sessions/close", "api_close", self.api_close, methods=["POST"])

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
            # The episode length the environments use (WebShop-v0), and a session's limit
            # unless it asks for another.
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
        max_steps = body.get("max_steps")
        if max_steps is None:
            max_steps = MAX_STEPS
        elif not _is_int(max_steps) or not 1 <= max_steps <= MAX_SESSION_STEPS:
            abort(400, f"'max_steps' must be an integer in 1..{MAX_SESSION_STEPS} or null")
        mode = _mode(body)
        session = Session(self.shop.initial_state(goal), 0, max_steps)
        return self._reply(session, mode), 201

    def api_step(self) -> Response:
        body = _json_body()
        session = self._session(body)
        action = body.get("action")
        if not isinstance(action, str):
            abort(400, "'action' must be a string such as 'search[red shoes]' or 'click[...]'")
        if not is_text(action):
            abort(400, "'action' is not valid Unicode text (it holds a lone surrogate)")
        mode = _mode(body)
        if session.truncated:  # as WebShop-v0 after its limit: a no-op that says so
            over = (f"The episode is over (truncated after {session.steps} steps): open a new "
                    "session.")
            return self._reply(session, mode, StepResult(session.state, 0.0, False, False, over),
                               ended=True)
        # (On the done page the shop's own no-op answers: "The episode is over: ...".)
        result = self.shop.step(session.state, action)
        steps = session.steps + (session.state.page != "done")
        return self._reply(Session(result.state, steps, session.max_steps), mode, result)

    def api_observe(self) -> Response:
        body = _json_body()
        return self._reply(self._session(body), _mode(body))

    def api_close(self) -> Response:
        body = _json_body()
        self._session(body)  # a bad token is still an error, for symmetry with the others
        # Sessions live in their tokens, not on the server: there is nothing to free.
        return jsonify(closed=True)

    def _reply(self, session: Session, mode: str, result: StepResult | None = None,
               ended: bool = False) -> Response:
        """The answer for ``session`` (reached by ``result``); ``ended``: a step refused
        because the episode is over, which leaves nothing admissible."""
        extras = _request_infos(request.get_json(silent=True))
        withheld = [e for e in extras if e not in self.extra_infos]
        if withheld:
            abort(403, f"this shop withholds {withheld} from clients (--no-expert-infos)")
        out = describe(self.shop, session.state, mode, result, extras)
        if ended:
            out["info"].update(admissible_actions=[],
                               available_actions={"has_search_bar": False, "clickables": []})
            if "expert_action" in out["info"]:
                out["info"]["expert_action"] = None
        return jsonify(session=encode_session(session, self.secret), **out,
                       steps=session.steps, max_steps=session.max_steps,
                       truncated=session.truncated)

    def _session(self, body: dict) -> Session:
        token = body.get("session")
        if not isinstance(token, str):
            abort(400, "'session' must be the token string a previous response returned")
        try:
            return decode_session(token, self.secret, self.shop)
        except BadToken as e:
            abort(404, f"bad session token: {e}")


# -- request parsing ------------------------------------------------------------------------


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


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
