"""Why a session token is refused: each state the shop never makes gets its own reason, which
the API returns after "bad session token: " (so a client author can tell what is wrong), and
the states at the edge of each limit still pass."""

from __future__ import annotations

import math
import os

import pytest
from itsdangerous import URLSafeSerializer

from gagpo.servers.webshop import open_shop
from gagpo.servers.webshop.limits import MAX_STEPS
from gagpo.servers.webshop.shop import MAX_QUERY_CHARS, State
from gagpo.servers.webshop.web.tokens import (
    MAX_PAGE_NUM,
    MAX_VISITED,
    SALT,
    SECRET_ENV,
    SECRET_FILE,
    BadToken,
    Session,
    decode_session,
    decode_state,
    default_secret,
    encode_state,
)

KEY = "a-test-secret-for-token-reasons"
MAX_KEYWORDS_CHARS = 2 * MAX_QUERY_CHARS


@pytest.fixture(scope="module")
def shop():
    return open_shop(num_products=200)


def raw(payload) -> str:
    """A token of any payload, signed with the real key (as if the key had leaked)."""
    return URLSafeSerializer(KEY, salt=SALT, serializer_kwargs={"ensure_ascii": True}).dumps(
        payload
    )


def reason(token_or_state, shop=None) -> str:
    token = (encode_state(token_or_state, KEY) if isinstance(token_or_state, State)
             else token_or_state)
    with pytest.raises(BadToken) as e:
        decode_state(token, KEY, shop)
    return str(e.value)


def passes(state: State, shop=None) -> None:
    assert decode_state(encode_state(state, KEY), KEY, shop) == state


def results(keywords=("red",), **kw) -> State:
    return State(goal=0, page="results", keywords=keywords, **kw)


UNSUPPORTED = "unsupported session token payload"
MALFORMED = "malformed session state in token"
OK_PAYLOAD = [1, 0, 1, ["red"], 1, "", [], "", [], None]  # a results page, as encoded


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"goal": 0}, UNSUPPORTED),
        (OK_PAYLOAD[:9], UNSUPPORTED),
        ([2, *OK_PAYLOAD[1:]], UNSUPPORTED),  # another payload version
        ([1, 0, 5, ["red"], 1, "", [], "", [], None], MALFORMED),  # page code past the last
        ([1, 0, 1, ["red"], 1, "", [["color", 1]], "", [], None], MALFORMED),
        ([1, 0, 1, ["red"], 1, "", ["ab"], "", [], None], MALFORMED),  # an option not a pair
        ([1, 0, 1, ["red"], 1, "", [], "", ["a", "a"], None],
         f"at most {MAX_VISITED} distinct visited products"),
        ([1, 0, 1, ["\ud800"], 1, "", [], "", [], None], "the keywords are not valid text"),
        ([True, *OK_PAYLOAD[1:]], UNSUPPORTED),  # equal to 1, yet not a version number
        ([1.0, *OK_PAYLOAD[1:]], UNSUPPORTED),
        # An int too large for a float (JSON allows any): a refusal, not an OverflowError.
        ([1, 0, 4, [], 1, "B0", [], "", [], 10**400], "a done page needs a reward in [0, 1]"),
        ([1, 0, 4, [], 1, "B0", [], "", [], -10**400], "a done page needs a reward in [0, 1]"),
        ([1, 0, 2, [], 1, "B0", [], "", [], 10**400], "only a done page has a reward"),
    ],
)
def test_payloads_are_refused_with_their_reason(payload, expected):
    assert decode_state(raw(OK_PAYLOAD), KEY) == results()
    assert reason(raw(payload)) == expected


STEPS = "the step count must be in 0..limit, the limit in 1..1000000"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ([16, 15], STEPS),  # more steps than the limit
        ([-1, 15], STEPS),
        ([0, 0], STEPS),  # no step allowed at all
        ([0, 1_000_001], STEPS),  # a limit past the longest a session may ask for
        ([True, 15], STEPS),
        ([1.0, 15], STEPS),
        ([0, "15"], STEPS),
        ([0], UNSUPPORTED),  # version 2 has both
    ],
)
def test_step_counts_are_refused_with_their_reason(tail, expected):
    """Version 2 payloads end with the session's step count and limit (tokens.Session)."""
    assert decode_session(raw([2, *OK_PAYLOAD[1:], 3, 15]), KEY) == Session(results(), 3, 15)
    assert reason(raw([2, *OK_PAYLOAD[1:], *tail])) == expected


