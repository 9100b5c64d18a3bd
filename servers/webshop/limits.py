"""WebShop-v0's episode limit, in a module light enough for ``import gagpo.envs`` to register
it (the shop's engine imports its search index, and numba with it)."""

MAX_STEPS = 15
"""Episode length of WebShop-v0 (the papers' setting), and of a JSON API session that asks for
no other (``/api/v1/info`` serves it to clients)."""
MAX_SESSION_STEPS = 1_000_000
"""The longest step limit a JSON API session may ask for (its session token holds it)."""
