"""ALFWorld's games on an engine of our own, giving what the reference engine gives.

The reference is TextWorld's PDDL backend (``textworld.envs.pddl``: fast-downward's translator
and search library underneath, tatsu-parsed grammars) wrapped by ALFWorld's ``AlfredDemangler``
and ``AlfredInfos``. This package reads the same game file (``game.tw-pddl``: ``pddl_domain``,
``pddl_problem``, ``grammar``, ``walkthrough``) and imports none of textworld, tatsu,
fast-downward or alfworld. What it must reproduce, and where each part lives:

**Reading** (:mod:`pddl`, :mod:`twl`, :mod:`csg`). PDDL as the translator tokenises it (all
lower-cased, ``;`` comments, typed lists where the type is whatever token follows ``-``, so
ALFWorld's ``?l - location,`` is a type without objects). The grammar field's rule blocks and
per-action template/feedback; every right-hand side parsed with the quirks of the reference's
PEG parser (it drops everything after the first character no symbol accepts, skips tabs, and
blank lines or ``//`` comments at the start). Queries ``p(x:t) & !q(y)``; expressions inside
``{...}`` are Python evaluated over entities (here compiled after an allow-list check).

**Names** (:mod:`names`). The ids of the entities in the initial facts, sorted; each class
numbered from its count down ("cabinet 4" is the smallest id); "basin" appended when the id
holds it; ids without ``_bar_`` keep their text and a trailing space ("agent1 ").

**Commands and their order** (:mod:`ground`, :mod:`play`). An operator is an action grounded on
its own parameters whose precondition (split into alternatives, ``exists`` adding variables)
holds in the planner's state. Operators the translator would drop do not exist: those left
without effects (going to the place one stands at), and effects are pruned as it prunes them
(unreachable atoms, deletes re-added, values the precondition already fixes). Each operator's
command is its template derived from the grammar and then ``str.format``-ed with id -> name;
``admissible_commands`` is ``sorted(set(...))`` of them (``help`` included: the env removes it).
A step strips the command and must equal one of them exactly; anything else is "Nothing
happens." and changes nothing.

**State and facts** (:mod:`ground`, :mod:`facts`). Two views, as in the reference: the planner's
state (conditional effects fire by the state before the step; it decides applicability and the
goal) and the fact view (every kept effect written in, fired or not; a negative effect adds a
``not_p`` fact). ``infos["facts"]`` is the fact view with shown names: it includes static facts
and ``not_`` facts; ``state_key`` hashes its dynamic predicates (:mod:`gagpo.envs.alfworld.state`).

**Text** (:mod:`textgen`). The reset text derives ``#intro#`` with nothing bound; a step's
feedback derives the action's feedback rule with the operator's parameters bound, after the
effects. Rules take their first production whose condition matches; lists come out in the order
of sorted facts (by ids, so "a cup 2, a cup 1" is possible) with the grammar's separators.

**won and score.** The problem's goal evaluated on the planner's state after each step; the
score is 1 when won, else 0 (also for steps after the win, which the engine still plays).

A game file the engine cannot read raises :class:`GameFileError` naming the file and the part;
the env then plays that game on the reference engine. ``python -m tools.alfworld_diff``
compares both engines step by step.
"""

from gagpo.envs.alfworld.native.errors import GameFileError
from gagpo.envs.alfworld.native.play import Fact, NativeEnv, NativeGame, load_game

__all__ = ["Fact", "GameFileError", "NativeEnv", "NativeGame", "load_game"]