def test_a_version_1_token_reads_as_a_session_at_step_0_with_the_default_limit():
    assert decode_session(raw(OK_PAYLOAD), KEY) == Session(results(), 0, MAX_STEPS)
    assert reason(raw([3, *OK_PAYLOAD[1:], 0, 15])) == UNSUPPORTED  # a version to come


def test_a_negative_zero_reward_reads_as_zero():
    """-0.0 is within [0, 1] but no purchase scores it; the done page would show "-0.0"."""
    state = decode_state(raw([1, 0, 4, [], 1, "B0", [], "", [], -0.0]), KEY)
    assert state.reward == 0.0 and math.copysign(1.0, state.reward) == 1.0


def test_page_field_reasons(shop):
    asin = shop.catalog.products[0].asin
    reward = "a done page needs a reward in [0, 1]"
    for r in (math.nan, math.inf, -0.1, 1.5, None):
        assert reason(State(goal=0, page="done", asin=asin, reward=r)) == reward
    assert reason(results(reward=1.0)) == "only a done page has a reward"
    assert reason(State(goal=0, page="item_sub", keywords=("a",), asin=asin,
                        sub_page="Secrets")) == (
        "the sub-page must be one of Description, Features, Reviews")
    assert reason(State(goal=0, page="item", keywords=("a",), asin=asin,
                        sub_page="Reviews")) == "only a product's sub-page names one"
    assert reason(results(asin=asin)) == "the results page holds no product or options"
    assert reason(State(goal=0, page="search", keywords=("red",))) == (
        "the search page holds no keywords and is page 1")
    assert reason(State(goal=0, page="item", keywords=("a",))) == "the item page needs a product"
    opts = (("size", "large"), ("color", "red"))
    assert reason(State(goal=0, page="item", keywords=("a",), asin=asin, options=opts)) == (
        "options must name each group once, sorted by group")


def test_page_number_limits():
    expected = f"the result page must be in 1..{MAX_PAGE_NUM}"
    for page in (0, -3, MAX_PAGE_NUM + 1):
        assert reason(results(page_num=page)) == expected
    passes(results(page_num=MAX_PAGE_NUM))
    passes(results(page_num=1))


def test_keyword_limits():
    # Keywords as a search makes them: not blank, no spaces inside, at most 2000 characters
    # joined (lower-casing can double a 1000-character query), at most 2001 of them.
    passes(results(keywords=("a" * MAX_KEYWORDS_CHARS,)))
    assert reason(results(keywords=("a" * (MAX_KEYWORDS_CHARS + 1),))) == (
        "the keywords are too long")
    # 2001 empty keywords join to 2000 spaces: within both limits, but blank.
    assert reason(results(keywords=("",) * (MAX_KEYWORDS_CHARS + 1))) == (
        "a results page needs keywords")
    assert reason(results(keywords=("",) * (MAX_KEYWORDS_CHARS + 2))) == "too many keywords"
    assert reason(results(keywords=("red shoes",))) == "keywords hold no spaces"
    assert reason(results(keywords=())) == "a results page needs keywords"


def test_visited_limit(shop):
    asins = [p.asin for p in shop.catalog.products]
    passes(results(visited=frozenset(asins[:3])), shop)
    many = frozenset(f"B{i:09d}" for i in range(MAX_VISITED))
    passes(results(visited=many))  # exactly the limit (without a shop: not looked up)
    over = frozenset(f"B{i:09d}" for i in range(MAX_VISITED + 1))
    assert reason(results(visited=over)) == f"at most {MAX_VISITED} distinct visited products"


