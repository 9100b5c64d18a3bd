"""Session tokens: a whole session :class:`~servers.webshop.shop.State`, signed, in one string.

The JSON API keeps no session table: every response carries the session's next state as a
token the client sends back. Any worker process or host that shares the secret can serve the
next request, and a closed or abandoned session costs the server nothing.

Tokens are itsdangerous ``URLSafeSerializer`` strings (HMAC-signed, compact JSON, zlib when
that is shorter) over a list payload. They are signed, not encrypted: a client can read its
own state (it is the page it is looking at anyway) but cannot forge or alter one without the
secret. Decompression is bounded, so even a token signed with a leaked secret cannot make the
server inflate a zip bomb.
"""

from __future__ import annotations

import zlib
from typing import Any

from itsdangerous import BadData, URLSafeSerializer
from itsdangerous.encoding import base64_decode
from itsdangerous.exc import BadPayload
from itsdangerous.serializer import Serializer

from servers.webshop.shop import State

SALT = "gagpo.webshop.session.v1"
PAYLOAD_VERSION = 1
MAX_TOKEN_CHARS = 64 * 1024
"""Longer strings are rejected before any signature check or decoding."""
MAX_PAYLOAD_BYTES = 256 * 1024
"""Bound on the decompressed JSON of a token."""

# Page names as small integers keep tokens short.
_PAGES = ("search", "results", "item", "item_sub", "done")
_PAGE_CODE = {name: i for i, name in enumerate(_PAGES)}


class BadToken(ValueError):
    """The token is malformed, not signed with this secret, or does not hold a valid state."""


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
    """The signed token of ``state``."""
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
    ]
    return _serializer(secret).dumps(payload)


def decode_state(token: str, secret: str) -> State:
    """The state inside ``token``; raises :class:`BadToken` on anything wrong."""
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
    return _state_from_payload(payload)


def _state_from_payload(payload: Any) -> State:
    """Rebuild a State, checking every field's type (a signed token can still come from
    another version of this code)."""
    if not isinstance(payload, list) or len(payload) != 10 or payload[0] != PAYLOAD_VERSION:
        raise BadToken("unsupported session token payload")
    _, goal, page, keywords, page_num, asin, options, sub_page, visited, reward = payload
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
    return State(
        goal=goal,
        page=_PAGES[page],
        keywords=tuple(keywords),
        page_num=page_num,
        asin=asin,
        options=tuple((g, v) for g, v in options),
        sub_page=sub_page,
        visited=frozenset(visited),
        reward=None if reward is None else float(reward),
    )


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
