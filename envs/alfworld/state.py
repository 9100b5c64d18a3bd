"""State keys from the engine's true world state (its PDDL facts), never from observation text.

The key covers every fact an action can change that matters to the world: where the agent is,
where every object is (in which receptacle, at which location, or held), what is open, and which
objects are clean, hot, cool, sliced, toggled or on. Static facts (types, what fits where, which
receptacles open) are the same in every state of a game and the task id stands for them.

``checked`` is left out on purpose: ``look``, ``examine``, ``inventory``, ``help`` and ``open`` set
it as bookkeeping; no precondition, goal or text depends on it, so two states that differ only
there behave identically and share a key (one state reached by two paths gets one key).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gagpo.envs.base import make_state_key

# Predicates (as fast-downward lower-cases them) whose truth actions change.
DYNAMIC_PREDICATES = frozenset(
    {
        "atlocation",
        "objectatlocation",
        "inreceptacle",
        "inreceptacleobject",
        "isreceptacleobjectfull",
        "holds",
        "holdsany",
        "holdsanyreceptacleobject",
        "opened",
        "full",
        "isclean",
        "ishot",
        "iscool",
        "ison",
        "istoggled",
        "issliced",
    }
)


def world_facts(facts: Iterable[Any]) -> tuple[tuple[str, ...], ...]:
    """The dynamic facts, as sorted ``(predicate, arg, ...)`` tuples of entity names."""
    out = []
    for fact in facts:
        name = fact.name.lower()
        if name in DYNAMIC_PREDICATES:
            out.append((name, *(v.name for v in fact.arguments)))
    return tuple(sorted(out))


def state_key(task_id: str, facts: Iterable[Any]) -> str:
    """The contract's ``state_key`` for a game's current facts."""
    return world_state_key(task_id, world_facts(facts))


def world_state_key(task_id: str, world: tuple[tuple[str, ...], ...]) -> str:
    """The ``state_key`` of dynamic facts already in :func:`world_facts`' form (the native
    engine computes them from its fact view directly)."""
    return make_state_key("alfworld", task_id, world)
