"""Session tokens: a whole session :class:`~gagpo.servers.webshop.shop.State`, signed, in one
string.

The JSON API keeps no session table: every response carries the session's next state as a
token the client sends back. Any worker process or host that shares the secret can serve the
next request, and a closed or abandoned session costs the server nothing.

Tokens are itsdangerous ``URLSafeSerializer`` strings (HMAC-signed, compact JSON, zlib when
that is shorter) over a list payload. They are signed, not encrypted: a client can read its
own state (it is the page it is looking at anyway) but cannot forge or alter one without the
secret. Decompression is bounded, so even a token signed with a leaked secret cannot make the
server inflate a zip bomb, and a decoded state is checked like any other input
(:func:`decode_state` with ``shop=``): sizes within what the shop's own transitions produce,
page and fields consistent, the goal, product, options and visited products the shop's own.

A token also holds the session's step count and step limit (:class:`Session`): the API ends an
episode after its limit as WebShop-v0 does. Payload version 1 (a state alone) still reads, its
steps counted from 0.

The secret (:func:`resolve_secret`): the ``secret`` argument, else ``$GAGPO_WEBSHOP_SECRET``,
else a random key made on first use and kept, readable by its owner only, in the cache folder
(:func:`default_secret`), so that every process of one user on one machine shares it. Shops
on several machines need one secret given to all of them.
"""

from __future__ import annotations

import math
import os
import secrets
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from itsdangerous import BadData, URLSafeSerializer
from itsdangerous.encoding import base64_decode
from itsdangerous.exc import BadPayload
from itsdangerous.serializer import Serializer

from gagpo.common.cache import cache_dir, private_file_once
from gagpo.servers.webshop.limits import MAX_SESSION_STEPS, MAX_STEPS
from gagpo.servers.webshop.pages import SUB_PAGES
from gagpo.servers.webshop.shop import MAX_QUERY_CHARS, State, has_visible, is_text

if TYPE_CHECKING:
    from gagpo.servers.webshop.shop import Shop

SALT = "gagpo.webshop.session.v1"
PAYLOAD_VERSION = 2
"""2: the state, then the step count and limit; 1 (still read): the state alone."""
MAX_TOKEN_CHARS = 64 * 1024
"""Longer strings are rejected before any signature check or decoding."""
MAX_PAYLOAD_BYTES = 256 * 1024
"""Bound on the decompressed JSON of a token."""
SECRET_ENV = "GAGPO_WEBSHOP_SECRET"
SECRET_FILE = "webshop-token-secret"
"""Name of the default secret's file in the cache folder (:func:`gagpo.common.cache.cache_dir`)."""
MIN_SECRET_CHARS = 16
MAX_PAGE_NUM = 9_999_999
"""Largest result page a token may hold (the page URLs take at most 7 digits too)."""
MAX_VISITED = 4096
"""Most products a token may list as visited (one per product click)."""
MAX_KEYWORDS_CHARS = 2 * MAX_QUERY_CHARS
"""Bound on the keywords joined by spaces: lower-casing a legal query can lengthen it (U+0130
becomes two characters, the only one that grows), never more than twice."""

# Page names as small integers keep tokens short.
_PAGES = ("search", "results", "item", "item_sub", "done")
_PAGE_CODE = {name: i for i, name in enumerate(_PAGES)}


class BadToken(ValueError):
    """The token is malformed, not signed with this secret, or does not hold a valid state."""


@dataclass(frozen=True)
class Session:
    """What a session token holds: the shop's state and the episode's step count."""

    state: State
    steps: int = 0
    """Steps taken (every action answered before the episode's end counts, valid or not)."""
    max_steps: int = MAX_STEPS
    """The episode's step limit (WebShop-v0's unless the session asked for another)."""

    @property
    def truncated(self) -> bool:
        """Ended by the step limit: ``max_steps`` steps taken, nothing bought."""
        return self.state.page != "done" and self.steps >= self.max_steps


def default_secret() -> str:
    """This machine's token secret: random (256 bits), made on first use and kept in the cache
    folder, readable by its owner only, so that every process of the user shares it."""
    path = cache_dir() / SECRET_FILE
    for _ in range(20):  # a file created by exclusive open may be read before it is written
        text = private_file_once(path, lambda: (secrets.token_hex(32) + "\n").encode())
        secret = text.decode("ascii", "replace").strip()
        if secret:
            break
        time.sleep(0.05)
    if len(secret) < 32:
        raise ValueError(f"the token secret file {path} is damaged: delete it to make a new one")
    return secret


def resolve_secret(secret: str | None = None) -> str:
    """``secret`` if given, else ``$GAGPO_WEBSHOP_SECRET`` if set, else :func:`default_secret`."""
    return secret or os.environ.get(SECRET_ENV) or default_secret()


