"""What a client of a session sees after each step, in every observation mode.

One function for the in-process environment and the JSON API alike, so that both give
identical transcripts.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from gagpo.servers.webshop.pages import render_text, render_text_rich
from gagpo.servers.webshop.shop import Shop, State, StepResult

ObservationMode = Literal["text", "text_rich", "html"]
OBSERVATION_MODES = ("text", "text_rich", "html")
EXTRA_INFOS = ("expert_action",)
"""Infos a caller may ask for on top of the contract's (TextWorld's EnvInfos idea)."""


def state_key(state: State) -> str:
    """Digest of (page, query, result page, product, options, sub-page)."""
    return hashlib.blake2b(repr(state.key_parts()).encode(), digest_size=8).hexdigest()


def observation(shop: Shop, state: State, mode: ObservationMode = "text") -> str:
    page = shop.page(state)
    if mode == "text":
        return render_text(page)
    if mode == "text_rich":
        return render_text_rich(page)
    if mode == "html":
        from gagpo.servers.webshop.web.html import render_html

        return render_html(shop, state)
    raise ValueError(f"observation mode must be one of {OBSERVATION_MODES}, not {mode!r}")


def with_feedback(obs: str, feedback: str, mode: ObservationMode) -> str:
    """A rejected action's observation: the feedback sentence, then the unchanged page."""
    if not feedback or mode == "html":
        return obs
    sep = " [SEP] " if mode == "text" else "\n"
    return f"{feedback}{sep}{obs}"


def describe(
    shop: Shop,
    state: State,
    mode: ObservationMode = "text",
    result: StepResult | None = None,
    request_infos: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Observation, reward, done and the contract's info fields for ``state``, plus the
    requested extras: ``expert_action`` (the goal-aware expert's next action, None when
    done)."""
    page = shop.page(state)
    obs = observation(shop, state, mode)
    reward = 0.0
    valid = True
    feedback = ""
    parts = None
    if result is not None:
        reward, valid, feedback = result.reward, result.valid, result.feedback
        obs = with_feedback(obs, feedback, mode) if not valid else obs
        parts = result.reward_parts.as_dict() if result.reward_parts is not None else None
    score = state.reward if state.reward is not None else 0.0
    goal = shop.goal_of(state)
    info: dict[str, Any] = {
        "task_id": f"webshop:{state.goal}",
        "task_type": goal.category,
        "instruction": goal.instruction_text,
        "admissible_actions": page.admissible_actions(),
        "state_key": state_key(state),
        "won": state.page == "done" and score == 1.0,
        "score": float(score),
        "action_valid": valid,
        "available_actions": page.available_actions(),
        "page": page.kind,
        "goal_index": state.goal,
    }
    if feedback:
        info["feedback"] = feedback
    if parts is not None:
        info["reward_parts"] = parts
    if "expert_action" in request_infos:
        from gagpo.servers.webshop.expert import expert_action

        info["expert_action"] = expert_action(shop, state)
    return {
        "observation": obs,
        "reward": float(reward),
        "done": state.page == "done",
        "info": info,
    }
