"""The planner's side of a game: which grounded actions apply, what they change, and the goal.

This reproduces what fast-downward's translator and search code give the reference:

- **Operators.** An action's precondition is split into alternatives (disjunctive normal form,
  an ``exists`` adding its variables to the alternative); a grounding of the action's own
  parameters is an operator, named by them, and it applies when some alternative holds. A
  variable of type ``t`` ranges over the objects of ``t`` and its subtypes (``object``: all);
  a type no object has (ALFWorld's ``location,``) never holds.
- **Effects, as the translator keeps them.** A delete that equals an add under the same
  condition is dropped; a delete gets the condition that its atom holds (and that no add of the
  same atom fires), and is dropped when an unconditional add of that atom exists; an effect
  whose value the precondition already requires, or whose condition contradicts the
  precondition, is dropped; an operator left without effects does not exist (so "go to" the
  place the agent stands at is not a command).
- **Applying.** The planner's state changes by the effects whose conditions hold before the
  step. The fact view (:mod:`facts`) receives every kept effect, fired or not, positive before
  negative for one atom.
- **Goal.** The problem's goal formula, evaluated on the planner's state (``won``).

Atoms are tuples ``(predicate, entity index, ...)``. Joins use indices on argument positions,
built once per game for static predicates and kept up to date for fluent ones, in an order
chosen at load from the initial state's fact counts (for the reachability rounds: literals
joined to what is already bound first). Each join plan runs as a small function compiled from
it (:func:`compile_join`; the code is shared by every game whose plan reads the same), and the
reachability rounds compile the effects into it too.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import Any

from gagpo.envs.alfworld.native.pddl import ActionSchema, Domain, Formula

Atom = tuple  # (pred, idx, idx, ...)
# (positive, pred, terms); a term is ("v", variable number) or ("c", object index)
Literal = tuple[bool, str, tuple[Any, ...]]


class Unsupported(ValueError):
    """A construct of the domain or goal the native engine does not evaluate."""


# -- conjunctions with variables ----------------------------------------------------------------


@dataclass
class Conjunction:
    """One alternative: literals over numbered variables, each with a type."""

    var_types: list[str]
    literals: list[Literal]
    external: int  # the first ``external`` variables are the action's parameters
    plan: list[Any] = field(default_factory=list)  # join steps, set by plan_join
    run: Any = None  # the plan compiled (compile_join), made when first used
    first: Any = None  # the same, stopping at the first binding


def to_dnf(
    formula: Formula, names: dict[str, int], var_types: list[str], consts: dict[str, int]
) -> list[list[Literal]]:
    """Alternatives of ``formula``; ``names`` maps variable names in scope to numbers and
    ``var_types`` grows with the variables of ``exists``."""
    kind = formula[0]
    if kind == "lit":
        _, positive, pred, args = formula
        terms = []
        for a in args:
            if a.startswith("?"):
                if a not in names:
                    raise Unsupported(f"free variable {a} in ({pred} {' '.join(args)})")
                terms.append(("v", names[a]))
            elif a in consts:
                terms.append(("c", consts[a]))
            else:
                raise Unsupported(f"unknown object {a!r} in ({pred} {' '.join(args)})")
        return [[(positive, pred, tuple(terms))]]
    if kind == "and":
        out: list[list[Literal]] = [[]]
        for part in formula[1]:
            alts = to_dnf(part, names, var_types, consts)
            out = [a + b for a in out for b in alts]
        return out
    if kind == "or":
        out = []
        for part in formula[1]:
            out += to_dnf(part, names, var_types, consts)
        return out
    if kind == "exists":
        scope = dict(names)
        for name, kind_ in formula[1]:
            scope[name] = len(var_types)
            var_types.append(kind_)
        return to_dnf(formula[2], scope, var_types, consts)
    raise Unsupported(f"'{kind}' in a precondition or goal")


def renumber(literals: list[Literal], var_types: list[str], external: int) -> Conjunction:
    """One alternative with its own variables: the ``external`` parameters keep their numbers,
    the variables its ``exists`` added follow them (other alternatives' variables are dropped)."""
    used = sorted({t[1] for lit in literals for t in lit[2] if t[0] == "v" and t[1] >= external})
    number = {v: external + i for i, v in enumerate(used)}
    types = var_types[:external] + [var_types[v] for v in used]

    def term(t: Any) -> Any:
        return ("v", number[t[1]]) if t[0] == "v" and t[1] >= external else t

    out = [(pos, pred, tuple(term(t) for t in terms)) for pos, pred, terms in literals]
    return Conjunction(types, out, external)


@dataclass
class Operator:
    """A grounded action: its name (as the planner spells it), the action, the parameters'
    entities, and what applying it does."""

    name: str
    action: str
    args: tuple[int, ...]
    entries: tuple[tuple[Atom, bool, tuple[tuple[Atom, bool], ...]], ...]
    command: str | None = None  # its command, once derived, when no state can change it


class World:
    """Objects, types and the static/fluent split of one game (shared by all plays of it)."""

    def __init__(self, domain: Domain, objects: list[tuple[str, str]]) -> None:
        self.domain = domain
        self.names = [n for n, _ in objects]
        self.types = [t for _, t in objects]
        self.index = {n: i for i, n in enumerate(self.names)}
        parent = {name: p for name, p in domain.types if p is not None}
        ancestors: dict[str, set[str]] = {}
        for name, _ in domain.types:
            seen: set[str] = set()
            at = parent.get(name)
            while at is not None and at not in seen and at != name:
                seen.add(at)
                at = parent.get(at)
            ancestors[name] = seen
        self.ancestors = ancestors
        self._of_type: dict[str, tuple[int, ...]] = {}
        self._mask: dict[str, tuple[bool, ...]] = {}
        self.fluent = {e.pred for a in domain.actions for e in a.effects}

    def is_a(self, obj: int, kind: str) -> bool:
        if kind == "object":
            return True
        t = self.types[obj]
        return t == kind or kind in self.ancestors.get(t, ())

    def type_mask(self, kind: str) -> tuple[bool, ...]:
        """``type_mask(kind)[i]``: whether object ``i`` is of type ``kind``."""
        mask = self._mask.get(kind)
        if mask is None:
            members = set(self.of_type(kind))
            mask = self._mask[kind] = tuple(i in members for i in range(len(self.names)))
        return mask

    def of_type(self, kind: str) -> tuple[int, ...]:
        """The objects of type ``kind`` or one of its subtypes (``object``: all), in order."""
        if not self._of_type:
            members: dict[str, list[int]] = {}
            for i, t in enumerate(self.types):
                for k in (t, *self.ancestors.get(t, ())):
                    members.setdefault(k, []).append(i)
            self._of_type = {k: tuple(v) for k, v in members.items()}
            self._of_type["object"] = tuple(range(len(self.names)))
        return self._of_type.get(kind, ())


def _key_of(pos: tuple[int, ...]) -> Any:
    """The function from an atom to its key at argument positions ``pos``."""
    if not pos:
        return lambda atom: ()
    if len(pos) == 1:
        at = pos[0] + 1
        return lambda atom: (atom[at],)
    return operator.itemgetter(*(p + 1 for p in pos))


class State:
    """The planner's state: true atoms, with indices on argument positions."""

    def __init__(self, atoms: set[Atom], masks: dict[str, set[tuple[int, ...]]]) -> None:
        self.atoms = set(atoms)
        # pred -> positions -> key -> set of atoms
        self.index: dict[str, dict[tuple[int, ...], dict[Any, set[Atom]]]] = {}
        self._tables: dict[str, list[tuple[dict[Any, set[Atom]], Any]]] = {}
        self.add_masks(masks)

    def add_masks(self, masks: dict[str, set[tuple[int, ...]]]) -> None:
        """Index more argument positions (built from the atoms already there, in their order,
        as adding them one by one would)."""
        by_pred: dict[str, list[Atom]] | None = None
        for pred, pos_sets in masks.items():
            idx = self.index.setdefault(pred, {})
            for pos in pos_sets:
                if pos in idx:
                    continue
                if by_pred is None:
                    by_pred = {}
                    for atom in self.atoms:
                        by_pred.setdefault(atom[0], []).append(atom)
                key_of = _key_of(pos)
                table: dict[Any, set[Atom]] = {}
                for atom in by_pred.get(pred, ()):
                    key = key_of(atom)
                    bucket = table.get(key)
                    if bucket is None:
                        table[key] = {atom}
                    else:
                        bucket.add(atom)
                idx[pos] = table
                self._tables.setdefault(pred, []).append((table, key_of))

    def _index_add(self, atom: Atom) -> None:
        for table, key_of in self._tables.get(atom[0], ()):
            key = key_of(atom)
            bucket = table.get(key)
            if bucket is None:
                table[key] = {atom}
            else:
                bucket.add(atom)

    def _index_remove(self, atom: Atom) -> None:
        for table, key_of in self._tables.get(atom[0], ()):
            bucket = table.get(key_of(atom))
            if bucket is not None:
                bucket.discard(atom)

    def add(self, atom: Atom) -> None:
        if atom not in self.atoms:
            self.atoms.add(atom)
            self._index_add(atom)

    def remove(self, atom: Atom) -> None:
        if atom in self.atoms:
            self.atoms.discard(atom)
            self._index_remove(atom)

    def lookup(self, pred: str, pos: tuple[int, ...], key: tuple[int, ...]) -> set[Atom]:
        return self.index[pred][pos].get(key, _EMPTY)


_EMPTY: set[Atom] = set()


def plan_join(
    conj: Conjunction, world: World, counts: dict[str, int], distinct: dict,
    first: int | None = None, connected: bool = False, shape: bool = False,
) -> None:
    """Order the positive literals for joining (fewest expected matches first, from the initial
    state's counts), then the remaining variables by type, then the checks. With ``first``,
    positive literal number ``first`` opens the join over atoms handed to :func:`solutions`
    (the new atoms of a reachability round). With ``connected``, a literal sharing a bound
    variable goes before one that does not (the reachability rounds: no cross products over
    atoms found later). With ``shape``, the estimate is the number of variables a literal
    leaves to bind, not counts: the plan depends on the conjunction alone (so it can be shared
    by all games; for the later reachability rounds, where initial counts say little)."""
    bound: set[int] = set()
    positives = [lit for lit in conj.literals if lit[0] and lit[1] != "="]
    checks = [lit for lit in conj.literals if not (lit[0] and lit[1] != "=")]
    steps: list[Any] = []
    remaining = list(positives)
    if first is not None:
        lit = remaining.pop(first)
        pred, terms = lit[1], lit[2]
        consts = tuple((p, t[1]) for p, t in enumerate(terms) if t[0] == "c")
        free = tuple((p, t[1]) for p, t in enumerate(terms) if t[0] == "v")
        steps.append(("given", pred, consts, free))
        bound.update(v for _, v in free)
    while remaining:

        def estimate(lit: Literal) -> Any:
            pred, terms = lit[1], lit[2]
            est = float(counts.get(pred, 0))
            linked = False
            for p, t in enumerate(terms):
                if t[0] == "c" or t[1] in bound:
                    est /= max(1, distinct.get((pred, p), 1))
                    linked = True
            if shape:
                est = len({t[1] for t in terms if t[0] == "v" and t[1] not in bound})
            return (bool(bound) and not linked, est) if connected or shape else est

        best = min(remaining, key=estimate)
        remaining.remove(best)
        pred, terms = best[1], best[2]
        pos = tuple(p for p, t in enumerate(terms) if t[0] == "c" or t[1] in bound)
        key_terms = tuple(terms[p] for p in pos)
        free = tuple((p, t[1]) for p, t in enumerate(terms) if t[0] == "v" and t[1] not in bound)
        steps.append(("join", pred, pos, key_terms, free))
        bound.update(v for _, v in free)
    for v in range(len(conj.var_types)):
        if v not in bound:
            steps.append(("each", v))
            bound.add(v)
    steps.append(("check", tuple(checks)))
    conj.plan = steps
    conj.run = conj.first = None


def masks_of(conjs: list[Conjunction]) -> dict[str, set[tuple[int, ...]]]:
    out: dict[str, set[tuple[int, ...]]] = {}
    for conj in conjs:
        for step in conj.plan:
            if step[0] == "join":
                out.setdefault(step[1], set()).add(step[2])
    return out


def solutions(
    conj: Conjunction, state: State, world: World, given: Any = ()
) -> list[tuple[int, ...]]:
    """Bindings of the conjunction's variables, in the order of its join plan; ``given``: the
    atoms a plan made with ``first`` starts from. The plan runs as a function compiled from it
    once (:func:`compile_join`)."""
    run = conj.run
    if run is None:
        run = conj.run = compile_join(conj, world)
    return run(state.index, state.atoms, given)


def holds_any(conj: Conjunction, state: State, world: World) -> bool:
    """Whether the conjunction has a binding (the join stops at the first)."""
    run = conj.first
    if run is None:
        run = conj.first = compile_join(conj, world, first=True)
    return bool(run(state.index, state.atoms, ()))


# (plan, variable types, first, heads) -> (code, what each constant is); shared by every game
# of the process whose plan reads the same
_compiled: dict[Any, tuple[Any, tuple[tuple[str, Any], ...]]] = {}


def compile_join(
    conj: Conjunction, world: World, first: bool = False, heads: Any = None
) -> Any:
    """The conjunction's join plan as nested loops of a Python function ``(index, atoms,
    given) -> [binding, ...]`` (with ``first``: at most one). It visits atoms in the order an
    interpreter of the plan would (index buckets as they iterate, a variable bound by its first
    occurrence and compared at the next, its type checked when bound) and is several times
    faster. Predicates, objects and type tables reach the code as constants, never as source
    text, so one code object serves every game whose plan has the same shape.

    With ``heads`` (an action's effects, as in :attr:`CompiledAction.effects`), the function
    returns instead the atoms of the positive effects whose positive conditions hold in
    ``atoms`` and that ``atoms`` lacks, for each binding (the reachability rounds)."""
    key = (tuple(conj.plan), tuple(conj.var_types), first, None if heads is None else tuple(heads))
    hit = _compiled.get(key)
    if hit is None:
        hit = _compiled[key] = _join_source(conj.plan, conj.var_types, first, heads)
    code, wanted = hit
    consts = []
    for kind, value in wanted:
        if kind == "mask":
            consts.append(world.type_mask(value))
        elif kind == "of_type":
            consts.append(world.of_type(value))
        else:
            consts.append(value)
    namespace: dict[str, Any] = {"K": tuple(consts), "E": ()}
    exec(code, namespace)
    return namespace["run"]


def _join_source(
    plan: list[Any], types: list[str], first: bool, heads: Any
) -> tuple[Any, tuple[tuple[str, Any], ...]]:
    """The code of :func:`compile_join` and its constants (``("mask" | "of_type", type)`` for
    a game's type tables, ``("value", x)`` for the rest)."""
    consts: list[tuple[str, Any]] = []

    def const(value: Any, kind: str = "value") -> str:
        consts.append((kind, value))
        return f"K[{len(consts) - 1}]"

    lines: list[str] = []
    prologue: list[str] = []
    bound: set[int] = set()
    depth = 1

    def emit(text: str) -> None:
        lines.append("    " * depth + text)

    def term(t: Any) -> str:
        return const(t[1]) if t[0] == "c" else f"b{t[1]}"

    def bind(source: str, free: Any) -> None:
        for p, v in free:
            if v in bound:
                emit(f"if {source}[{p + 1}] != b{v}: continue")
                continue
            emit(f"b{v} = {source}[{p + 1}]")
            bound.add(v)
            if types[v] != "object":
                emit(f"if not {const(types[v], 'mask')}[b{v}]: continue")

    for n, step in enumerate(plan):
        kind = step[0]
        if kind == "given":
            _, pred, fixed, free = step
            emit("for a in given:")
            depth += 1
            tests = [f"a[0] != {const(pred)}"] + [f"a[{p + 1}] != {const(c)}" for p, c in fixed]
            emit(f"if {' or '.join(tests)}: continue")
            bind("a", free)
        elif kind == "join":
            _, pred, pos, key_terms, free = step
            prologue.append(f"t{n} = index[{const(pred)}][{const(pos)}]")
            key = "".join(term(t) + ", " for t in key_terms)
            emit(f"for a{n} in t{n}.get(({key}), E):")
            depth += 1
            bind(f"a{n}", free)
        elif kind == "each":
            v = step[1]
            emit(f"for b{v} in {const(types[v], 'of_type')}:")
            depth += 1
            bound.add(v)
        else:
            for positive, pred, terms in step[1]:
                if pred == "=":
                    test = f"{term(terms[0])} == {term(terms[1])}"
                else:
                    atom = ", ".join([const(pred)] + [term(t) for t in terms])
                    test = f"({atom},) in atoms"
                emit(f"if {'not ' if positive else ''}{test}: continue")
    if heads is None:
        binding = "".join(f"b{v}, " for v in range(len(types)))
        emit(f"out.append(({binding}))")
        if first:
            emit("return out")
    else:
        emit("pass")  # an action without positive effects adds nothing
    for cond_lits, positive, pred, terms in heads or ():
        if not positive:
            continue
        tests = []
        for c_pos, c_pred, c_terms in cond_lits:
            if not c_pos:
                continue  # relaxed: negative conditions are ignored
            if c_pred == "=":
                tests.append(f"{term(c_terms[0])} == {term(c_terms[1])}")
            else:
                atom = ", ".join([const(c_pred)] + [term(t) for t in c_terms])
                tests.append(f"({atom},) in atoms")
        head = ", ".join([const(pred)] + [term(t) for t in terms])
        emit(f"h = ({head},)")
        emit(f"if {' and '.join([*tests, 'h not in atoms'])}: out.append(h)")
    body = ["def run(index, atoms, given):", "    out = []"]
    body += ["    " + line for line in prologue]
    # a plan of no loops still runs its checks once
    body += ["    for _ in (0,):"] + ["    " + line for line in lines] + ["    return out"]
    code = compile("\n".join(body), f"<join of {len(types)} variables>", "exec")
    return code, tuple(consts)


# -- actions --------------------------------------------------------------------------------


@dataclass
class CompiledAction:
    schema: ActionSchema
    alternatives: list[Conjunction]
    # effects over the action's parameters: (condition literals, positive, pred, terms)
    effects: list[tuple[tuple[Literal, ...], bool, str, tuple[Any, ...]]]


def compile_action(schema: ActionSchema, world: World) -> CompiledAction:
    names = {name: i for i, (name, _) in enumerate(schema.params)}
    consts = world.index
    var_types = [t for _, t in schema.params]
    alts = [
        renumber(literals, var_types, len(schema.params))
        for literals in to_dnf(schema.precondition, names, var_types, consts)
    ]
    effects = []
    for eff in schema.effects:
        cond = []
        for lit in eff.condition:
            cond += to_dnf(lit, names, var_types, consts)[0]
        terms = to_dnf(("lit", True, eff.pred, eff.args), names, var_types, consts)[0][0][2]
        effects.append((tuple(cond), eff.positive, eff.pred, terms))
    return CompiledAction(schema, alts, effects)


def ground_effects(
    action: CompiledAction, conj: Conjunction, binding: list[int], state_atoms: set[Atom],
    world: World, model: set[Atom],
) -> tuple[tuple[Atom, bool, tuple[tuple[Atom, bool], ...]], ...] | None:
    """The operator's kept effects (see the module doc), or None when it is a no-op.

    ``model`` holds the fluent atoms that are reachable at all (:func:`relaxed_model`): the
    translator keeps a literal on a fluent atom only when the atom is reachable; a positive one
    on an unreachable atom is impossible (the effect, or the operator, goes), a negative one is
    simply true (the literal goes; a delete of such an atom goes).
    """

    def ground(pred: str, terms: tuple[Any, ...]) -> Atom:
        return (pred, *(t[1] if t[0] == "c" else binding[t[1]] for t in terms))

    fluent = world.fluent
    pre: dict[Atom, bool] = {}
    for positive, pred, terms in conj.literals:
        if pred == "=" or pred not in fluent:
            continue
        atom = ground(pred, terms)
        if atom not in model:
            if positive:
                return None
            continue
        if pre.get(atom, positive) != positive:
            return None  # contradictory precondition: the translator drops the operator
        pre[atom] = positive
    adds: list[tuple[tuple[tuple[Atom, bool], ...], Atom]] = []
    dels: list[tuple[tuple[tuple[Atom, bool], ...], Atom]] = []
    for cond_lits, positive, pred, terms in action.effects:
        cond: list[tuple[Atom, bool]] = []
        dead = False
        for c_pos, c_pred, c_terms in cond_lits:
            if c_pred == "=":
                a, b = (t[1] if t[0] == "c" else binding[t[1]] for t in c_terms)
                if (a == b) != c_pos:
                    dead = True
                continue
            atom = ground(c_pred, c_terms)
            if c_pred not in fluent:  # static: decided now
                if (atom in state_atoms) != c_pos:
                    dead = True
                continue
            if atom not in model:  # never true: a positive condition never holds
                if c_pos:
                    dead = True
                continue
            cond.append((atom, c_pos))
        if dead:
            continue
        target = ground(pred, terms)
        if target not in model:
            continue  # an unreachable atom: the translator drops the effect
        (adds if positive else dels).append((tuple(cond), target))
    entries: list[tuple[Atom, bool, dict[Atom, bool]]] = []
    add_conds: dict[Atom, list[tuple[tuple[Atom, bool], ...]]] = {}
    for cond, atom in adds:
        entries.append((atom, True, dict(cond)))
        add_conds.setdefault(atom, []).append(cond)
    for cond, atom in dels:
        if (cond, atom) in adds:
            continue
        conds_of_adds = add_conds.get(atom, [])
        if () in conds_of_adds:
            continue  # an unconditional add of the same atom always wins
        negations = _negate_dnf(conds_of_adds)
        if negations is None:
            continue
        base = dict(cond)
        if base.get(atom, True) is not True:
            continue  # the condition says the atom is false: nothing to delete
        base[atom] = True
        for neg in negations:
            merged = dict(base)
            if all(merged.setdefault(a, v) == v for a, v in neg.items()):
                entries.append((atom, False, merged))
    kept = []
    for atom, post, cond in entries:
        if pre.get(atom) == post:
            continue
        if any(a in pre and pre[a] != v for a, v in cond.items()):
            continue
        rest = tuple(sorted(((a, v) for a, v in cond.items() if a not in pre), key=repr))
        kept.append((atom, post, rest))
    if not kept:
        return None
    kept.sort(key=lambda e: (e[0], not e[1]))
    return tuple(kept)


def _negate_dnf(conds: list[tuple[tuple[Atom, bool], ...]]) -> list[dict[Atom, bool]] | None:
    """The negation of a disjunction of conjunctions, as consistent conjunctions (None when
    unsatisfiable)."""
    out = []
    for combo in itertools.product(*conds):
        neg: dict[Atom, bool] = {}
        if all(neg.setdefault(a, not v) == (not v) for a, v in combo):
            out.append(neg)
    return out or None


# (literals, variable types, opening literal) -> the alternative planned by its shape (plans of
# that kind depend on nothing else, so every game with the same domain shares them)
_opened_plans: dict[Any, Conjunction] = {}


def relaxed_model(
    actions: list[CompiledAction], init: set[Atom], world: World, counts: dict[str, int],
    distinct: dict,
) -> set[Atom]:
    """The fluent atoms reachable when deletes and negative conditions are ignored (the
    translator's reachability analysis), by rounds: the first joins each action's relaxed
    alternatives (:func:`relaxed_alternatives`) over the initial atoms; each later one only
    joins from the atoms the previous round found, opening an alternative at each of its
    positive literals on a fluent predicate in turn (static atoms are never new). Each opened
    alternative is planned and compiled when a round first needs it."""
    fluent = world.fluent
    jobs = []  # (alternative, {fluent predicate: [its literal numbers among the positives]})
    for action in actions:
        for conj in relaxed_alternatives(action):
            if any(not world.of_type(t) for t in conj.var_types):
                continue  # a variable of a type without objects: never holds
            plan_join(conj, world, counts, distinct, connected=True)
            conj.run = compile_join(conj, world, heads=action.effects)
            positives = [lit for lit in conj.literals if lit[1] != "="]
            opened: dict[str, list[int]] = {}
            for i, lit in enumerate(positives):
                if lit[1] in fluent:
                    opened.setdefault(lit[1], []).append(i)
            jobs.append((action, conj, opened, {}))
    masks: dict[str, set[tuple[int, ...]]] = {}
    for _, conj, _, _ in jobs:
        for pred, pos in masks_of([conj]).items():
            masks.setdefault(pred, set()).update(pos)
    model = State(init, masks)
    found: list[Atom] = []
    for _, conj, _, _ in jobs:
        found += conj.run(model.index, model.atoms, ())
    while found:
        new: dict[str, list[Atom]] = {}
        for atom in found:
            if atom not in model.atoms:
                model.add(atom)
                new.setdefault(atom[0], []).append(atom)
        found = []
        for action, conj, opened, compiled in jobs:
            for pred, numbers in opened.items():
                given = new.get(pred)
                if given is None:
                    continue
                for i in numbers:
                    run = compiled.get(i)
                    if run is None:
                        key = (tuple(conj.literals), tuple(conj.var_types), i)
                        copy = _opened_plans.get(key)
                        if copy is None:
                            copy = Conjunction(list(conj.var_types), conj.literals, conj.external)
                            plan_join(copy, world, counts, distinct, first=i, shape=True)
                            _opened_plans[key] = copy
                        model.add_masks(masks_of([copy]))
                        run = compiled[i] = compile_join(copy, world, heads=action.effects)
                    found += run(model.index, model.atoms, given)
    return {a for a in model.atoms if a[0] in fluent}


def relaxed_alternatives(action: CompiledAction) -> list[Conjunction]:
    """The action's alternatives without their negative literals (the relaxation)."""
    out = []
    for conj in action.alternatives:
        lits = [lit for lit in conj.literals if lit[0]]
        out.append(Conjunction(list(conj.var_types), lits, conj.external))
    return out
