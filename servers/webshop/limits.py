"""WebShop-v0's episode limit, in a module light enough for ``import gagpo.envs`` to register
it (the shop's engine imports its search index, and numba with it)."""

MAX_STEPS = 15
"""Episode length of WebShop-v0 (the papers' setting); the JSON API's ``/api/v1/info`` serves
it to clients."""
