"""WebShop-v0 (see :class:`gagpo.envs.webshop.env.WebShopEnv`)."""

from gagpo.envs.webshop.env import MAX_STEPS, WebShopEnv

__all__ = ["MAX_STEPS", "WebShopEnv"]
