"""gagpo's text environments. Importing this package registers them with Gymnasium::

    import gymnasium, envs
    env = gymnasium.make("WebShop-v0")
"""

from gymnasium.envs.registration import register, registry

if "WebShop-v0" not in registry:
    register(
        id="WebShop-v0",
        entry_point="gagpo.envs.webshop.env:WebShopEnv",
        max_episode_steps=15,  # gagpo.servers.webshop.shop.MAX_STEPS
    )

if "ALFWorld-v0" not in registry:
    register(
        id="ALFWorld-v0",
        entry_point="gagpo.envs.alfworld.env:AlfworldEnv",
        max_episode_steps=50,
    )

__all__ = ["register"]