def test_shop_reasons(shop):
    n = len(shop.goals)
    p = next(p for p in shop.catalog.products if p.options)
    group, values = next(iter(p.options.items()))
    assert reason(State(goal=n, page="search"), shop) == (
        f"no goal {n} in this shop (goals are 0..{n - 1})")
    assert reason(State(goal=0, page="item", keywords=("a",), asin="B0NOSUCH00"), shop) == (
        "its product is not in this shop")
    assert reason(State(goal=0, page="item", keywords=("a",), asin=p.asin,
                        options=((group, "no such value"),)), shop) == (
        "its options are not offered for its product")
    assert reason(results(visited=frozenset({"B0NOSUCH00"})), shop) == (
        "a visited product is not in this shop")
    passes(State(goal=0, page="item", keywords=("a",), asin=p.asin,
                 options=((group, values[0]),)), shop)


def test_a_compressed_payload_is_inflated_only_up_to_its_bound():
    """A token whose JSON inflates past the bound is refused before it is parsed: the reason
    is the token's, not that of the state it would hold."""
    payload = [1, 0, 1, ["a" * 300_000], 1, "", [], "", [], None]
    token = raw(payload)
    assert token.startswith(".")  # compressed by itsdangerous
    assert reason(token) == "the session token is invalid or was not issued by this shop"


def test_a_key_file_needs_32_characters(tmp_path, monkeypatch):
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path))
    monkeypatch.delenv(SECRET_ENV, raising=False)
    path = tmp_path / SECRET_FILE
    path.write_text("k" * 32 + "\n")
    os.chmod(path, 0o600)
    assert default_secret() == "k" * 32
    path.write_text("k" * 31 + "\n")
    with pytest.raises(ValueError, match="delete it"):
        default_secret()


def test_token_level_reasons():
    from gagpo.servers.webshop.web.tokens import MAX_TOKEN_CHARS

    for token in (None, 5, ""):
        assert reason(token) == "the session token must be a non-empty string"
    assert reason("x" * (MAX_TOKEN_CHARS + 1)) == "the session token is too long"
    invalid = "the session token is invalid or was not issued by this shop"
    assert reason("x" * MAX_TOKEN_CHARS) == invalid  # within the length limit: checked
    state = results()
    assert reason(encode_state(state, "another-secret-entirely")) == invalid
    # The same key without the session salt (another kind of token) signs nothing valid here.
    assert reason(URLSafeSerializer(KEY).dumps(OK_PAYLOAD)) == invalid


def test_the_secret_must_be_a_non_empty_string():
    token = encode_state(results(), KEY)
    for secret in ("", None, 123):
        with pytest.raises(ValueError, match="^the token secret must be a non-empty string$"):
            encode_state(results(), secret)
        # Decoding reports it as a token it cannot decode (BadToken: a 4xx, never a 500).
        with pytest.raises(BadToken, match="^the session token could not be decoded$"):
            decode_state(token, secret)


def test_a_compressed_payload_must_be_complete():
    """A zlib stream cut before its end (its checksum missing) is refused, even when what it
    holds so far is a whole, valid state."""
    import json
    import zlib

    from itsdangerous.encoding import base64_encode

    signer = URLSafeSerializer(KEY, salt=SALT).make_signer(SALT)
    packed = zlib.compress(json.dumps(OK_PAYLOAD).encode())
    whole = signer.sign(b"." + base64_encode(packed)).decode()
    assert decode_state(whole, KEY) == results()
    cut = signer.sign(b"." + base64_encode(packed[:-4])).decode()
    assert reason(cut) == "the session token is invalid or was not issued by this shop"


def test_a_key_file_with_stray_bytes_still_gives_a_secret(tmp_path, monkeypatch):
    """A key file someone edited (a non-ASCII byte in it) never crashes the shop's start."""
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path))
    monkeypatch.delenv(SECRET_ENV, raising=False)
    path = tmp_path / SECRET_FILE
    path.write_bytes(b"k" * 40 + b"\xff\n")
    os.chmod(path, 0o600)
    secret = default_secret()
    assert isinstance(secret, str) and secret.startswith("k" * 40)


def test_an_empty_key_file_is_waited_for_then_refused(tmp_path, monkeypatch):
    """An empty key file is one another process is still writing: it is read again for about a
    second, then, still empty (its writer died), refused with what to do."""
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path))
    monkeypatch.delenv(SECRET_ENV, raising=False)
    path = tmp_path / SECRET_FILE
    path.write_bytes(b"")
    os.chmod(path, 0o600)
    with pytest.raises(ValueError, match="delete it"):
        default_secret()
