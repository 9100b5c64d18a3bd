"""gagpo's text environments. Importing this package registers them with Gymnasium::

    import gymnasium, gagpo.envs
    env = gymnasium.make("WebShop-v0")

Each registration's ``max_episode_steps`` is the environment's own limit (one constant per
environment, which its class defaults to): ``gymnasium.spec(env_id).max_episode_steps`` and
``env.unwrapped.max_steps`` agree unless ``max_steps`` is passed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gymnasium.envs.registration import register, registry

from gagpo.envs.alfworld import MAX_STEPS as ALFWORLD_MAX_STEPS
from gagpo.servers.webshop.limits import MAX_STEPS as WEBSHOP_MAX_STEPS

if TYPE_CHECKING:
    from gagpo.envs.base import TextEnv

if "WebShop-v0" not in registry:
    register(
        id="WebShop-v0",
        entry_point="gagpo.envs.webshop.env:WebShopEnv",
        max_episode_steps=WEBSHOP_MAX_STEPS,
    )

if "ALFWorld-v0" not in registry:
    register(
        id="ALFWorld-v0",
        entry_point="gagpo.envs.alfworld.env:AlfworldEnv",
        max_episode_steps=ALFWORLD_MAX_STEPS,
    )


@contextlib.contextmanager
def probe(env_id: str, **env_kwargs: Any) -> Iterator[TextEnv]:
    """``env_id``'s environment made with ``env_kwargs``, unwrapped, to read what it declares
    (``split_tasks``, ``report_label``, ``max_steps``); closed on exit."""
    import gymnasium as gym

    env = gym.make(env_id, **env_kwargs)
    try:
        yield env.unwrapped
    finally:
        env.close()


def split_tasks(env_id: str, split: str | None = None, **env_kwargs: Any) -> list[Any]:
    """The tasks of ``split`` of ``env_id``'s environment made with ``env_kwargs``, in order
    (:meth:`gagpo.envs.base.TextEnv.split_tasks`; ``split`` None: the env's own split, which
    ``env_kwargs`` may set)."""
    with probe(env_id, **env_kwargs) as env:
        return list(env.split_tasks(split))


__all__ = ["ALFWORLD_MAX_STEPS", "WEBSHOP_MAX_STEPS", "probe", "register", "split_tasks"]
