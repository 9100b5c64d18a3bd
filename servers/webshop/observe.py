"""What a client of a session sees after each step, in every observation mode: the page's text
and the shop's facts about the session (:func:`view`), and the JSON API's answer made of them
(:func:`describe`).

The in-process environment (:mod:`gagpo.envs.webshop.env`) turns the same facts into the env
contract's info, so both give identical transcripts.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from gagpo.common.digest import digest
from gagpo.servers.webshop.pages import render_text, render_text_rich
from gagpo.servers.webshop.shop import Shop, State, StepResult

ObservationMode = Literal["text", "text_rich", "html"]
OBSERVATION_MODES = ("text", "text_rich", "html")
EXTRA_INFOS = ("expert_action",)
"""Infos a caller may ask for on top of the contract's (TextWorld's EnvInfos idea)."""


class View(NamedTuple):
    """What the shop shows and knows of a session after a step."""

    observation: str
    """The page in the requested mode (a rejected action's feedback sentence first)."""
    reward: float
    """What the step paid (the purchase's reward; 0 otherwise)."""
    done: bool
    """Whether the session is over (bought)."""
    facts: dict[str, Any]
    """``task_id`` (``"webshop:<goal>"``), ``task_type`` (the goal's product category),
    ``instruction``, ``admissible_actions``, ``won`` (bought with reward 1), ``score``,
    ``action_valid``, ``available_actions`` (the original's ``{has_search_bar,
    clickables}``), ``page``, ``goal_index``, and when they apply ``feedback`` (a rejected
    action's), ``reward_parts`` (after the purchase) and the requested extras
    (``expert_action``: the goal-aware expert's next action, None when done)."""
    key_parts: tuple
    """What the session's state key is made of (:meth:`State.key_parts`)."""


def observation(shop: Shop, state: State, mode: ObservationMode = "text") -> str:
    page = shop.page(state)
    if mode == "text":
        return render_text(page)
    if mode == "text_rich":
        return render_text_rich(page)
    if mode == "html":
        from gagpo.servers.webshop.html import render_html

        return render_html(shop, state)
    raise ValueError(f"observation mode must be one of {OBSERVATION_MODES}, not {mode!r}")


def with_feedback(obs: str, feedback: str, mode: ObservationMode) -> str:
    """A rejected action's observation: the feedback sentence, then the unchanged page."""
    if not feedback or mode == "html":
        return obs
    sep = " [SEP] " if mode == "text" else "\n"
    return f"{feedback}{sep}{obs}"


def view(
    shop: Shop,
    state: State,
    mode: ObservationMode = "text",
    result: StepResult | None = None,
    request_infos: tuple[str, ...] = (),
) -> View:
    """The page and the facts of ``state``, reached by ``result`` (None: no step, as after a
    reset or for a look at the unchanged page)."""
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
    facts: dict[str, Any] = {
        "task_id": f"webshop:{state.goal}",
        "task_type": goal.category,
        "instruction": goal.instruction_text,
        "admissible_actions": page.admissible_actions(),
        "won": state.page == "done" and score == 1.0,
        "score": float(score),
        "action_valid": valid,
        "available_actions": page.available_actions(),
        "page": page.kind,
        "goal_index": state.goal,
    }
    if feedback:
        facts["feedback"] = feedback
    if parts is not None:
        facts["reward_parts"] = parts
    if "expert_action" in request_infos:
        from gagpo.servers.webshop.expert import expert_action

        facts["expert_action"] = expert_action(shop, state)
    return View(obs, float(reward), state.page == "done", facts, state.key_parts())


def describe(
    shop: Shop,
    state: State,
    mode: ObservationMode = "text",
    result: StepResult | None = None,
    request_infos: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The JSON API's answer for ``state``: observation, reward, done and ``info``, the
    :func:`view`'s facts with the ``state_key`` (the digest of its key parts, the one
    :func:`gagpo.envs.base.make_state_key` computes)."""
    obs, reward, done, facts, key_parts = view(shop, state, mode, result, request_infos)
    info = {**facts, "state_key": digest(*key_parts)}
    return {"observation": obs, "reward": reward, "done": done, "info": info}
