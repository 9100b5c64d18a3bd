"""The JSON API (state in signed tokens) and the hardening of every route.

Each bad-input test asserts a 4xx (or, for actions, a valid=False no-op), never a 500, and
that the app still answers afterwards.
"""

from __future__ import annotations

import json
import threading
from urllib.parse import quote

import pytest
import requests

from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.observe import describe
from gagpo.servers.webshop.web.app import MAX_CONTENT_LENGTH, create_app
from gagpo.servers.webshop.web.tokens import BadToken, decode_state, encode_state

SECRET = "test-secret"

# The errors' whole messages, as clients read them.
BODY_ERROR = "the request body must be a JSON object"
GOAL_ERROR = "'goal' must be an integer or null"
MODE_ERROR = "'observation_mode' must be one of ['text', 'text_rich', 'html']"
SESSION_ERROR = "'session' must be the token string a previous response returned"
ACTION_ERROR = "'action' must be a string such as 'search[red shoes]' or 'click[...]'"
SURROGATE_ERROR = "'action' is not valid Unicode text (it holds a lone surrogate)"
REQUEST_INFOS_ERROR = "'request_infos' must be a list drawn from ['expert_action']"
WITHHELD_ERROR = "this shop withholds ['expert_action'] from clients (--no-expert-infos)"
METHOD_ERROR = "The method is not allowed for the requested URL."


@pytest.fixture(scope="module")
def shop():
    return open_shop(num_products=200)


@pytest.fixture
def app(shop):
    """A new app for every test (about 5 ms): each test that uses it runs create_app and the
    API's registration (routes, methods, the expert-infos switch), so mutation testing, which
    runs for each mutant only the tests that ran its code, counts all of them there."""
    return create_app(shop, secret=SECRET)


@pytest.fixture
def client(app):
    c = app.test_client()
    yield c
    # Whatever a test sent, the app must still answer.
    assert c.get("/api/v1/info").status_code == 200


@pytest.fixture
def closed_client(shop):
    """A client of a shop started with ``--no-expert-infos`` (``expert_infos=False``)."""
    c = create_app(shop, secret=SECRET, expert_infos=False).test_client()
    yield c
    assert c.get("/api/v1/info").status_code == 200


def post(client, path: str, body) -> tuple[int, dict]:
    r = client.post(f"/api/v1/{path}", json=body)
    assert r.status_code != 500
    return r.status_code, r.get_json()


def open_session(client, goal=0, mode="text") -> dict:
    code, out = post(client, "sessions", {"goal": goal, "observation_mode": mode})
    assert code == 201, out
    return out


def step(client, token: str, action: str, mode: str = "text") -> dict:
    code, out = post(client, "sessions/step",
                     {"session": token, "action": action, "observation_mode": mode})
    assert code == 200, out
    return out


def plain(x):
    """What a value looks like after a JSON round trip."""
    return json.loads(json.dumps(x))


# ------------------------------------------------------------------------------- happy path


def test_info(client, shop):
    r = client.get("/api/v1/info")
    assert r.status_code == 200
    info = r.get_json()
    n = len(shop.goals)
    assert info["products"] == len(shop.catalog)
    assert info["goals"] == n
    assert info["goal_kind"] == "human"
    assert info["splits"]["test"] == [0, min(500, n)]
    assert info["splits"]["train"][1] == n
    assert info["observation_modes"] == ["text", "text_rich", "html"]
    assert info["max_steps"] == 15
    assert info["request_infos"] == ["expert_action"]
    assert set(info) == {"products", "goals", "goal_kind", "splits", "observation_modes",
                         "max_steps", "request_infos"}


def test_info_of_a_shop_without_expert_infos_offers_no_request_infos(closed_client):
    info = closed_client.get("/api/v1/info").get_json()
    assert info["request_infos"] == []


def test_api_views_offer_expert_infos_unless_told_otherwise(shop):
    """``ApiViews`` on its own (as another app may register it) offers ``expert_action``."""
    from flask import Flask

    from gagpo.servers.webshop.web.api_view import ApiViews

    app = Flask(__name__)
    ApiViews(shop, SECRET).register(app)
    client = app.test_client()
    assert client.get("/api/v1/info").get_json()["request_infos"] == ["expert_action"]
    code, out = post(client, "sessions", {"goal": 0, "request_infos": ["expert_action"]})
    assert code == 201 and out["info"]["expert_action"].startswith("search[")


def test_api_endpoints_keep_their_names(app):
    """The routes' endpoint names are stable, for ``url_for`` in code built on the app."""
    from flask import url_for

    with app.test_request_context():
        assert {name: url_for(name) for name in (
            "api_info", "api_open", "api_step", "api_observe", "api_close")} == {
            "api_info": "/api/v1/info", "api_open": "/api/v1/sessions",
            "api_step": "/api/v1/sessions/step", "api_observe": "/api/v1/sessions/observe",
            "api_close": "/api/v1/sessions/close"}


def test_open_step_observe_close_round_trip(client, shop):
    out = open_session(client, goal=3)
    assert out["observation"].startswith("WebShop [SEP] Instruction:")
    assert out["info"]["goal_index"] == 3
    assert out["info"]["instruction"] == shop.goals[3].instruction_text
    assert out["reward"] == 0.0 and out["done"] is False
    after = step(client, out["session"], "search[red shoes]")
    assert after["info"]["action_valid"] is True and after["info"]["page"] == "results"
    code, seen = post(client, "sessions/observe", {"session": after["session"]})
    assert code == 200
    assert seen["observation"] == after["observation"]
    assert seen["info"]["state_key"] == after["info"]["state_key"]
    code, rich = post(client, "sessions/observe",
                      {"session": after["session"], "observation_mode": "text_rich"})
    assert code == 200 and "[button] Back to Search [button_]" in rich["observation"]
    code, closed = post(client, "sessions/close", {"session": after["session"]})
    assert (code, closed) == (200, {"closed": True})


