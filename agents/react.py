"""The ReAct agent: prompts from observations and infos, actions from replies.

The agent holds one :class:`~gagpo.agents.memory.EpisodeMemory` per environment index; it does not
call a policy or step an environment (``gagpo.agents.rollout`` does). One step of a rollout::

    requests = agent.requests(observations, infos)      # one Request per env
    replies = policy.act(requests)
    parsed = agent.parse_replies(replies, requests)     # ParsedAction per reply
    ... env.step(p.action or reply.text) ...
    agent.observe(i, observations[i], p.action or reply.text)
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from functools import partial
from typing import Any

from gagpo.agents.memory import EpisodeMemory
from gagpo.agents.parser import ParsedAction, parse_reply
from gagpo.agents.policies.base import Reply, Request
from gagpo.agents.prompts import build_messages, resolve_env_name
from gagpo.common.numbers import check_number


def registered_max_steps(env_name: str) -> int | None:
    """The episode limit Gymnasium's registry holds for the environment ``env_name`` names
    (an env id, ``"module:Id"``, or ``"webshop"``/``"alfworld"`` for the newest registered id
    of that environment); None when none is registered."""
    import gymnasium as gym

    from gagpo.envs import env_spec  # registers the bundled environments

    with contextlib.suppress(ValueError):  # an id, or "module:Id" (importing module)
        return env_spec(env_name.strip()).max_episode_steps
    name = resolve_env_name(env_name)
    ids = sorted(i for i in gym.registry if i.lower().startswith(name)) if name != "text" else []
    return gym.spec(ids[-1]).max_episode_steps if ids else None


class ReActAgent:
    """Builds each step's prompt and parses each reply.

    Args:
        env_name: ``"webshop"``/``"alfworld"`` or an env id such as ``"WebShop-v0"`` (any other
            env's prompts use the generic ``text`` template).
        history_length: (observation, action) pairs shown in the prompt (the papers use 2).
        max_prompt_chars: cap on the prompt's length in characters.
        max_prompt_tokens: cap in tokens of the chat-formatted prompt; needs ``tokenizer``.
        tokenizer: a transformers tokenizer, to count tokens.
        map_near_miss: map a near-miss action to the closest admissible one when parsing.
        near_miss_cutoff: rapidfuzz ratio (0-100) a near miss must reach.
        max_steps: the step limit mentioned in prompts (default: the registered env's,
            :func:`registered_max_steps`; 0 for none).

    Over a cap, history is dropped oldest first; the task, the current observation and the
    admissible actions are never cut, so a prompt may stay over the cap when they alone are.
    """

    def __init__(
        self,
        env_name: str,
        history_length: int = 2,
        *,
        max_prompt_chars: int | None = None,
        max_prompt_tokens: int | None = None,
        tokenizer: Any = None,
        map_near_miss: bool = False,
        near_miss_cutoff: float = 80.0,
        max_steps: int | None = None,
    ) -> None:
        self.env_name = resolve_env_name(env_name)
        check_number("history_length", history_length, ">= 0", integer=True)
        if max_prompt_tokens is not None and tokenizer is None:
            raise ValueError("max_prompt_tokens needs a tokenizer")
        self.history_length = history_length
        self.max_prompt_chars = max_prompt_chars
        self.max_prompt_tokens = max_prompt_tokens
        self.tokenizer = tokenizer
        self.map_near_miss = map_near_miss
        self.near_miss_cutoff = near_miss_cutoff
        self.max_steps = registered_max_steps(env_name) if max_steps is None else max_steps
        self._memories: dict[int, EpisodeMemory] = {}

    # --- memory -------------------------------------------------------------------------------

    def memory(self, env_index: int) -> EpisodeMemory:
        if env_index not in self._memories:
            self._memories[env_index] = EpisodeMemory(self.history_length)
        return self._memories[env_index]

    def observe(self, env_index: int, observation: str, action: str) -> None:
        """Record that ``action`` was taken in env ``env_index`` when ``observation`` was shown."""
        self.memory(env_index).add(observation, action)

    def reset(self, env_index: int | None = None) -> None:
        """Forget one environment's episode (a new one starts), or every environment's."""
        if env_index is None:
            self._memories.clear()
        else:
            self._memories.pop(env_index, None)

    # --- prompts ------------------------------------------------------------------------------

    def prompt_length(self, messages: list[dict[str, str]]) -> int:
        """Chat-formatted tokens when ``max_prompt_tokens`` is set, else characters."""
        if self.max_prompt_tokens is not None:
            tok = self.tokenizer
            if getattr(tok, "chat_template", None):
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            else:
                text = "\n".join(m["content"] for m in messages)
            return len(tok(text, add_special_tokens=False)["input_ids"])
        return sum(len(m["content"]) for m in messages)

    def _fits(self, messages: list[dict[str, str]]) -> bool:
        chars = sum(len(m["content"]) for m in messages)
        if self.max_prompt_chars is not None and chars > self.max_prompt_chars:
            return False
        return not (
            self.max_prompt_tokens is not None
            and self.prompt_length(messages) > self.max_prompt_tokens
        )

    def messages(self, env_index: int, observation: str, info: dict[str, Any]) -> list[dict]:
        """The chat prompt for env ``env_index`` now, history trimmed to fit the cap."""
        mem = self.memory(env_index)
        return self._fit(mem.steps, mem.recent(), observation, info)

    def _fit(self, steps: int, history: list[tuple[str, str]], observation: str,
             info: dict[str, Any]) -> list[dict[str, str]]:
        def build(h: list[tuple[str, str]]) -> list[dict[str, str]]:
            return build_messages(
                self.env_name,
                str(info.get("instruction", "")),
                steps,
                h,
                observation,
                list(info.get("admissible_actions", [])),
                max_steps=self.max_steps or None,
            )

        for keep in range(len(history), 0, -1):
            messages = build(history[len(history) - keep:])
            if self._fits(messages):
                return messages
        # No history left to drop: the current observation stays whole even over the cap.
        return build([])

    def requests(
        self,
        observations: Sequence[str],
        infos: Sequence[dict[str, Any]],
        env_indices: Sequence[int] | None = None,
    ) -> list[Request]:
        """One :class:`Request` per observation; ``env_indices`` name their environments
        (default ``0..n-1``). Each prompt is built from the memory as it is now, when a policy
        (or the step table) first reads it."""
        if len(observations) != len(infos):
            raise ValueError("observations and infos differ in length")
        indices = range(len(observations)) if env_indices is None else env_indices
        if len(indices) != len(observations):
            raise ValueError("env_indices and observations differ in length")
        requests = []
        for i, obs, info in zip(indices, observations, infos, strict=True):
            mem = self.memory(int(i))  # numpy indices welcome
            requests.append(Request(partial(self._fit, mem.steps, mem.recent(), obs, info),
                                    list(info.get("admissible_actions", [])), info))
        return requests

    # --- replies ------------------------------------------------------------------------------

    def parse(self, text: str, admissible_actions: Sequence[str]) -> ParsedAction:
        """The action of one reply (see :mod:`gagpo.agents.parser`)."""
        return parse_reply(
            text,
            admissible_actions,
            map_near_miss=self.map_near_miss,
            near_miss_cutoff=self.near_miss_cutoff,
        )

    def parse_replies(
        self, replies: Sequence[Reply], requests: Sequence[Request]
    ) -> list[ParsedAction]:
        """The action of each reply, judged against its request's admissible actions."""
        near, cutoff = self.map_near_miss, self.near_miss_cutoff
        return [
            parse_reply(rep.text, req.admissible_actions, map_near_miss=near,
                        near_miss_cutoff=cutoff)
            for rep, req in zip(replies, requests, strict=True)
        ]