class _BoundedSerializer(URLSafeSerializer):
    """URLSafeSerializer whose zlib step stops at :data:`MAX_PAYLOAD_BYTES`."""

    def load_payload(self, payload: bytes, *args: Any, **kwargs: Any) -> Any:
        if not payload.startswith(b"."):
            return super().load_payload(payload, *args, **kwargs)
        try:
            packed = base64_decode(payload[1:])
            inflater = zlib.decompressobj()
            data = inflater.decompress(packed, MAX_PAYLOAD_BYTES)
        except Exception as e:
            raise BadPayload("could not decode the token payload", original_error=e) from e
        if inflater.unconsumed_tail or not inflater.eof:
            raise BadPayload("token payload too large")
        # Skip the mixin's own (unbounded) decompression: go straight to the JSON step.
        return Serializer.load_payload(self, data, *args, **kwargs)


def _serializer(secret: str) -> URLSafeSerializer:
    if not isinstance(secret, str) or not secret:
        raise ValueError("the token secret must be a non-empty string")
    return _BoundedSerializer(secret, salt=SALT)


def encode_state(state: State, secret: str) -> str:
    """The signed token of ``state`` (a session at step 0 with WebShop-v0's limit)."""
    return encode_session(Session(state), secret)


def encode_session(session: Session, secret: str) -> str:
    """The signed token of ``session``."""
    state = session.state
    payload = [
        PAYLOAD_VERSION,
        state.goal,
        _PAGE_CODE[state.page],
        list(state.keywords),
        state.page_num,
        state.asin,
        [[g, v] for g, v in state.options],
        state.sub_page,
        sorted(state.visited),
        state.reward,
        session.steps,
        session.max_steps,
    ]
    return _serializer(secret).dumps(payload)


def decode_state(token: str, secret: str, shop: Shop | None = None) -> State:
    """The state inside ``token`` (:func:`decode_session`'s)."""
    return decode_session(token, secret, shop).state


def decode_session(token: str, secret: str, shop: Shop | None = None) -> Session:
    """The session inside ``token``; raises :class:`BadToken` on anything wrong.

    The state's shape is always checked (types, sizes, page and fields consistent, reward a
    finite number in [0, 1] on the done page only), and the step count (within its limit, the
    limit within :data:`~gagpo.servers.webshop.limits.MAX_SESSION_STEPS`); with ``shop``, also
    that its goal, product, options and visited products exist in that shop
    (:func:`check_state`).
    """
    if not isinstance(token, str) or not token:
        raise BadToken("the session token must be a non-empty string")
    if len(token) > MAX_TOKEN_CHARS:
        raise BadToken("the session token is too long")
    try:
        payload = _serializer(secret).loads(token)
    except BadData as e:
        raise BadToken("the session token is invalid or was not issued by this shop") from e
    except Exception as e:  # e.g. malformed base64 padding deep inside itsdangerous
        raise BadToken("the session token could not be decoded") from e
    session = _session_from_payload(payload)
    if shop is not None:
        check_state(session.state, shop)
    return session


def read_state(token: str) -> State:
    """The state inside ``token``, read without its secret: tokens are signed, not encrypted,
    so a client (the run viewer, linking a step to its page on the served shop) may read its
    own. The state's shape is checked as :func:`decode_state` checks it, but its signature is
    not: trust it no further than the token's holder (the shop checks what it serves). Raises
    :class:`BadToken` on anything malformed."""
    if not isinstance(token, str) or not token:
        raise BadToken("the session token must be a non-empty string")
    if len(token) > MAX_TOKEN_CHARS:
        raise BadToken("the session token is too long")
    try:
        _, payload = _serializer("unverified").loads_unsafe(token)
    except Exception as e:
        raise BadToken("the session token could not be decoded") from e
    return _session_from_payload(payload).state


_PAYLOAD_LENGTHS = {1: 10, 2: 12}
"""Fields of each payload version (the version included)."""


def _session_from_payload(payload: Any) -> Session:
    """Rebuild a Session, checking every field's type (a signed token can still come from
    another version of this code)."""
    if (
        not isinstance(payload, list)
        or not payload
        or not _is_int(payload[0])  # True and 1.0 equal 1 but are no version
        or _PAYLOAD_LENGTHS.get(payload[0]) != len(payload)
    ):
        raise BadToken("unsupported session token payload")
    steps, max_steps = payload[10:12] if payload[0] == 2 else (0, MAX_STEPS)
    if not (_is_int(steps) and _is_int(max_steps) and 1 <= max_steps <= MAX_SESSION_STEPS
            and 0 <= steps <= max_steps):
        raise BadToken(f"the step count must be in 0..limit, the limit in "
                       f"1..{MAX_SESSION_STEPS}")
    return Session(_state_from_fields(payload[1:10]), steps, max_steps)


