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


# What a WebShop click does, by the button it presses (the rest are products and options).
_SHOP_BUTTONS = {
    "buy now": "The product and the options I chose match the request, so I buy it.",
    "next >": "The product asked for is not among these results; I look at the next page.",
    "< prev": "I have read enough here; I go back to the product's page.",
    "back to search": "This product is not the one asked for; I go back and search again.",
    "description": "I read the description to check the product against the request.",
    "features": "I read the features to check the product against the request.",
    "reviews": "I read the reviews to check the product against the request.",
}
# ALFWorld's commands: those without an object, then the others by their verb ({0}: the object).
_HOUSE_COMMANDS = {
    "look": "I check where I am and what I hold.",
    "inventory": "I check what I am holding.",
}
_HOUSE_VERBS = {
    "go to": "I go to the {0} to find what the task needs or to put it there.",
    "take": "I take the {0}: the task needs it.",
    "put": "I put the {0} where the task wants it.",
    "open": "The {0} is closed; I open it to see what is inside.",
    "close": "I close the {0} again.",
    "heat": "The task wants the {0} hot, so I heat it.",
    "cool": "The task wants the {0} cool, so I cool it.",
    "clean": "The task wants the {0} clean, so I clean it.",
    "use": "I turn on the {0} to look at what I hold in its light.",
    "examine": "I examine the {0} closely.",
}


def explain(action: str) -> str:
    """A short thought that says why an expert takes ``action`` (a WebShop or an ALFWorld
    command), for demonstrations: a model imitating the teacher learns to reason about the
    request before it acts, not to write a placeholder."""
    if action.startswith("search[") and action.endswith("]"):
        return f"I search for the product the request describes: {action[7:-1]}."
    if action.startswith("click[") and action.endswith("]"):
        target = action[6:-1]
        if target in _SHOP_BUTTONS:
            return _SHOP_BUTTONS[target]
        if re.fullmatch(r"b0[0-9a-z]{8}", target):
            return "This result fits the request best; I open it to check its details."
        return f"The request asks for {target}, so I choose that option."
    for verb, thought in _HOUSE_VERBS.items():
        if action.startswith(verb + " "):
            obj = action[len(verb) + 1:].split(" from ")[0].split(" with ")[0]
            obj = re.split(r" (?:in|on|in/on) ", obj)[0] if verb == "put" else obj
            return thought.format(obj.strip())
    if action in _HOUSE_COMMANDS:
        return _HOUSE_COMMANDS[action]
    return "This brings me closer to finishing the task." if action else ""


class ExpertPolicy(Policy):
    """Replays the environment's expert: the action in ``request.info[key]``, with a short
    thought that says why (:func:`explain`).

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
            replies.append(Reply(format_reply(action, explain(action))))
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
