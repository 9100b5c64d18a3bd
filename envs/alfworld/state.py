"""State keys from the engine's true world state (its PDDL facts), never from observation text.

The key covers every fact an action can change that matters to the world: where the agent is,
where every object is (in which receptacle, at which location, or held), what is open, and which
objects are clean, hot, cool, sliced, toggled or on. Static facts (types, what fits where, which
receptacles open) are the same in every state of a game, and keys are compared only between
copies of one task (the contract, as in WebShop), so neither they nor the task id are in it.

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


def state_key(facts: Iterable[Any]) -> str:
    """The contract's ``state_key`` for a game's current facts."""
    return world_state_key(world_facts(facts))


def world_state_key(world: tuple[tuple[str, ...], ...]) -> str:
    """The ``state_key`` of dynamic facts already in :func:`world_facts`' form (the native
    engine computes them from its fact view directly)."""
    return make_state_key(world)