def _state_from_fields(fields: list) -> State:
    """Rebuild a State from a payload's state fields."""
    goal, page, keywords, page_num, asin, options, sub_page, visited, reward = fields
    ok = (
        _is_int(goal)
        and goal >= 0
        and _is_int(page)
        and 0 <= page < len(_PAGES)
        and isinstance(keywords, list)
        and all(isinstance(k, str) for k in keywords)
        and _is_int(page_num)
        and isinstance(asin, str)
        and isinstance(options, list)
        and all(
            isinstance(o, list) and len(o) == 2 and all(isinstance(x, str) for x in o)
            for o in options
        )
        and isinstance(sub_page, str)
        and isinstance(visited, list)
        and all(isinstance(a, str) for a in visited)
        and (reward is None or (isinstance(reward, (int, float)) and not isinstance(reward, bool)))
    )
    if not ok:
        raise BadToken("malformed session state in token")
    state = State(
        goal=goal,
        page=_PAGES[page],
        keywords=tuple(keywords),
        page_num=page_num,
        asin=asin,
        options=tuple((g, v) for g, v in options),
        sub_page=sub_page,
        visited=frozenset(visited),
        reward=None if reward is None else _as_float(reward),
    )
    problem = _shape_problem(state, n_visited=len(visited))
    if problem:
        raise BadToken(problem)
    return state


def _shape_problem(state: State, n_visited: int) -> str | None:
    """What makes ``state`` one that no sequence of shop transitions produces, judged without
    the shop (None when nothing does)."""
    page = state.page
    if not 1 <= state.page_num <= MAX_PAGE_NUM:
        return f"the result page must be in 1..{MAX_PAGE_NUM}"
    if n_visited > MAX_VISITED or len(state.visited) != n_visited:
        return f"at most {MAX_VISITED} distinct visited products"
    if state.keywords or page == "results":
        problem = _keywords_problem(state.keywords)
        if problem:
            return problem
    if page == "done":
        r = state.reward
        if r is None or not math.isfinite(r) or not 0.0 <= r <= 1.0:
            return "a done page needs a reward in [0, 1]"
    elif state.reward is not None:
        return "only a done page has a reward"
    if page == "item_sub":
        if state.sub_page not in SUB_PAGES:
            return f"the sub-page must be one of {', '.join(SUB_PAGES)}"
    elif state.sub_page:
        return "only a product's sub-page names one"
    if page in ("search", "results"):
        if state.asin or state.options:
            return f"the {page} page holds no product or options"
        if page == "search" and (state.keywords or state.page_num != 1):
            return "the search page holds no keywords and is page 1"
        return None
    if not state.asin:
        return f"the {page} page needs a product"
    groups = [g for g, _ in state.options]
    if groups != sorted(set(groups)):
        return "options must name each group once, sorted by group"
    return None


def _keywords_problem(keywords: tuple[str, ...]) -> str | None:
    """Keywords as a search action makes them: ``q.lower().split(' ')`` of a query that is not
    blank, is valid text and is within the routes' length limit."""
    if len(keywords) > MAX_KEYWORDS_CHARS + 1:
        return "too many keywords"
    query = " ".join(keywords)
    if len(query) > MAX_KEYWORDS_CHARS:
        return "the keywords are too long"
    if not is_text(query):
        return "the keywords are not valid text"
    if not has_visible(query):  # the search rule (shop.query_problem): a search shows a word
        return "a results page needs keywords"
    if any(" " in k for k in keywords):
        return "keywords hold no spaces"
    return None


def check_state(state: State, shop: Shop) -> None:
    """Raise :class:`BadToken` unless ``state``'s goal, product, options and visited products
    are ``shop``'s own (a token signed with a shared secret can come from another catalog)."""
    n = len(shop.goals)
    if not 0 <= state.goal < n:
        raise BadToken(f"no goal {state.goal} in this shop (goals are 0..{n - 1})")
    catalog = shop.catalog
    if state.asin:
        product = catalog.get(state.asin)
        if product is None or product.asin != state.asin:
            raise BadToken("its product is not in this shop")
        for group, value in state.options:
            if value not in product.options.get(group, ()):
                raise BadToken("its options are not offered for its product")
    # position(), not get(): a lookup decodes no product record.
    if any(catalog.position(asin) is None for asin in state.visited):
        raise BadToken("a visited product is not in this shop")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _as_float(x: int | float) -> float:
    """``float(x)``, with ints too large for a float (JSON has no bound on them) as infinity,
    which the reward check then refuses, instead of an OverflowError; -0.0 (a score no
    purchase gives, shown as "-0.0") as 0.0."""
    try:
        return float(x) + 0.0
    except OverflowError:
        return math.inf if x > 0 else -math.inf