def test_random_goal(client, shop):
    goals = {open_session(client, goal=None)["info"]["goal_index"] for _ in range(20)}
    assert all(0 <= g < len(shop.goals) for g in goals)
    assert len(goals) > 1


@pytest.mark.parametrize("mode", ["text", "text_rich", "html"])
def test_episode_equals_in_process_transcript(client, shop, mode):
    """search, click the goal product (or the first hit), choose an option, buy: the API's
    responses equal describe() on Shop.step, field for field, beside the session and its
    step count."""
    episode = ("session", "steps", "max_steps", "truncated")
    for g in range(5):
        goal = shop.goals[g]
        state = shop.initial_state(g)
        out = open_session(client, goal=g, mode=mode)
        assert {k: v for k, v in out.items() if k not in episode} == plain(
            describe(shop, state, mode))
        assert (out["steps"], out["max_steps"], out["truncated"]) == (0, 15, False)
        actions = [f"search[{goal.instruction_text}]"]
        token = out["session"]
        for i in range(4):
            if i < len(actions):
                action = actions[i]
            elif state.page == "results":
                hits = [c for c in shop.page(state).clickables if shop.catalog.get(c)]
                action = f"click[{goal.asin.lower() if goal.asin.lower() in hits else hits[0]}]"
            elif state.page == "item" and not state.options and shop.catalog.get(
                    state.asin).options:
                group, values = next(iter(shop.catalog.get(state.asin).options.items()))
                action = f"click[{values[0]}]"
            else:
                action = "click[buy now]"
            result = shop.step(state, action)
            state = result.state
            out = step(client, token, action, mode)
            token = out["session"]
            assert {k: v for k, v in out.items() if k not in episode} == plain(
                describe(shop, state, mode, result))
            assert (out["steps"], out["truncated"]) == (i + 1, False)
            if result.done:
                assert out["done"] is True and "reward_parts" in out["info"]
                break


def test_api_equals_the_gym_environment(client, shop):
    """The in-process WebShop-v0 environment and the API give the same transcript."""
    from gagpo.envs.webshop.env import WebShopEnv

    env = WebShopEnv(num_products=200)
    g = 7
    obs, info = env.reset(options={"task": g})
    out = open_session(client, goal=g)
    assert (out["observation"], out["info"]) == (obs, plain(info))
    token = out["session"]
    for action in (f"search[{info['instruction']}]", "click[nothing here]", "click[next >]"):
        obs, reward, done, _, info = env.step(action)
        out = step(client, token, action)
        token = out["session"]
        assert (out["observation"], out["reward"], out["done"], out["info"]) == (
            obs, reward, done, plain(info))
    env.close()


def test_a_step_on_a_finished_session_pays_0_as_the_env_does(client, shop):
    """After the purchase a session is over: a step on it pays 0, stays done and changes
    nothing (the API and the in-process env agree), so a client that keeps stepping is never
    paid twice."""
    from gagpo.envs.webshop.env import WebShopEnv

    env = WebShopEnv(num_products=200, request_infos=["expert_action"])
    g = 2
    _, info = env.reset(options={"task": g})
    token = open_session(client, goal=g)["session"]
    while info["expert_action"] is not None:
        action = info["expert_action"]
        _, reward, done, _, info = env.step(action)
        out = step(client, token, action)
        token = out["session"]
        assert (out["reward"], out["done"]) == (reward, done)
    assert done and reward > 0 and out["info"]["score"] == reward
    bought = out["info"]
    for action in ["click[buy now]", "search[anything]", "click[back to search]"]:
        _, reward, done, _, info = env.step(action)
        out = step(client, token, action)
        assert (out["reward"], out["done"]) == (reward, done) == (0.0, True)
        assert out["info"]["action_valid"] is False and "reward_parts" not in out["info"]
        for key in ("won", "score", "state_key", "page"):
            assert out["info"][key] == info[key] == bought[key], key
        assert decode_state(out["session"], SECRET, shop) == decode_state(token, SECRET, shop)
    env.close()


def test_sessions_end_at_the_envs_step_limit(client, shop):
    """``/api/v1/info`` tells clients the envs' step limit (15), and sessions keep it: the API
    answers the first 15 steps as the in-process env does, ``truncated`` at the 15th as the
    env's, and a purchase after them is refused as the env refuses it (reward 0, nothing
    admissible, the episode said to be over), whatever the client counts."""
    from gagpo.envs.webshop.env import WebShopEnv

    limit = client.get("/api/v1/info").get_json()["max_steps"]
    env = WebShopEnv(num_products=200)
    assert env.max_steps == limit == 15
    g = 2
    goal = shop.goals[g]
    env.reset(options={"task": g})
    token = open_session(client, goal=g)["session"]
    actions = [f"search[{goal.name}]", f"click[{goal.asin.lower()}]"]
    actions += ["click[nothing]"] * (limit - len(actions))
    for t, action in enumerate(actions, 1):
        obs, reward, done, truncated, info = env.step(action)
        out = step(client, token, action)
        token = out["session"]
        assert (out["observation"], out["reward"], out["done"], out["info"]) == (
            obs, reward, done, plain(info))
        assert not done and truncated == (t == limit) == out["truncated"]
        assert (out["steps"], out["max_steps"]) == (t, limit)
    assert "click[buy now]" in out["info"]["admissible_actions"]
    page = post(client, "sessions/observe", {"session": token})[1]["observation"]
    obs, reward, done, truncated, info = env.step("click[buy now]")  # step 16: ended
    assert (reward, done, truncated) == (0.0, False, True)
    for _ in range(2):  # a purchase after the limit, twice: no-ops that say so
        out = step(client, token, "click[buy now]")
        assert (out["reward"], out["done"], out["truncated"], out["steps"]) == (
            0.0, False, True, limit)
        assert out["info"]["action_valid"] is False and out["info"]["admissible_actions"] == []
        assert out["info"]["feedback"] == ("The episode is over (truncated after 15 steps): "
                                           "open a new session.")
        assert out["observation"] == out["info"]["feedback"] + " [SEP] " + page
        assert info["admissible_actions"] == [] and info["action_valid"] is False  # the env's
        token = out["session"]
    out = post(client, "sessions/observe", {"session": token})[1]
    assert (out["observation"], out["truncated"]) == (page, True)  # the page, unchanged
    env.close()


