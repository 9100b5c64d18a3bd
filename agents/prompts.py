"""ReAct prompt templates for WebShop and ALFWorld, written for this project.

A prompt carries what the papers' agents see at each step: the task, how many steps were taken,
the last k (observation, action) pairs, the current observation and the admissible actions,
and asks for reasoning inside ``<think></think>`` and one action inside ``<action></action>``.
It is sent as one user message: every chat template accepts that, some refuse system messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ENV_NAMES = ("webshop", "alfworld", "text")
"""The templates: one per bundled environment, and ``text`` for any other text environment
that keeps the contract (a user's own env, registered with Gymnasium)."""


def resolve_env_name(name: str) -> str:
    """``"webshop"`` or ``"alfworld"`` from a name or a registered id (``"WebShop-v0"``);
    ``"text"`` (the generic template) for any other environment."""
    low = name.strip().lower().rpartition(":")[2]  # "module:Id" names the env Id
    for env in ENV_NAMES:
        if low.startswith(env):
            return env
    return "text"


@dataclass(frozen=True)
class Template:
    """The fixed wording of one environment's prompt."""

    role: str
    """Who the agent is; ``{instruction}`` is replaced by the task."""
    observation_label: str
    actions_label: str
    answer_format: str


TEMPLATES: dict[str, Template] = {
    "webshop": Template(
        role=(
            "You are a shopping assistant browsing a web store on behalf of a customer.\n"
            "The customer asks for: {instruction}"
        ),
        observation_label="What the page shows now",
        actions_label="Actions available on this page",
        answer_format=(
            "First weigh the customer's request against the page inside <think> </think>. "
            "Then write exactly one action inside <action> </action>: search[your keywords] "
            "runs a search when search[<query>] is listed (put your own words in place of "
            "<query>); click[name] presses a button, opens a product or picks an option, "
            "with the name copied from the list."
        ),
    ),
    "alfworld": Template(
        role=(
            "You are an agent carrying out a household chore in a home described in text.\n"
            "Your task: {instruction}"
        ),
        observation_label="What you observe now",
        actions_label="Actions you can take now",
        answer_format=(
            "First reason about where things are and what to do next inside <think> </think>. "
            "Then write exactly one action inside <action> </action>, copied from the list."
        ),
    ),
    "text": Template(
        role="You are an agent acting in an environment described in text.\nYour task: "
             "{instruction}",
        observation_label="What you observe now",
        actions_label="Actions you can take now",
        answer_format=(
            "First reason about what to do next inside <think> </think>. Then write exactly "
            "one action inside <action> </action>, copied from the list."
        ),
    ),
}


def _progress(step: int, max_steps: int | None) -> str:
    if step == 0:
        return "This is the first step of the task."
    limit = f" (at most {max_steps} are allowed)" if max_steps else ""
    plural = "s" if step != 1 else ""
    return f"You have taken {step} step{plural} so far{limit}."


def _history(step: int, history: Sequence[tuple[str, str]]) -> str:
    """The window, numbered by the steps the pairs came from (oldest first)."""
    if not history:
        return "Earlier steps are not shown." if step > 0 else ""
    first = step - len(history) + 1
    lines = [f"Your last {len(history)} step{'s' if len(history) != 1 else ''}, oldest first:"]
    for n, (obs, action) in enumerate(history, start=first):
        lines.append(f"[step {n}] observation: {obs}")
        lines.append(f"[step {n}] action: {action}")
    return "\n".join(lines)


def build_prompt(
    env_name: str,
    instruction: str,
    step: int,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
    *,
    max_steps: int | None = None,
) -> str:
    """The user message of one step.

    Args:
        env_name: ``"webshop"``/``"alfworld"`` or an env id such as ``"WebShop-v0"``.
        instruction: the task (``info["instruction"]``).
        step: steps already taken in this episode (0 right after reset).
        history: the last (observation, action) pairs, oldest first, at most ``step`` of them.
        observation: the current observation, always included whole.
        admissible_actions: the actions offered now, one per line.
        max_steps: the episode's step limit, mentioned when given.
    """
    t = TEMPLATES[resolve_env_name(env_name)]
    if len(history) > step:
        raise ValueError(f"{len(history)} history pairs but only {step} steps taken")
    actions = "\n".join(f"- {a}" for a in admissible_actions) or "(none listed)"
    sections = [
        t.role.replace("{instruction}", instruction.strip()),
        _progress(step, max_steps),
        _history(step, history),
        f"{t.observation_label} (step {step + 1}):\n{observation}",
        f"{t.actions_label}:\n{actions}",
        t.answer_format,
    ]
    return "\n\n".join(s for s in sections if s)


def build_messages(
    env_name: str,
    instruction: str,
    step: int,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
    *,
    max_steps: int | None = None,
) -> list[dict[str, str]]:
    """The chat prompt of one step: one user message (see :func:`build_prompt`)."""
    content = build_prompt(
        env_name, instruction, step, history, observation, admissible_actions,
        max_steps=max_steps,
    )
    return [{"role": "user", "content": content}]


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The chat-formatted prompt's token ids, ending where the assistant's reply starts: what
    every tokenising policy sends its model, so that the trainer scores the same ids."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:  # a base model without a template: a plain transcript
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
