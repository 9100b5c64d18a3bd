"""A generation server without a model, in the interface verl's agent loops call
(``await generate(request_id, *, prompt_ids, sampling_params, ...) -> TokenOutput``).

It reads the actions our prompt lists and answers one of them at random in the ReAct format
(or, at ``malformed_rate``, a reply with no action), with a fixed log-prob per token. With it,
the ``gagpo_env`` loop runs through verl's own workers on a CPU: to check an environment and a
configuration before a GPU run, in the tests, and to measure the loop's own cost
(``benchmarks/verl_agent_loop.py``). verl's CPU tests stand in for the server the same way.
"""

from __future__ import annotations

import random
from typing import Any

from gagpo.agents.prompts import TEMPLATES

ACTIONS_LABELS = frozenset(f"{t.actions_label}:" for t in TEMPLATES.values())
"""The lines after which our prompt templates list the admissible actions, one per ``- ``."""


def listed_actions(prompt: str) -> list[str]:
    """The actions the last action list of a prompt shows."""
    lines = prompt.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() in ACTIONS_LABELS]
    if not starts:
        return []
    actions = []
    for line in lines[starts[-1] + 1:]:
        if not line.startswith("- "):
            break
        actions.append(line[2:])
    return [] if actions == ["(none listed)"] else actions


class ScriptedServer:
    """Answers with a random listed action (seeded), or at ``malformed_rate`` with text that
    holds no action.

    Args:
        tokenizer: the model's tokenizer (to read prompts and write replies).
        seed: the random stream's seed.
        malformed_rate: share of replies with no ``<action>``.
    """

    def __init__(self, tokenizer: Any, seed: int = 0, malformed_rate: float = 0.0) -> None:
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)
        self.malformed_rate = malformed_rate
        self.calls = 0

    def reply(self, prompt: str) -> str:
        """The reply text to a prompt."""
        actions = listed_actions(prompt)
        if not actions or self.rng.random() < self.malformed_rate:
            return "I am not sure what to do."
        action = self.rng.choice(actions)
        return f"<think>I pick one of the listed actions.</think><action>{action}</action>"

    async def generate(self, request_id: str, *, prompt_ids: list[int],
                       sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        prompt = self.tokenizer.decode(prompt_ids, skip_special_tokens=True)
        ids = list(self.tokenizer.encode(self.reply(prompt), add_special_tokens=False))
        return TokenOutput(token_ids=ids, log_probs=[-1.0] * len(ids), stop_reason="completed")