def test_a_session_keeps_the_step_limit_it_asked_for(client, shop):
    """``max_steps`` at the opening (the remote WebShop-v0 sends its own): the episode is
    truncated there; a purchase before it ends the episode (done, not truncated) and is not a
    step past the end; refused limits are 400s."""
    goal = shop.goals[2]
    code, out = post(client, "sessions", {"goal": 2, "max_steps": 3})
    assert code == 201 and (out["steps"], out["max_steps"], out["truncated"]) == (0, 3, False)
    token = out["session"]
    for t, action in enumerate([f"search[{goal.name}]", "click[nothing]", "click[nothing]"], 1):
        out = step(client, token, action)
        token = out["session"]
        assert (out["steps"], out["truncated"]) == (t, t == 3)
    assert step(client, token, "click[< prev]")["info"]["action_valid"] is False

    out = post(client, "sessions", {"goal": 2, "max_steps": 3})[1]
    token = out["session"]
    for action in (f"search[{goal.name}]", f"click[{goal.asin.lower()}]", "click[buy now]"):
        out = step(client, token, action)
        token = out["session"]
    assert (out["done"], out["truncated"], out["steps"]) == (True, False, 3)
    after = step(client, token, "click[buy now]")  # the shop's own no-op on its done page
    assert (after["done"], after["reward"], after["steps"]) == (True, 0.0, 3)
    assert after["info"]["action_valid"] is False
    for bad in (0, -1, 1.5, True, "15", 10**6 + 1):
        code, out = post(client, "sessions", {"goal": 2, "max_steps": bad})
        assert code == 400 and "max_steps" in out["error"], bad
    assert post(client, "sessions", {"goal": 2, "max_steps": None})[1]["max_steps"] == 15


@pytest.mark.parametrize("limit", [1, 2, 15])
def test_a_session_is_truncated_at_exactly_its_step_limit(client, shop, limit):
    """Step ``max_steps - 1`` leaves the session open, step ``max_steps`` ends it (valid
    actions or not, the smallest limit too), and the step after is the no-op of an ended
    episode that still counts ``max_steps``."""
    code, out = post(client, "sessions", {"goal": 2, "max_steps": limit})
    assert code == 201 and (out["steps"], out["max_steps"], out["truncated"]) == (0, limit, False)
    token = out["session"]
    for t in range(1, limit + 1):
        out = step(client, token, "click[nothing]" if t % 2 else "search[socks]")
        token = out["session"]
        assert (out["steps"], out["truncated"], out["done"]) == (t, t == limit, False), t
    after = step(client, token, f"search[{shop.goals[2].name}]")
    assert (after["steps"], after["truncated"], after["reward"]) == (limit, True, 0.0)
    assert after["info"]["action_valid"] is False
    assert after["info"]["feedback"] == (f"The episode is over (truncated after {limit} "
                                         "steps): open a new session.")


def test_the_largest_step_limit_is_taken_and_one_more_is_a_clear_400(client):
    from gagpo.servers.webshop.limits import MAX_SESSION_STEPS

    code, out = post(client, "sessions", {"goal": 2, "max_steps": MAX_SESSION_STEPS})
    assert code == 201 and (out["max_steps"], out["truncated"]) == (MAX_SESSION_STEPS, False)
    out = step(client, out["session"], "click[nothing]")
    assert (out["steps"], out["max_steps"], out["truncated"]) == (1, MAX_SESSION_STEPS, False)
    for bad in (MAX_SESSION_STEPS + 1, 0, [3], {"max_steps": 3}, ""):
        code, out = post(client, "sessions", {"goal": 2, "max_steps": bad})
        assert (code, out) == (400, {"error": "'max_steps' must be an integer in "
                                              f"1..{MAX_SESSION_STEPS} or null"}), bad


def test_a_token_holds_a_step_count_within_its_limit_only(client, shop):
    """What a token may carry (even one signed with the secret): 0 <= steps <= max_steps and
    1 <= max_steps <= MAX_SESSION_STEPS, integers; anything else is a bad token (404 from
    the API), never a session past its own end or with a limit no request could ask for."""
    from gagpo.servers.webshop.limits import MAX_SESSION_STEPS
    from gagpo.servers.webshop.web.tokens import Session, decode_session, encode_session

    state = shop.initial_state(2)
    for steps, limit in ((0, 1), (1, 1), (14, 15), (MAX_SESSION_STEPS, MAX_SESSION_STEPS)):
        session = Session(state, steps, limit)
        assert decode_session(encode_session(session, SECRET), SECRET, shop) == session
    for steps, limit in ((2, 1), (16, 15), (-1, 15), (0, 0), (0, MAX_SESSION_STEPS + 1),
                         (True, 15), (1, 15.0)):
        token = encode_session(Session(state, steps, limit), SECRET)
        with pytest.raises(BadToken, match="the step count must be in 0..limit"):
            decode_session(token, SECRET, shop)
        code, out = post(client, "sessions/step", {"session": token, "action": "click[x]"})
        assert code == 404 and out["error"].startswith("bad session token"), (steps, limit)


