"""WebShop-v0 and ALFWorld-v0 in the form TRL's ``GRPOTrainer`` takes multi-turn environments.

TRL (``pip install 'gagpo[trl]'``) documents ``environment_factory`` as the way to train on
an environment: a class whose public methods are the model's tools (named, typed, with
docstrings the chat template renders), ``reset(**dataset_row)`` returning the text appended to
the prompt, and ``get_reward()`` scoring the finished rollout. ``rollout_func`` is its lower
level route, for trainers that generate themselves; the tool form keeps TRL's own generation,
masking of tool outputs and logging. So each env here is such a class, with named tools (WebShop:
``search(query)``, ``click(element)``; ALFWorld: ``go_to(place)``, ``take(obj, place)``...),
each one env step; the reward is the episode's score (the env's own: WebShop's reward in
[0, 1], ALFWorld 0/1). Nothing here imports TRL::

    from functools import partial
    from trl import GRPOTrainer
    from gagpo.integrations.trl import WebShopTools

    trainer = GRPOTrainer(model, args=config, train_dataset=dataset,
                          environment_factory=partial(WebShopTools, url="http://127.0.0.1:8000"))

Each instance plays one env: in this process (``gym.make(env_id, **env_kwargs)``) or, with
``url``, a ``gagpo serve env`` server (:mod:`gagpo.envs.remote`). Dataset rows may carry
``task``, ``split`` and ``seed`` columns: ``reset`` passes them to the env, so the
``num_generations`` rollouts of one prompt play copies of one task.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

import gagpo.envs  # noqa: F401  (registers the environments)

MAX_LISTED_ACTIONS = 50
"""Admissible actions listed after each observation (the rest are summarised)."""


class TextEnvTools:
    """Base of the tool classes: one gagpo env, its episode, and the text the model reads."""

    env_id: str = ""
    guide: str = ""

    def __init__(self, url: str | None = None, **env_kwargs: Any) -> None:
        if url is not None:
            if env_kwargs:
                raise ValueError("env_kwargs are the server's business when url is given")
            self._env = gym.make("gagpo.envs.remote:Remote-v0", url=url)
        else:
            self._env = gym.make(self.env_id, **env_kwargs)
        self._info: dict[str, Any] = {}
        self._over = True

    def reset(self, task: Any = None, split: str | None = None, seed: int | None = None,
              **row: Any) -> str:
        """Start an episode (the dataset row's ``task``, ``split``, ``seed``; other columns,
        such as ``prompt``, are ignored) and return what the model reads first."""
        options = {k: v for k, v in (("task", task), ("split", split)) if v is not None}
        obs, self._info = self._env.reset(seed=seed, options=options)
        self._over = False
        return f"\n\n{self.guide}\n\n{self._render(obs)}"

    def get_reward(self) -> float:
        """The episode's score so far (the env's own: WebShop reward, ALFWorld 0/1)."""
        return float(self._info.get("score", 0.0))

    @property
    def won(self) -> bool:
        return bool(self._info.get("won", False))

    def _act(self, command: str) -> str:
        if self._over and not self._info:
            raise RuntimeError("the episode has not started: reset() first")
        obs, _, terminated, truncated, self._info = self._env.step(command)
        self._over = bool(terminated or truncated)
        if self._over:
            end = "won" if self._info["won"] else "ended"
            return f"{obs}\n\nThe episode {end} with score {self._info['score']:.2f}."
        return self._render(obs)

    def _render(self, obs: str) -> str:
        actions = self._info.get("admissible_actions") or []
        shown = ", ".join(actions[:MAX_LISTED_ACTIONS])
        more = len(actions) - MAX_LISTED_ACTIONS
        if more > 0:
            shown += f" (and {more} more)"
        return f"{obs}\n\nAdmissible actions: {shown}"

    def _shutdown(self) -> None:
        """Free the env (not ``close``: every public method is a tool, and ALFWorld has one
        named close)."""
        self._env.close()


class WebShopTools(TextEnvTools):
    """WebShop-v0 for TRL: search the shop, click results, options and buttons."""

    env_id = "WebShop-v0"
    guide = ("You are shopping in a web shop for the instruction below. Use the tools: "
             "search(query) on a search page, click(element) for a product, an option, "
             "'Buy Now', 'Back to Search', 'Next >' or '< Prev'.")

    def search(self, query: str) -> str:
        """Search the shop for products.

        Args:
            query: the words to search for, e.g. "shampoo for dry hair under 40 dollars".
        """
        return self._act(f"search[{query}]")

    def click(self, element: str) -> str:
        """Click an element of the page: a product (its id), an option, or a button.

        Args:
            element: the text of what to click, e.g. "b07xyz1234", "large", "Buy Now".
        """
        return self._act(f"click[{element}]")


class ALFWorldTools(TextEnvTools):
    """ALFWorld-v0 for TRL: move around a household and use its objects."""

    env_id = "ALFWorld-v0"
    guide = ("You are in a household; accomplish the task below with the tools: go_to, take, "
             "move, open, close, heat, cool, clean, use, examine, look and inventory. Name "
             "objects and places with their numbers, e.g. 'apple 1', 'fridge 1'.")

    def go_to(self, place: str) -> str:
        """Go to a place.

        Args:
            place: where to go, e.g. "countertop 1".
        """
        return self._act(f"go to {place}")

    def take(self, obj: str, place: str) -> str:
        """Pick up an object from the place it is in or on.

        Args:
            obj: the object, e.g. "apple 1".
            place: where it is, e.g. "countertop 1".
        """
        return self._act(f"take {obj} from {place}")

    def move(self, obj: str, place: str) -> str:
        """Put the object you hold in or on a place.

        Args:
            obj: the object you hold, e.g. "apple 1".
            place: where to put it, e.g. "fridge 1".
        """
        return self._act(f"move {obj} to {place}")

    def open(self, target: str) -> str:
        """Open a receptacle.

        Args:
            target: what to open, e.g. "fridge 1".
        """
        return self._act(f"open {target}")

    def close(self, target: str) -> str:
        """Close a receptacle.

        Args:
            target: what to close, e.g. "fridge 1".
        """
        return self._act(f"close {target}")

    def heat(self, obj: str, appliance: str) -> str:
        """Heat the object you hold with an appliance.

        Args:
            obj: the object, e.g. "egg 1".
            appliance: e.g. "microwave 1".
        """
        return self._act(f"heat {obj} with {appliance}")

    def cool(self, obj: str, appliance: str) -> str:
        """Cool the object you hold with an appliance.

        Args:
            obj: the object, e.g. "mug 1".
            appliance: e.g. "fridge 1".
        """
        return self._act(f"cool {obj} with {appliance}")

    def clean(self, obj: str, place: str) -> str:
        """Clean the object you hold.

        Args:
            obj: the object, e.g. "knife 1".
            place: where to clean it, e.g. "sinkbasin 1".
        """
        return self._act(f"clean {obj} with {place}")

    def use(self, obj: str) -> str:
        """Use an object, e.g. switch on a lamp.

        Args:
            obj: the object, e.g. "desklamp 1".
        """
        return self._act(f"use {obj}")

    def examine(self, target: str) -> str:
        """Look closely at an object or a place.

        Args:
            target: e.g. "book 1".
        """
        return self._act(f"examine {target}")

    def look(self) -> str:
        """Look around the place you are in."""
        return self._act("look")

    def inventory(self) -> str:
        """List what you hold."""
        return self._act("inventory")


TOOLS = {"WebShop-v0": WebShopTools, "ALFWorld-v0": ALFWorldTools}
"""The tools class of each env id."""

__all__ = ["ALFWorldTools", "TOOLS", "TextEnvTools", "WebShopTools"]
