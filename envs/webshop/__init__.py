"""WebShop-v0 (see :class:`envs.webshop.env.WebShopEnv`)."""

from envs.webshop.env import MAX_STEPS, WebShopEnv

__all__ = ["MAX_STEPS", "WebShopEnv"]
