"""One stable digest of a tuple of parts, for state keys.

The same parts give the same short hex string in every process and on every machine (it hashes
their ``repr``, never Python's per-process string hash): a trainer compares keys that workers
elsewhere computed. The environments' keys (:func:`gagpo.envs.base.make_state_key`) and the
served shop's JSON API both use this function, which lives with what every layer shares so
that the shop can use it without importing the environments.
"""

from __future__ import annotations

import hashlib
from typing import Any


def digest(*parts: Any) -> str:
    """16 hex digits (8 bytes of BLAKE2b) of ``repr(parts)``."""
    return hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).hexdigest()