def test_token_round_trip(shop):
    state = shop.initial_state(1)
    for action in ("search[blue cotton dress]", "click[next >]"):
        state = shop.step(state, action).state
    token = encode_state(state, SECRET)
    assert decode_state(token, SECRET) == state
    with pytest.raises(BadToken):
        decode_state(token, "another secret")


def test_signed_but_malformed_payloads_are_bad_tokens():
    """Even with the secret (as if it leaked), a token cannot smuggle in a zip bomb or a
    payload of the wrong shape (tests/test_tokens.py: nor a state the shop never makes)."""
    from itsdangerous import URLSafeSerializer

    from gagpo.servers.webshop.web.tokens import SALT

    signer = URLSafeSerializer(SECRET, salt=SALT)
    bomb = signer.dumps([1, 0, 0, ["a" * 20_000_000], 1, "", [], "", [], None])
    assert len(bomb) < 64 * 1024  # small on the wire...
    for payload in (bomb, signer.dumps({"goal": 0}), signer.dumps([1, "0", 0, [], 1, "", [], "",
                    [], None]), signer.dumps([1, 0, 9, [], 1, "", [], "", [], None]),
                    signer.dumps([1, True, 0, [], 1, "", [], "", [], None])):
        with pytest.raises(BadToken):
            decode_state(payload, SECRET)


def test_a_step_past_the_limit_leaves_nothing_to_do(client):
    """The no-op after a truncation is not done and offers nothing: no admissible action, no
    search bar, no clickable, and an ``expert_action`` of None when asked for (unasked, the
    info has none); everything else is the page's, as a look at it shows."""
    code, out = post(client, "sessions", {"goal": 2, "max_steps": 1})
    assert code == 201
    token = step(client, out["session"], "search[socks]")["session"]
    ended = {"admissible_actions", "available_actions", "action_valid", "feedback",
             "expert_action"}
    for asked in (["expert_action"], None):
        code, out = post(client, "sessions/step", {"session": token, "action": "click[next >]",
                                                   "request_infos": asked})
        assert code == 200
        assert (out["done"], out["reward"], out["truncated"], out["steps"]) == (
            False, 0.0, True, 1)
        info = out["info"]
        assert info["action_valid"] is False
        assert info["feedback"] == ("The episode is over (truncated after 1 steps): open a "
                                    "new session.")
        assert info["admissible_actions"] == []
        assert info["available_actions"] == {"has_search_bar": False, "clickables": []}
        if asked:
            assert info["expert_action"] is None
        else:
            assert "expert_action" not in info
        code, seen = post(client, "sessions/observe", {"session": token, "request_infos": asked})
        assert code == 200 and seen["info"]["admissible_actions"] != []
        assert set(info) == set(seen["info"]) | {"feedback"}
        assert {k: v for k, v in info.items() if k not in ended} == {
            k: v for k, v in seen["info"].items() if k not in ended}


# -------------------------------------------------------------- extra infos (request_infos)


def test_expert_action_is_given_only_when_asked_for(client, shop):
    """``request_infos: ["expert_action"]`` adds the expert's next move to the opening, a step
    and a look; without it (absent, null or an empty list) the info has no such key."""
    from gagpo.servers.webshop.expert import expert_action

    ask = {"request_infos": ["expert_action"]}
    code, out = post(client, "sessions", {"goal": 2, **ask})
    state = shop.initial_state(2)
    assert code == 201 and out["info"]["expert_action"] == expert_action(shop, state)
    token, action = out["session"], out["info"]["expert_action"]
    code, out = post(client, "sessions/step", {"session": token, "action": action, **ask})
    state = shop.step(state, action).state
    assert code == 200 and out["info"]["expert_action"] == expert_action(shop, state)
    code, seen = post(client, "sessions/observe", {"session": out["session"], **ask})
    assert code == 200 and seen["info"]["expert_action"] == out["info"]["expert_action"]
    calls = (("sessions", {"goal": 2}), ("sessions/step", {"session": token, "action": action}),
             ("sessions/observe", {"session": token}))
    for unasked in ({}, {"request_infos": None}, {"request_infos": []}):
        for path, body in calls:
            code, out = post(client, path, {**body, **unasked})
            assert code in (200, 201) and "expert_action" not in out["info"], (path, unasked)


@pytest.mark.parametrize("asked", [
    "expert_action", 5, True, {"expert_action": True}, ["no_such_info"],
    ["expert_action", "score"], [None], [["expert_action"]],
])
def test_request_infos_must_be_a_list_of_known_names(client, closed_client, asked):
    """Anything but a list of the names the API knows is a 400 that names them, on every
    session call, also on a shop that withholds them (the request is malformed either way)."""
    token = open_session(client)["session"]
    calls = (("sessions", {"goal": 0}),
             ("sessions/step", {"session": token, "action": "search[x]"}),
             ("sessions/observe", {"session": token}))
    for c in (client, closed_client):
        for path, body in calls:
            code, out = post(c, path, {**body, "request_infos": asked})
            assert (code, out) == (400, {"error": REQUEST_INFOS_ERROR}), (path, asked)


