"""Scripted policies: the environment's expert, WebShop's rule baseline and a uniform random
policy.

Both answer in the ReAct format (``<think>...</think><action>...</action>``), so their replies
go through the same parser as a model's. They know no tokens: ``token_ids`` and ``logprobs``
stay empty.
"""

from __future__ import annotations

import random
import re
from typing import Any

from gagpo.agents.parser import fill_template, is_template
from gagpo.agents.policies.base import Policy, Reply, Request


def format_reply(action: str, thought: str = "") -> str:
    """A well-formed ReAct reply carrying ``action``."""
    return f"<think>{thought}</think><action>{action}</action>"


class ExpertPolicy(Policy):
    """Replays the environment's expert: the action in ``request.info[key]``.

    Environments compute it on request (WebShop-v0: ``gym.make(..., request_infos=
    ["expert_action"])``). A list (an expert plan) gives its first action. When the info holds
    None (the episode is over) the reply has an empty action, which the parser rejects.
    """

    needs_expert_action = True

    def __init__(self, key: str = "expert_action", search_with_instruction: bool = False) -> None:
        self.key = key
        # A scoring policy's only search is search[<instruction>]: demonstrations for it must
        # search the same way, not with the goal product's name the expert knows.
        self.search_with_instruction = search_with_instruction

    def _action(self, info: dict[str, Any]) -> str:
        if self.key not in info:
            raise KeyError(
                f"info has no {self.key!r}: ask the environment for it "
                f"(e.g. gym.make(..., request_infos=[{self.key!r}]))"
            )
        value = info[self.key]
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        return "" if value is None else str(value)

    def act(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for r in requests:
            action = self._action(r.info)
            if self.search_with_instruction and action.startswith("search["):
                action = f"search[{r.info.get('instruction', '')}]"
            replies.append(Reply(format_reply(action, "expert")))
        return replies


class RuleBaselinePolicy(Policy):
    """WebShop's rule baseline, reading only the page: search the instruction, open the first
    listed product, buy. With ``options``, also click each not-yet-chosen option whose value
    the instruction names (needs ``observation_mode="text_rich"`` to see chosen options).
    Behaviour a small model can learn: the demo's warm-start teacher."""

    _NOT_OPTIONS = frozenset({"back to search", "< prev", "next >", "description", "features",
                              "reviews", "buy now"})

    def __init__(self, options: bool = False) -> None:
        self.options = options

    @property  # type: ignore[override]
    def required_env_kwargs(self) -> dict[str, Any]:
        """With ``options``: text_rich observations, the only ones that show which options are
        chosen ("You have clicked ..."); without it, the rule would click them forever."""
        return {"observation_mode": "text_rich"} if self.options else {}

    def action(self, request: Request) -> str:
        from gagpo.envs.webshop.expert import rule_baseline_action

        info = request.info
        if "page" not in info:
            raise ValueError("the rule baseline plays WebShop only (its infos name the page); "
                             "this env's do not")
        if self.options and info.get("page") == "item":
            text = request.messages[-1]["content"] if request.messages else ""
            instruction = str(info.get("instruction", "")).lower()
            for a in request.admissible_actions:
                value = a[len("click["):-1] if a.startswith("click[") else ""
                if (value and value not in self._NOT_OPTIONS
                        and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", instruction)
                        and f"You have clicked {value}." not in text):
                    return a
        return rule_baseline_action(info)

    def act(self, requests: list[Request]) -> list[Reply]:
        return [Reply(format_reply(self.action(r), "rule")) for r in requests]


class RandomPolicy(Policy):
    """Uniform over the admissible actions; a ``<query>`` template is filled with the
    instruction. Seeded: the same seed and requests give the same replies."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def act(self, requests: list[Request]) -> list[Reply]:
        replies = []
        for r in requests:
            action = ""
            if r.admissible_actions:
                action = r.admissible_actions[self.rng.randrange(len(r.admissible_actions))]
                if is_template(action):
                    action = fill_template(action, str(r.info.get("instruction", "")))
            replies.append(Reply(format_reply(action, "random")))
        return replies
