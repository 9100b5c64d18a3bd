"""Session tokens nobody can forge, states checked like any input, and caches bounded by bytes.

* The default token secret is random, kept owner-only in the cache folder, and shared by every
  process that starts there (even at the same instant); the old key, derived from public data,
  signs nothing the shop accepts.
* A token signed with the shop's REAL key is still refused (4xx JSON, never 500) when its state
  is one the shop's transitions never make: a reward outside [0, 1] or not finite, 20,000
  keywords, inconsistent page fields, products or options the shop does not have.
* The page, search and stemmer caches stay within their byte bounds under many unique, long
  inputs (sizes measured, not time).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from itsdangerous import URLSafeSerializer

from gagpo.servers.lru import BoundedLRU, bounded_cache, deep_size
from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.shop import MAX_QUERY_CHARS, Shop, State
from gagpo.servers.webshop.web.app import create_app
from gagpo.servers.webshop.web.tokens import (
    MAX_TOKEN_CHARS,
    MAX_VISITED,
    SALT,
    SECRET_ENV,
    SECRET_FILE,
    BadToken,
    decode_state,
    default_secret,
    encode_state,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def shop():
    return open_shop(num_products=200)


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    """An empty cache folder for the secret, no secret in the environment (the shop fixture
    was opened before, from the usual cache)."""
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(SECRET_ENV, raising=False)
    return tmp_path / "cache"


def strict_json(text: str):
    """json.loads that refuses NaN and Infinity, as strict parsers (JavaScript's) do."""

    def refuse(name: str):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def post(client, path: str, body: dict) -> tuple[int, dict]:
    r = client.post(f"/api/v1/{path}", json=body)
    assert r.status_code < 500, (path, r.status_code, r.data[:300])
    return r.status_code, strict_json(r.get_data(as_text=True))


def done_state(shop: Shop, reward: float) -> State:
    product = shop.catalog.products[0]
    return State(goal=0, page="done", keywords=("x",), asin=product.asin, reward=reward)


# ------------------------------------------------------------------------- the secret


def test_default_secret_is_random_private_and_shared(shop, own_cache, monkeypatch):
    app1 = create_app(shop)
    path = own_cache / SECRET_FILE
    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text().strip()
    assert len(secret) >= 64 and int(secret, 16) >= 0  # 256 random bits, hex
    app2 = create_app(shop)  # a second process on this machine: the same key
    out = app1.test_client().post("/api/v1/sessions", json={"goal": 1}).get_json()
    code, seen = post(app2.test_client(), "sessions/observe", {"session": out["session"]})
    assert code == 200 and seen["info"]["goal_index"] == 1
    assert default_secret() == secret
    # Another cache folder (another machine) has another key: the token is refused there.
    monkeypatch.setenv("GAGPO_CACHE", str(own_cache.parent / "elsewhere"))
    assert default_secret() != secret
    code, _ = post(create_app(shop).test_client(), "sessions/observe", {"session": out["session"]})
    assert code == 404


def test_token_forged_with_the_old_public_key_is_refused(shop, own_cache):
    """The old default key was sha256 of the catalog's fingerprint and first goal: anyone with
    the package could sign a finished session with score 1.0."""
    first = shop.goals[0].instruction_text
    seed = f"gagpo-webshop:{shop.catalog.fingerprint}:{len(shop.goals)}:{first}"
    public_key = hashlib.sha256(seed.encode()).hexdigest()
    client = create_app(shop).test_client()
    for reward in (1.0, 0.5):
        forged = encode_state(done_state(shop, reward), public_key)
        code, out = post(client, "sessions/observe", {"session": forged})
        assert code == 404 and "error" in out


def test_concurrent_first_starts_make_one_key(tmp_path):
    """Eight processes (and then many threads) create the key at the same instant: all read
    the same one, and the file is owner-only."""
    folder = tmp_path / "race"
    script = textwrap.dedent(f"""
        import secrets, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from gagpo.common.cache import private_file_once
        start = float(sys.argv[1])
        time.sleep(max(0.0, start - time.time()))
        data = private_file_once(Path({str(folder)!r}) / "key", lambda: secrets.token_bytes(32))
        print(data.hex())
    """)
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", script, str(start)],
                              stdout=subprocess.PIPE, text=True) for _ in range(8)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(keys) == 1 and len(next(iter(keys))) == 64
    assert stat.S_IMODE((folder / "key").stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == ["key"]  # no temporary files left

    from gagpo.common.cache import private_file_once

    for round_ in range(20):
        path = tmp_path / f"threads{round_}" / "key"
        barrier = threading.Barrier(8)
        seen: list[bytes] = []

        def race(path=path, barrier=barrier, seen=seen):
            barrier.wait()
            seen.append(private_file_once(path, lambda: os.urandom(32)))

        threads = [threading.Thread(target=race) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(seen)) == 1 and len(seen) == 8


def test_a_key_file_others_can_read_or_a_damaged_one_is_refused(own_cache):
    path = own_cache / SECRET_FILE
    default_secret()
    path.chmod(0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        default_secret()
    path.chmod(0o600)
    path.write_text("short\n")
    with pytest.raises(ValueError, match="delete it"):
        default_secret()
    path.unlink()
    assert len(default_secret()) == 64  # a new one is made


@pytest.mark.skipif(os.name != "posix", reason="links and named pipes as on POSIX")
def test_a_key_path_that_is_no_regular_file_is_refused_at_once(own_cache, tmp_path):
    """Whoever can write a shared cache folder may put a link to another file, a named pipe
    (opening it for reading would wait for a writer forever) or a folder at the key's path:
    each is a clear error, at once."""
    path = own_cache / SECRET_FILE
    own_cache.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "elsewhere"
    target.write_text("k" * 64)
    target.chmod(0o600)
    cases = [
        ("symbolic link", lambda: path.symlink_to(target), path.unlink),
        ("not a regular file", lambda: os.mkfifo(path, 0o600), path.unlink),
        ("not a regular file", path.mkdir, path.rmdir),
    ]
    for reason, make, remove in cases:
        make()
        outcome: list[BaseException] = []

        def read(outcome=outcome):
            try:
                default_secret()
            except BaseException as e:  # noqa: BLE001 - handed to the test thread
                outcome.append(e)

        reader = threading.Thread(target=read, daemon=True)  # a blocked open cannot be undone
        reader.start()
        reader.join(5)
        assert not reader.is_alive(), f"reading the key blocked ({reason})"
        assert isinstance(outcome[0], PermissionError) and reason in str(outcome[0])
        remove()
    assert len(default_secret()) == 64


def test_explicit_secret_wins(shop, own_cache, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "from-the-environment-0123456789")
    client = create_app(shop).test_client()
    token = encode_state(shop.initial_state(2), "from-the-environment-0123456789")
    assert post(client, "sessions/observe", {"session": token})[0] == 200
    assert not (own_cache / SECRET_FILE).exists()  # no key file made when one is given
    client = create_app(shop, secret="given-as-an-argument-0123456789").test_client()
    assert post(client, "sessions/observe", {"session": token})[0] == 404


# ------------------------------------------------- signed with the real key, still invalid

REAL = "the-real-secret-of-this-test-shop"


@pytest.fixture(scope="module")
def real_client(shop):
    return create_app(shop, secret=REAL).test_client()


def _product_with_options(shop: Shop):
    return next(p for p in shop.catalog.products if len(p.options) >= 2)


def _raw(payload: list) -> str:
    """A token of any payload, signed with the real key (as if the key had leaked)."""
    signer = URLSafeSerializer(REAL, salt=SALT, serializer_kwargs={"ensure_ascii": True})
    return signer.dumps(payload)  # ASCII JSON: "\ud800" travels as an escape


def _bad_states(shop: Shop) -> dict[str, State | str]:
    p = _product_with_options(shop)
    (g1, v1s), (g2, v2s) = list(p.options.items())[:2]
    asin = p.asin
    item = State(goal=0, page="item", keywords=("red",), asin=asin)
    n = len(shop.goals)
    return {
        "reward 1e9": done_state(shop, 1e9),
        "reward NaN": done_state(shop, math.nan),
        "reward inf": done_state(shop, math.inf),
        "reward -0.5": done_state(shop, -0.5),
        "reward 1.0000001": done_state(shop, 1.0000001),
        "done without reward": State(goal=0, page="done", asin=asin),
        "reward on results": State(goal=0, page="results", keywords=("red",), reward=1.0),
        "reward on item": State(goal=0, page="item", keywords=("a",), asin=asin, reward=0.0),
        "20000 keywords": State(goal=0, page="results", keywords=("kw",) * 20_000),
        "keywords too long": State(goal=0, page="results",
                                   keywords=("a" * (2 * MAX_QUERY_CHARS + 1),)),
        "keyword with a space": State(goal=0, page="results", keywords=("red shoes",)),
        "blank keywords": State(goal=0, page="results", keywords=("", "")),
        "results without keywords": State(goal=0, page="results"),
        "lone surrogate keyword": _raw([1, 0, 1, ["\ud800"], 1, "", [], "", [], None]),
        "page 0": State(goal=0, page="results", keywords=("red",), page_num=0),
        "page -3": State(goal=0, page="results", keywords=("red",), page_num=-3),
        "page 10**7": State(goal=0, page="results", keywords=("red",), page_num=10**7),
        "page 10**4000": State(goal=0, page="results", keywords=("red",), page_num=10**4000),
        "search page with keywords": State(goal=0, page="search", keywords=("red",)),
        "search page 2": State(goal=0, page="search", page_num=2),
        "results with a product": State(goal=0, page="results", keywords=("a",), asin=asin),
        "sub_page on item": State(goal=0, page="item", keywords=("a",), asin=asin,
                                  sub_page="Description"),
        "unknown sub_page": State(goal=0, page="item_sub", keywords=("a",), asin=asin,
                                  sub_page="Secrets"),
        "item without product": State(goal=0, page="item", keywords=("a",)),
        "unknown product": State(goal=0, page="item", keywords=("a",), asin="B0NOSUCH00"),
        "lower-case product": State(goal=0, page="item", keywords=("a",), asin=asin.lower()),
        "option not offered": State(goal=0, page="item", keywords=("a",), asin=asin,
                                    options=((g1, "no such value"),)),
        "group not offered": State(goal=0, page="item", keywords=("a",), asin=asin,
                                   options=(("no such group", v1s[0]),)),
        "options unsorted": State(goal=0, page="item", keywords=("a",), asin=asin,
                                  options=tuple(sorted([(g1, v1s[0]), (g2, v2s[0])],
                                                       reverse=True))),
        "group twice": State(goal=0, page="item", keywords=("a",), asin=asin,
                             options=((g1, v1s[0]), (g1, v1s[-1]))),
        "unknown visited": State(goal=0, page="results", keywords=("a",),
                                 visited=frozenset({"B0NOSUCH00"})),
        "too many visited": State(goal=0, page="results", keywords=("a",),
                                  visited=frozenset(f"B{i:09d}" for i in range(MAX_VISITED + 1))),
        "goal out of range": replace_goal(item, n),
        "huge goal": replace_goal(item, 10**30),
        "visited twice": _raw([1, 0, 1, ["a"], 1, "", [], "", [asin, asin], None]),
        "bool reward": _raw([1, 0, 4, ["a"], 1, asin, [], "", [], True]),
        "string reward": _raw([1, 0, 4, ["a"], 1, asin, [], "", [], "1.0"]),
        "float page": _raw([1, 0, 1, ["a"], 1.0, "", [], "", [], None]),
        "huge int page": _raw([1, 0, 1, ["a"], 10**40, "", [], "", [], None]),
    }


def replace_goal(state: State, goal: int) -> State:
    from dataclasses import replace

    return replace(state, goal=goal)


def test_states_the_shop_never_makes_are_refused_even_with_the_real_key(shop, real_client):
    bad = _bad_states(shop)
    for name, state in bad.items():
        token = state if isinstance(state, str) else encode_state(state, REAL)
        for path in ("sessions/observe", "sessions/step", "sessions/close"):
            code, out = post(real_client, path, {"session": token, "action": "click[buy now]"})
            assert code == 404, (name, path, code, out)
            assert out["error"].startswith("bad session token: "), (name, out)
        with pytest.raises(BadToken):
            decode_state(token, REAL, shop)
    assert post(real_client, "sessions", {"goal": 0})[0] == 201  # still serving


def test_every_state_of_real_episodes_passes(shop):
    """The checks refuse nothing the shop makes: an expert episode per goal, every option,
    every sub-page, a long (1000-character, upper-case) query, Next > many times."""
    from gagpo.servers.webshop.expert import expert_action

    for g in range(0, min(len(shop.goals), 60), 3):
        state = shop.initial_state(g)
        seen = [state]
        for _ in range(15):
            action = expert_action(shop, state)
            if action is None:
                break
            state = shop.step(state, action).state
            seen.append(state)
        for s in seen:
            assert decode_state(encode_state(s, REAL), REAL, shop) == s
    state = shop.step(shop.initial_state(0), "search[" + "İ a " * 250 + "]").state
    assert state.page == "results"
    for _ in range(30):
        state = shop.step(state, "click[next >]").state
    assert decode_state(encode_state(state, REAL), REAL, shop) == state
    p = _product_with_options(shop)
    item = State(goal=0, page="item", keywords=("a",), asin=p.asin, visited=frozenset({p.asin}))
    for values in p.options.values():
        item = shop.step(item, f"click[{values[-1]}]").state
    assert len(item.options) == len(p.options)
    for sub in ("description", "features", "reviews"):
        s = shop.step(item, f"click[{sub}]").state
        assert decode_state(encode_state(s, REAL), REAL, shop) == s
    done = shop.step(item, "click[buy now]").state
    assert done.page == "done" and 0.0 <= done.reward <= 1.0
    assert decode_state(encode_state(done, REAL), REAL, shop) == done


def test_read_state_reads_a_token_without_its_secret_and_its_url_serves_that_page(
        shop, real_client):
    """read_state (the run viewer's call): the state in a token signed with any key, as the
    shop made it, its shape still checked; state_url: the served page of that state."""
    from gagpo.servers.webshop.html import state_url
    from gagpo.servers.webshop.web.tokens import read_state

    p = _product_with_options(shop)
    group, values = next(iter(p.options.items()))
    item = State(goal=0, page="item", keywords=("a", "b/c"), page_num=2, asin=p.asin,
                 options=((group, values[-1]),), visited=frozenset({p.asin}))
    states = [shop.initial_state(0),
              shop.step(shop.initial_state(0), "search[red dress / 2]").state, item,
              shop.step(item, "click[features]").state, shop.step(item, "click[buy now]").state]
    assert [s.page for s in states] == ["search", "results", "item", "item_sub", "done"]
    for s in states:
        assert read_state(encode_state(s, "another shop's secret, not ours")) == s
        url = state_url("", "fixed_0", s)
        r = real_client.get(url)
        assert r.status_code == 200, (s.page, url, r.status_code)
    assert state_url("http://shop", "fixed_0", states[1]).startswith(
        "http://shop/search_results/fixed_0/")
    for token, why in (("", "the session token must be a non-empty string"),
                       (17, "the session token must be a non-empty string"),
                       ("x" * (MAX_TOKEN_CHARS + 1), "the session token is too long"),
                       ("not.a.token", "unsupported session token payload"),
                       ("\ud800", "the session token could not be decoded")):
        with pytest.raises(BadToken) as e:
            read_state(token)
        assert str(e.value) == why
    padded = encode_state(states[1], REAL)
    padded += "=" * (MAX_TOKEN_CHARS - len(padded))  # at the limit: read, not refused
    assert read_state(padded) == states[1]
    with pytest.raises(BadToken, match="search page"):  # a shape no transition makes
        read_state(encode_state(State(goal=0, page="search", keywords=("x",)), REAL))


def test_json_responses_never_hold_nan(shop):
    """If a NaN ever reached a response it would be a logged 500 with a JSON body, never
    invalid JSON."""
    from flask import jsonify

    app = create_app(shop, secret=REAL)
    app.add_url_rule("/api/v1/nan", "nan", lambda: jsonify(score=math.nan))
    r = app.test_client().get("/api/v1/nan")
    assert r.status_code == 500
    assert strict_json(r.get_data(as_text=True)) == {"error": "internal server error"}


# ---------------------------------------------------------------------- --no-expert-infos


def test_no_expert_infos_withholds_expert_action(shop):
    open_ = create_app(shop, secret=REAL).test_client()
    closed = create_app(shop, secret=REAL, expert_infos=False).test_client()
    assert open_.get("/api/v1/info").get_json()["request_infos"] == ["expert_action"]
    assert closed.get("/api/v1/info").get_json()["request_infos"] == []
    ask = {"goal": 0, "request_infos": ["expert_action"]}
    code, out = post(open_, "sessions", ask)
    assert code == 201 and out["info"]["expert_action"].startswith("search[")
    token = out["session"]
    code, out = post(closed, "sessions", ask)
    assert code == 403 and "expert_action" in out["error"]
    for path in ("sessions/step", "sessions/observe"):
        code, out = post(closed, path, {"session": token, "action": "search[red]",
                                        "request_infos": ["expert_action"]})
        assert code == 403, path
    code, out = post(closed, "sessions/step", {"session": token, "action": "search[red]"})
    assert code == 200 and "expert_action" not in out["info"]


# ------------------------------------------------------------------------------ the caches


def test_bounded_lru_bounds_entries_and_bytes():
    cache: BoundedLRU[str, str] = BoundedLRU(max_entries=100, max_bytes=50_000)
    for i in range(1000):
        cache.put(f"k{i}", "v" * 1000)
        assert len(cache) <= 100 and cache.nbytes <= 50_000
    assert len(cache) < 50  # the byte bound, not the entry bound, decided
    assert cache.get("k999") is not None and cache.get("k0") is None
    cache.put("huge", "x" * 100_000)  # bigger than the whole budget: not stored
    assert "huge" not in cache and cache.nbytes <= 50_000
    # Least recently USED goes first.
    small: BoundedLRU[int, int] = BoundedLRU(max_entries=3, max_bytes=10**6)
    for i in range(3):
        small.put(i, i)
    small.get(0)
    small.put(3, 3)
    assert 0 in small and 1 not in small
    # Replacing a key does not count it twice.
    small.put(3, 4)
    assert len(small) == 3 and small.get(3) == 4
    assert BoundedLRU(0, 10).get("x") is None


def test_bounded_cache_decorator_and_deep_size():
    calls = []

    @bounded_cache(max_entries=10, max_bytes=20_000)
    def f(x: str) -> str:
        calls.append(x)
        return x.upper()

    assert f("a") == "A" and f("a") == "A" and calls == ["a"]
    for i in range(100):
        f(str(i) * 500)
    assert f.cache.nbytes <= 20_000 and len(f.cache) <= 10
    s = "x" * 1000
    assert deep_size(s) >= 1000
    assert deep_size((s, s + "y")) >= 2000
    assert deep_size(State(goal=0, keywords=(s,))) >= 1000
    loop: list = []
    loop.append(loop)
    assert deep_size(loop) > 0  # cycles end


def test_stemmer_cache_stays_within_its_bytes_under_unique_long_words():
    """Unique long search words (the client's to choose) once grew the process by 680 MB:
    the stemmer's memo is bounded by bytes, and what it retains is measured."""
    from gagpo.servers.webshop import search

    search._stem.cache.clear()
    bound = search.STEM_CACHE_BYTES
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(6000):
            word = f"w{i}" + "abcdefghij" * 500  # 5 kB, unique
            search.analyze(word)
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert search._stem.cache.nbytes <= bound
    assert retained < bound + (2 << 20), retained  # ~30 MB of words went through
    search._stem.cache.clear()


def test_page_and_search_caches_stay_within_their_bytes(shop):
    """Many unique states with the longest legal keywords: the page memo keeps its byte bound
    (the estimate counted is no smaller than what is really retained), and so does the
    search memo."""
    from gagpo.servers.webshop.search import SEARCH_CACHE_BYTES, SearchEngine

    assert shop._pages.max_bytes == shop.page_cache_bytes
    assert shop.search_engine._cache.max_bytes == SEARCH_CACHE_BYTES
    engine = SearchEngine(shop.catalog, cache_bytes=1 << 20)
    small = Shop(shop.catalog, shop.goals, engine, page_cache_bytes=512 << 10)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(400):
            # 1000 characters; "cotton dress" finds products, so the pages list some.
            words = ("cotton", "dress", *(f"{i}q{j}" + "z" * 90 for j in range(9)))
            state = State(goal=0, page="results", keywords=words)
            small.page(state)
            assert small._pages.nbytes <= 2 << 20 and engine._cache.nbytes <= 1 << 20
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(small._pages) < 400  # the byte bound evicted
    assert retained < (512 << 10) + (1 << 20) + (1 << 20), retained


def test_product_record_cache_stays_within_its_bytes(shop):
    """Which products get decoded is the client's choice (any ASIN in a URL): the record
    cache keeps its byte bound whatever is opened."""
    from gagpo.servers.webshop.store import ProductStore

    store = shop.catalog.products
    assert isinstance(store, ProductStore)
    assert store._cache.max_bytes == 64 << 20
    small = ProductStore(store.directory)
    small._cache.max_bytes = 100_000
    for i in range(len(small)):
        assert small[i] == store[i]
        assert small._cache.nbytes <= 100_000
    assert 0 < len(small._cache) < len(small)
    assert deep_size(small[0]) > 1000  # records are not tiny: the bound is what held


def test_reward_memos_stay_within_their_bytes(shop, real_client):
    """The done page takes any option values a URL names (as the original does), and the
    reward's fuzzy-matching memos key on them: they keep their byte bounds (lowered here to
    1 MB each, so that a few MB of keys show it)."""
    from urllib.parse import quote

    from gagpo.servers.webshop import reward

    goal = shop.goals[0]
    r = real_client.get(f"/done/fixed_0/{goal.asin}/{quote(repr({'color': 'q' * 7000}))}")
    assert r.status_code == 200
    memos = (reward.fuzz_process, reward.fuzzy_match, reward.fuzzy_score)
    assert all(m.cache.max_bytes == reward._CACHE_BYTES for m in memos)
    bound = 1 << 20
    for memo in memos:
        memo.cache_clear()
        memo.cache.max_bytes = bound
    try:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(400):
            value = f"{i} " + "ab " * 1500  # 4.5 kB, unique
            reward.fuzzy_match(value, "red")
            reward.fuzzy_score(value, "ab")
        retained = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        for memo in memos:
            assert memo.cache.nbytes <= bound
        assert retained < 3 * bound + (1 << 20), retained  # ~7 MB of keys went through
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        for memo in memos:
            memo.cache_clear()
            memo.cache.max_bytes = reward._CACHE_BYTES


def test_a_session_keeps_its_step_count_and_limit_at_their_edges(shop):
    """A session token carries its steps and step limit: the limit from 1 to the largest
    allowed, the steps up to the limit (a session truncated at its limit still decodes); one
    past either edge is refused."""
    from gagpo.servers.webshop.limits import MAX_SESSION_STEPS
    from gagpo.servers.webshop.web.tokens import Session, decode_session, encode_session

    state = shop.initial_state(0)
    for steps, limit in ((0, 1), (1, 1), (3, 40), (40, 40), (0, MAX_SESSION_STEPS),
                         (MAX_SESSION_STEPS, MAX_SESSION_STEPS)):
        got = decode_session(encode_session(Session(state, steps, limit), "k"), "k", shop)
        assert (got.state, got.steps, got.max_steps) == (state, steps, limit)
    for steps, limit in ((0, 0), (2, 1), (-1, 5), (0, MAX_SESSION_STEPS + 1)):
        with pytest.raises(BadToken, match=r"^the step count must be in 0\.\.limit"):
            decode_session(encode_session(Session(state, steps, limit), "k"), "k", shop)