def test_a_shop_without_expert_infos_answers_403_to_expert_action(closed_client):
    """``--no-expert-infos``: asking for ``expert_action`` is a 403 that says why, on every
    session call; the same calls without it are answered as usual."""
    ask = {"request_infos": ["expert_action"]}
    assert post(closed_client, "sessions", {"goal": 0, **ask}) == (
        403, {"error": WITHHELD_ERROR})
    code, out = post(closed_client, "sessions", {"goal": 0})
    assert code == 201 and "expert_action" not in out["info"]
    token = out["session"]
    for path, body in (("sessions/step", {"session": token, "action": "search[red]"}),
                       ("sessions/observe", {"session": token})):
        assert post(closed_client, path, {**body, **ask}) == (
            403, {"error": WITHHELD_ERROR}), path
        code, out = post(closed_client, path, {**body, "request_infos": []})
        assert code == 200 and "expert_action" not in out["info"], path


# ------------------------------------------------------------------ invalid actions (200)


@pytest.mark.parametrize("action", [
    "dance", "", "click[", "click[]", "search[]", "search[   ]", "click[no such button]",
    "click[search]", "click[buy now]", "search", "CLICK[next >]", "click[next >] extra",
])
def test_invalid_actions_are_no_ops(client, action):
    start = open_session(client, goal=0)
    out = step(client, start["session"], action)
    assert out["info"]["action_valid"] is False
    assert out["reward"] == 0.0 and out["done"] is False
    assert out["info"]["state_key"] == start["info"]["state_key"]
    assert decode_state(out["session"], SECRET) == decode_state(start["session"], SECRET)


def test_unknown_asin_click_is_a_no_op(client):
    start = open_session(client, goal=0)
    results = step(client, start["session"], "search[red]")
    out = step(client, results["session"], "click[b0nosuch00]")
    assert out["info"]["action_valid"] is False
    assert out["info"]["state_key"] == results["info"]["state_key"]


def test_100kb_query_via_api_is_a_no_op(client):
    start = open_session(client, goal=0)
    out = step(client, start["session"], "search[" + "a" * 100_000 + "]")
    assert out["info"]["action_valid"] is False
    assert out["info"]["state_key"] == start["info"]["state_key"]


def test_body_over_limit_is_413(client):
    start = open_session(client, goal=0)
    body = {"session": start["session"], "action": "search[" + "a" * MAX_CONTENT_LENGTH + "]"}
    r = client.post("/api/v1/sessions/step", json=body)
    assert r.status_code == 413 and "error" in r.get_json()


def test_100kb_query_via_human_routes_is_refused(client):
    r = client.post("/fixed_0", data={"search_query": "a " * 50_000})
    assert r.status_code in (400, 413)
    long_keywords = quote(str(["a"] * 30_000))
    r = client.get(f"/search_results/fixed_0/{long_keywords}/1")
    assert r.status_code in (400, 413)
    assert b"Traceback" not in r.data


# -------------------------------------------------------------------------- bad API input


@pytest.mark.parametrize("token", ["", "garbage", "a.b.c", "." * 10, "x" * 70_000])
def test_bad_tokens_are_404(client, token):
    for path in ("sessions/step", "sessions/observe", "sessions/close"):
        code, out = post(client, path, {"session": token, "action": "click[next >]"})
        assert code == 404, out
        assert "error" in out


def test_tampered_token_is_404(client, shop):
    token = open_session(client, goal=0)["session"]
    i = len(token) // 2
    tampered = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1:]
    code, out = post(client, "sessions/observe", {"session": tampered})
    assert code == 404 and "error" in out
    forged = encode_state(shop.initial_state(0), "guessed secret")
    assert post(client, "sessions/observe", {"session": forged})[0] == 404


def test_token_for_another_shop_is_404(client, shop):
    # Signed with our secret but holding a goal this shop does not have.
    from gagpo.servers.webshop.shop import State

    token = encode_state(State(goal=len(shop.goals) + 5), SECRET)
    assert post(client, "sessions/observe", {"session": token})[0] == 404
    token = encode_state(State(goal=0, page="item", asin="NOSUCHASIN"), SECRET)
    assert post(client, "sessions/step", {"session": token, "action": "click[buy now]"})[0] == 404


@pytest.mark.parametrize("body", [
    {"goal": "3"}, {"goal": True}, {"goal": 1.5}, {"goal": [1]},
    {"goal": 0, "observation_mode": "xml"}, {"goal": 0, "observation_mode": 5},
    {"goal": 0, "observation_mode": "TEXT"},
])
def test_open_wrong_types_are_400(client, body):
    error = MODE_ERROR if "observation_mode" in body else GOAL_ERROR
    assert post(client, "sessions", body) == (400, {"error": error})


@pytest.mark.parametrize("goal", [-1, 10**9, 10**30])
def test_open_unknown_goal_is_404(client, shop, goal):
    n = len(shop.goals)
    assert post(client, "sessions", {"goal": goal}) == (
        404, {"error": f"unknown goal {goal}: goals are 0..{n - 1}"})


def test_goals_are_0_to_n_minus_1(client, shop):
    """The last goal opens; the number of goals is one past it, a 404 naming the range."""
    n = len(shop.goals)
    assert open_session(client, goal=n - 1)["info"]["goal_index"] == n - 1
    for goal in (n, n + 1):
        assert post(client, "sessions", {"goal": goal}) == (
            404, {"error": f"unknown goal {goal}: goals are 0..{n - 1}"})


