"""gagpo's text environments. Importing this package registers them with Gymnasium::

    import gymnasium, gagpo.envs
    env = gymnasium.make("WebShop-v0")

Each registration's ``max_episode_steps`` is the environment's own limit (one constant per
environment, which its class defaults to): ``gymnasium.spec(env_id).max_episode_steps`` and
``env.unwrapped.max_steps`` agree unless ``max_steps`` is passed.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gymnasium.envs.registration import register, registry

from gagpo.envs.alfworld.limits import MAX_STEPS as ALFWORLD_MAX_STEPS
from gagpo.servers.webshop.limits import MAX_STEPS as WEBSHOP_MAX_STEPS

if TYPE_CHECKING:
    from gagpo.envs.base import TextEnv

#: The environments this package registers: id -> (entry point, episode step limit).
ENVIRONMENTS: dict[str, tuple[str, int]] = {
    "WebShop-v0": ("gagpo.envs.webshop.env:WebShopEnv", WEBSHOP_MAX_STEPS),
    "ALFWorld-v0": ("gagpo.envs.alfworld.env:AlfworldEnv", ALFWORLD_MAX_STEPS),
}

for _id, (_entry_point, _max_steps) in ENVIRONMENTS.items():
    if _id not in registry:
        register(id=_id, entry_point=_entry_point, max_episode_steps=_max_steps)


def env_spec(env_id: str) -> Any:
    """``env_id``'s registration (``gymnasium.spec``), without making the env. As
    ``gymnasium.make`` does, ``"module:Id"`` imports ``module`` (which registers ``Id``) first.

    Raises:
        ValueError: no env is registered under ``env_id``, or its module does not import.
    """
    import gymnasium as gym

    module, _, name = env_id.rpartition(":")
    try:
        if module:
            importlib.import_module(module)
        return gym.spec(name)
    except (gym.error.Error, ImportError) as e:
        raise ValueError(f"no environment {env_id!r} ({e}); gagpo registers "
                         f"{' and '.join(ENVIRONMENTS)}") from e


@contextlib.contextmanager
def probe(env_id: str, **env_kwargs: Any) -> Iterator[TextEnv]:
    """``env_id``'s environment made with ``env_kwargs``, unwrapped, to read what it declares
    (``split_tasks``, ``report_label``, ``max_steps``); closed on exit.

    Raises:
        ValueError: no such env, or an argument it does not take (:func:`env_spec`).
    """
    import gymnasium as gym

    env_spec(env_id)
    try:
        env = gym.make(env_id, **env_kwargs)
    except TypeError as e:
        if "keyword argument" not in str(e):
            raise
        raise ValueError(f"{env_id} does not take the arguments {env_kwargs}: {e}") from e
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


__all__ = ["ALFWORLD_MAX_STEPS", "ENVIRONMENTS", "WEBSHOP_MAX_STEPS", "env_spec", "probe",
           "register", "split_tasks"]