def test_observation_mode_defaults_to_text(client):
    """Absent or null, the observation mode is ``text``, on every session call."""
    text = open_session(client, goal=4, mode="text")
    token = text["session"]
    searched = step(client, token, "search[red]")["observation"]
    for unset in ({}, {"observation_mode": None}):
        code, out = post(client, "sessions", {"goal": 4, **unset})
        assert code == 201 and out["observation"] == text["observation"], unset
        code, out = post(client, "sessions/observe", {"session": token, **unset})
        assert code == 200 and out["observation"] == text["observation"], unset
        code, out = post(client, "sessions/step",
                         {"session": token, "action": "search[red]", **unset})
        assert code == 200 and out["observation"] == searched, unset


def test_step_wrong_types_are_400(client):
    token = open_session(client)["session"]
    for body, error in (
            ({"session": token}, ACTION_ERROR), ({"session": token, "action": None}, ACTION_ERROR),
            ({"session": token, "action": 5}, ACTION_ERROR),
            ({"session": token, "action": ["click[next >]"]}, ACTION_ERROR),
            ({"session": 5, "action": "click[x]"}, SESSION_ERROR),
            ({"action": "click[x]"}, SESSION_ERROR),
            ({"session": token, "action": "search[x]", "observation_mode": "pdf"}, MODE_ERROR)):
        assert post(client, "sessions/step", body) == (400, {"error": error}), body


@pytest.mark.parametrize("path", ["sessions/step", "sessions/observe", "sessions/close"])
def test_a_session_that_is_no_token_string_is_400(client, path):
    token = open_session(client)["session"]
    for session in (None, 5, [token], {"session": token}, True):
        assert post(client, path, {"session": session, "action": "click[x]"}) == (
            400, {"error": SESSION_ERROR}), session
    assert post(client, path, {"action": "click[x]"}) == (400, {"error": SESSION_ERROR})


def test_a_json_object_is_read_whatever_its_content_type(client):
    """``curl -d '{...}'`` labels the body a form, other clients text/plain or nothing: the
    API reads a JSON object all the same (and its ``request_infos``)."""
    body = json.dumps({"goal": 1, "request_infos": ["expert_action"]})
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        r = client.post("/api/v1/sessions", data=body, content_type=content_type)
        assert r.status_code == 201, content_type
        out = r.get_json()
        assert out["info"]["goal_index"] == 1 and "expert_action" in out["info"], content_type


@pytest.mark.parametrize("data", [b"not json", b"{", b"[1, 2]", b'"text"', b"null",
                                  b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000])
def test_non_json_bodies_are_400(client, data):
    for path in ("sessions", "sessions/step", "sessions/observe", "sessions/close"):
        r = client.post(f"/api/v1/{path}", data=data, content_type="application/json")
        assert (r.status_code, r.get_json()) == (400, {"error": BODY_ERROR}), path
    r = client.post("/api/v1/sessions", data=data, content_type="text/plain")
    assert (r.status_code, r.get_json()) == (400, {"error": BODY_ERROR})


def test_lone_surrogates_are_400(client):
    """JSON and Python literals can carry lone surrogates; they are not text."""
    token = open_session(client)["session"]
    for mode in ("text", "html"):
        body = json.dumps({"session": token, "action": "search[\ud800 x]",
                           "observation_mode": mode})
        r = client.post("/api/v1/sessions/step", data=body, content_type="application/json")
        assert (r.status_code, r.get_json()) == (400, {"error": SURROGATE_ERROR})
    r = client.get("/search_results/fixed_0/%5B'%5Cud800'%5D/1")
    assert r.status_code == 400


def test_wrong_method_is_405_json(client):
    """The session routes take POST only, ``info`` GET only: anything else is a JSON 405 whose
    Allow header names what the route takes."""
    for method, path in (("GET", "sessions"), ("GET", "sessions/step"),
                         ("GET", "sessions/observe"), ("GET", "sessions/close"),
                         ("PUT", "sessions/step"), ("DELETE", "sessions/close"),
                         ("PATCH", "sessions/observe"), ("POST", "info"), ("PUT", "info")):
        r = client.open(f"/api/v1/{path}", method=method)
        assert (r.status_code, r.get_json()) == (405, {"error": METHOD_ERROR}), (method, path)
        # HTTP requires a 405 to say what the route takes.
        allowed = {m.strip() for m in r.headers["Allow"].split(",")}
        assert ("GET" if path == "info" else "POST") in allowed and method not in allowed
        assert r.headers["Content-Type"] == "application/json"


def test_unknown_api_path_is_404_json(client):
    r = client.get("/api/v1/nothing/here")
    assert r.status_code == 404 and "error" in r.get_json()


# ------------------------------------------------------------------------ bad page URLs


@pytest.mark.parametrize("url", [
    "/fixed_999999", "/fixed_abc", "/fixed_", "/fixed_-1", "/bad%20id", "/a.b", "/" + "x" * 200,
    "/search_results/fixed_999999/%5B'a'%5D/1",
    "/item_page/fixed_0/NOSUCHASIN/%5B'a'%5D/1/%7B%7D",
    "/item_page/fixed_0/" + "B" * 5000 + "/%5B'a'%5D/1/%7B%7D",
    "/item_sub_page/fixed_0/NOSUCHASIN/%5B'a'%5D/1/Description/%7B%7D",
    "/done/fixed_0/NOSUCHASIN/%7B%7D",
    "/item_page/fixed_0/..%2F..%2Fetc%2Fpasswd/%5B'a'%5D/1/%7B%7D",
    "/item_page/fixed_0/..%2F..%2Fetc%2Fpasswd",
    "/static/../app.py", "/static/..%2Fapp.py", "/static/%2e%2e/app.py",
    "/static/..%2F..%2Fshop.py", "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
])
def test_unknown_or_traversal_urls_are_404(client, url):
    r = client.get(url)
    assert r.status_code == 404, (url, r.status_code)
    assert b"create_app" not in r.data and b"root:" not in r.data
    assert r.mimetype == "text/html"


def _asin(shop) -> str:
    return shop.catalog.products[0].asin


@pytest.mark.parametrize("path", [
    "/search_results/fixed_0/%5B'a'%5D/-1",  # page 0 is served (tests/test_original_clients.py)
    "/search_results/fixed_0/%5B'a'%5D/abc", "/search_results/fixed_0/%5B'a'%5D/1.5",
    "/search_results/fixed_0/%5B'a'%5D/" + "9" * 5000,
    "/search_results/fixed_0/%5B1,%202%5D/1", "/search_results/fixed_0/%5B'a'/1",
    "/search_results/fixed_0/%5B%5D/1", "/search_results/fixed_0/%5B'%20'%5D/1",
    "/search_results/fixed_0/%5B__import__('os')%5D/1",
    "/search_results/fixed_0/" + "%5B" * 1000 + "%5D" * 1000 + "/1",
    "/item_page/fixed_0/{asin}/%5B'a'%5D/1/%7B'color':%201%7D",
    "/item_page/fixed_0/{asin}/%5B'a'%5D/1/%5B%5D",
    "/item_page/fixed_0/{asin}/%5B'a'%5D/1/not-a-literal",
    "/item_page/fixed_0/{asin}/%5B'a'%5D/1/%7B1:%202%7D",
    "/done/fixed_0/{asin}/%7B'x'",
])
def test_bad_literals_and_pages_are_400(client, shop, path):
    r = client.get(path.format(asin=_asin(shop)))
    assert r.status_code in (400, 413), (path, r.status_code)
    assert r.mimetype == "text/html"


def test_bad_sub_page_is_404(client, shop):
    r = client.get(f"/item_sub_page/fixed_0/{_asin(shop)}/%5B'a'%5D/1/Secrets/%7B%7D")
    assert r.status_code == 404


def test_any_session_id_gets_a_stable_goal(client):
    a = client.get("/someone-else")
    assert a.status_code == 200
    assert a.data == client.get("/someone-else").data
    r = client.get("/")
    assert r.status_code == 302 and r.headers["Location"].startswith("/s")


def test_search_form_redirects_to_results(client):
    r = client.post("/fixed_0", data={"search_query": "Red Cotton"})
    assert r.status_code == 303
    assert r.headers["Location"] == "/search_results/fixed_0/%5B'red',%20'cotton'%5D/1"
    assert client.post("/fixed_0", data={"search_query": "   "}).status_code == 400


@pytest.mark.parametrize("query", ["\0", "\x1b\x07", " \u200b ", "\t\n"])
def test_a_search_with_no_visible_character_is_refused_on_pages_as_in_the_envs(client, query):
    """The pages follow the envs' rule (gagpo.servers.webshop.shop.query_problem): NUL, control
    characters and zero-width spaces alone are not a search, by form or by URL."""
    r = client.post("/fixed_0", data={"search_query": query})
    assert r.status_code == 400 and b"Empty search" in r.data
    r = client.get("/search_results/fixed_0/" + quote(query) + "/1")
    assert r.status_code == 400 and b"Empty search" in r.data


def test_plain_string_keywords_work(client):
    assert client.get("/search_results/fixed_0/red%20shoes/1").status_code == 200


def test_html_and_script_in_queries_are_escaped(client):
    evil = "<script>alert('x')</script> <img src=x onerror=alert(1)> \"quoted\" & a/b"
    r = client.post("/fixed_0", data={"search_query": evil}, follow_redirects=True)
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html  # the results label
    assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    # Through the API, in html mode.
    token = open_session(client)["session"]
    out = step(client, token, f"search[{evil}]", mode="html")
    assert out["info"]["action_valid"] is True
    assert "<script>alert" not in out["observation"]
    assert "&lt;script&gt;alert" in out["observation"]


def test_unexpected_errors_are_logged_500s_without_tracebacks(shop, caplog):
    app = create_app(shop, secret=SECRET)

    def boom():
        raise RuntimeError("secret internals")

    app.add_url_rule("/api/v1/boom", "boom_api", boom)
    app.add_url_rule("/boom/now", "boom_html", boom)
    c = app.test_client()
    r = c.get("/api/v1/boom")
    assert r.status_code == 500 and r.get_json() == {"error": "internal server error"}
    r = c.get("/boom/now")
    assert r.status_code == 500 and r.mimetype == "text/html"
    assert b"secret internals" not in r.data and b"Traceback" not in r.data
    assert "secret internals" in caplog.text
    assert c.get("/api/v1/info").status_code == 200


# ---------------------------------------------------------------------------- concurrency


def test_concurrent_sessions_on_a_real_server(app, shop, serve):
    """Threads hammer one waitress server; every session sees only its own state."""
    n_threads, rounds = 8, 3
    errors: list[str] = []

    def worker(k: int, base: str) -> None:
        http = requests.Session()
        try:
            for r in range(rounds):
                g = (k * rounds + r) % len(shop.goals)
                goal = shop.goals[g]
                state = shop.initial_state(g)
                resp = http.post(f"{base}/api/v1/sessions", json={"goal": g}, timeout=30)
                assert resp.status_code == 201
                token = resp.json()["session"]
                actions = [f"search[{goal.instruction_text}]", "click[next >]",
                           "click[< prev]", "click[nonsense]"]
                for t, action in enumerate(actions, 1):
                    result = shop.step(state, action)
                    state = result.state
                    out = http.post(f"{base}/api/v1/sessions/step",
                                    json={"session": token, "action": action},
                                    timeout=30).json()
                    token = out.pop("session")
                    if out.pop("steps") != t or out.pop("truncated") or \
                            out.pop("max_steps") != 15 or \
                            out != plain(describe(shop, state, "text", result)):
                        errors.append(f"thread {k} goal {g} diverged at {action!r}")
                        return
                    assert out["info"]["goal_index"] == g
                page = http.get(f"{base}/fixed_{g}", timeout=30)
                assert page.status_code == 200 and "Instruction:" in page.text
        except Exception as e:  # collected: a failing thread must fail the test
            errors.append(f"thread {k}: {e!r}")

    with serve(app) as base:
        threads = [threading.Thread(target=worker, args=(k, base)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        assert requests.get(f"{base}/api/v1/info", timeout=10).status_code == 200


def test_traversal_on_a_real_server(app, serve):
    """Raw request lines, as an attacker sends them (no client-side path normalising)."""
    import http.client

    with serve(app, threads=2) as base:
        port = int(base.rsplit(":", 1)[1])
        for path in ("/static/../app.py", "/static/..%2Fapp.py", "/static/../../tokens.py",
                     "/static/%2e%2e/%2e%2e/shop.py", "/../../../etc/passwd",
                     "/item_page/fixed_0/..%2F..%2Fetc%2Fpasswd/%5B'a'%5D/1/%7B%7D"):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            assert resp.status in (400, 404), (path, resp.status)
            assert b"import" not in body and b"root:" not in body
        assert requests.get(f"{base}/static/style.css", timeout=10).status_code == 200
        assert requests.get(f"{base}/api/v1/info", timeout=10).status_code == 200


def test_serve_command_runs_waitress(tmp_path):
    """``python -m gagpo.servers.webshop.web.serve`` serves pages and the API on the given port."""
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "gagpo.servers.webshop.web.serve", "--port", str(port),
           "--num-products", "200", "--threads", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = [proc.stdout.readline() for _ in range(3)]
        assert f"http://127.0.0.1:{port}/fixed_0" in "".join(banner), banner
        deadline = time.monotonic() + 30
        while True:  # the banner comes just before the socket is bound
            try:
                info = requests.get(f"http://127.0.0.1:{port}/api/v1/info", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline and proc.poll() is None, "server never came up"
                time.sleep(0.05)
        assert info.status_code == 200 and info.json()["goals"] > 0
        page = requests.get(f"http://127.0.0.1:{port}/fixed_0", timeout=5)
        assert page.status_code == 200 and "Instruction:" in page.text
        assert page.headers.get("Server") == "gagpo-webshop"  # waitress, with our ident
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


def test_serve_main_rejects_bad_arguments():
    from gagpo.servers.webshop.web.serve import main

    assert main(["--port", "70000"]) == 2
    assert main(["--threads", "0"]) == 2
    with pytest.raises(SystemExit):
        main(["--goals", "robots"])


def test_fuzzed_urls_and_bodies_never_500(shop, client):
    """Random mixes of route shapes, literals, traversal and odd characters: all < 500."""
    import random

    rng = random.Random(0)
    product = next(p for p in shop.catalog.products if p.options)
    group, values = next(iter(product.options.items()))
    pieces = ["fixed_0", "fixed_1", "someone", product.asin, "['a']", "['a', 'b']", "{}",
              repr({group: values[0]}), "1", "2", "0", "Description", "..", "%2e", "'", "[",
              "{", "\x00", "é", "%", "?", "#", "/", "\\", "<script>", "[1]", "99999999",
              "-1", "None", "()", "[b'x']", "['\\ud800']", "[" * 300 + "]" * 300]
    routes = ["", "search_results/", "item_page/", "item_sub_page/", "done/", "static/",
              "api/v1/"]
    for _ in range(1500):
        segs = [rng.choice(pieces) for _ in range(rng.randint(0, 6))]
        safe = rng.choice(["", "/", "'[]{}"])
        url = "/" + rng.choice(routes) + "/".join(quote(s, safe=safe) for s in segs)
        form = {"search_query": rng.choice(pieces)} if rng.random() < 0.3 else None
        r = client.open(url, method=rng.choice(["GET", "POST"]), data=form)
        assert r.status_code < 500, url
    token = open_session(client)["session"]
    choices = [None, 0, 1, -1, 1.5, True, "x", "", [], {}, {"a": 1}, token, token[:-1],
               "search[a]", "click[next >]", "text", "html", "\ud800", 10**40]
    for _ in range(600):
        body = {k: rng.choice(choices) for k in ("goal", "observation_mode", "session",
                                                  "action") if rng.random() < 0.7}
        path = rng.choice(["sessions", "sessions/step", "sessions/observe", "sessions/close"])
        r = client.post(f"/api/v1/{path}", data=json.dumps(body),
                        content_type="application/json")
        assert r.status_code < 500, (path, body)


def test_synthetic_goals_shop():
    shop = open_shop(num_products=200, goals="synthetic")
    client = create_app(shop, secret=SECRET).test_client()
    info = client.get("/api/v1/info").get_json()
    assert info["goal_kind"] == "synthetic" and info["goals"] == len(shop.goals)
    out = open_session(client, goal=0)
    assert out["info"]["instruction"] == shop.goals[0].instruction_text
    assert client.get("/fixed_0").status_code == 200
