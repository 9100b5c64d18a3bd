"""Loading a game once, and playing it: the native engine's reset and step.

:class:`NativeGame` is everything that does not change while playing (parsed domain, problem and
grammar, objects and their shown names, compiled actions, goal and queries, static indices and
caches); it is read once per game file and kept (:func:`load_game`). :class:`NativeEnv` plays
one game at a time with the reference's interface: ``load(path)``, ``reset() -> (obs, infos)``,
``step(command) -> (obs, score, done, infos)``, with ``infos`` holding ``admissible_commands``
(sorted, without duplicates, ``help`` included), ``won`` and ``facts`` (the fact view, with shown
names), and ``valid_commands`` (the commands the engine matches, in its order).

A command is matched after ``str.strip()`` against the commands of the operators that apply;
anything else answers "Nothing happens." and changes nothing.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from gagpo.envs.alfworld.native import ground
from gagpo.envs.alfworld.native.csg import (
    Conditional,
    GrammarError,
    ListOf,
    Nonterminal,
    parse_query,
)
from gagpo.envs.alfworld.native.errors import GameFileError
from gagpo.envs.alfworld.native.facts import CompiledQuery, FactView, TypeTree
from gagpo.envs.alfworld.native.names import demangle
from gagpo.envs.alfworld.native.pddl import parse_domain, parse_problem
from gagpo.envs.alfworld.native.textgen import DerivationError, Deriver, Entity
from gagpo.envs.alfworld.native.twl import parse_grammar

NOTHING_HAPPENS = "Nothing happens."


class Arg(NamedTuple):
    name: str
    type: str


class Fact(NamedTuple):
    """A fact of the view with shown names: ``name`` and ``arguments`` (each ``.name``,
    ``.type``), like the reference's propositions."""

    name: str
    arguments: tuple[Arg, ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f'{a.name}: {a.type}' for a in self.arguments)})"


class NativeGame:
    """A game file read and compiled for play (immutable once built)."""

    def __init__(self, data: dict[str, Any], path: str) -> None:
        self.path = path
        for key in ("pddl_domain", "grammar", "pddl_problem"):
            if not isinstance(data.get(key), str):
                raise GameFileError(path, key, "missing or not text")
        self.walkthrough = data.get("walkthrough")
        domain = parse_domain(data["pddl_domain"], path)
        problem = parse_problem(data["pddl_problem"], domain, path)
        grammar = parse_grammar(data["grammar"], path)
        self.domain, self.problem = domain, problem
        world = self.world = ground.World(domain, domain.constants + problem.objects)
        idx = world.index

        # The initial facts (planner and view alike) and the entities they name.
        init = {(pred, *(idx[a] for a in args)) for pred, args in problem.init}
        self.init_atoms = frozenset(init)
        tw_entities = sorted({i for atom in init for i in atom[1:]})
        try:
            shown = demangle(world.names[i] for i in tw_entities)
        except KeyError as e:
            raise GameFileError(path, "pddl_problem objects", f"cannot name objects: {e}") from None
        self.shown = [shown.get(n, n) for n in world.names]
        self.entities = [
            Entity(n, t, s) for n, t, s in zip(world.names, world.types, self.shown, strict=True)
        ]
        order = sorted(range(len(world.names)), key=lambda i: (world.names[i], world.types[i]))
        self.rank = [0] * len(order)
        for r, i in enumerate(order):
            self.rank[i] = r
        self.view_init: dict[tuple[str, tuple[str, ...]], set[tuple[int, ...]]] = {}
        for atom in init:
            sig = (atom[0], tuple(world.types[i] for i in atom[1:]))
            self.view_init.setdefault(sig, set()).add(tuple(atom[1:]))

        # TextWorld's type hierarchy: the planner's types, each listing all its ancestors.
        self.tree = TypeTree(
            [("object", ())]
            + [(name, tuple(sorted(world.ancestors[name]))) for name, _ in domain.types[1:]]
        )

        # Actions: alternatives, effects, join plans; and their texts.
        try:
            self.actions = [ground.compile_action(a, world) for a in domain.actions]
            self.schemas = {a.schema.name: a.schema for a in self.actions}
            goal_types: list[str] = []
            self.goal = [
                ground.renumber(lits, goal_types, 0)
                for lits in ground.to_dnf(problem.goal, {}, goal_types, idx)
            ]
        except ground.Unsupported as e:
            raise GameFileError(path, "pddl_domain or pddl_problem", str(e)) from None
        counts: dict[str, int] = {}
        distinct_sets: dict[tuple[str, int], set[int]] = {}
        for atom in init:
            counts[atom[0]] = counts.get(atom[0], 0) + 1
            for p, a in enumerate(atom[1:]):
                distinct_sets.setdefault((atom[0], p), set()).add(a)
        distinct = {k: len(v) for k, v in distinct_sets.items()}
        conjs = [c for a in self.actions for c in a.alternatives] + self.goal
        for conj in conjs:
            ground.plan_join(conj, world, counts, distinct)
        self.masks = ground.masks_of(conjs)
        self.model = ground.relaxed_model(self.actions, set(init), world, counts, distinct)
        self.op_cache: dict[tuple[int, tuple[int, ...]], Any] = {}
        self.text = {}
        for a in self.actions:
            text = grammar.actions.get(a.schema.name)
            if text is None:
                raise GameFileError(path, "grammar", f"no template for action {a.schema.name!r}")
            self.text[a.schema.name] = text

        # Rules and queries, compiled against the type hierarchy.
        rules = {}
        givens: dict[str, CompiledQuery] = {}
        for name, productions in grammar.rules.items():
            built = []
            for i, rule in enumerate(productions):
                cond = self._query(rule.condition, f"grammar rule {name!r} production {i}")
                built.append((cond, rule.rhs))
                self._collect_givens(rule.rhs, givens, f"grammar rule {name!r}")
            rules[name] = tuple(built)
        for name, text in self.text.items():
            self._collect_givens(text.template + text.feedback, givens, f"action {name}")
        self.deriver = Deriver(rules, givens, self.entities)
        self.intro = tuple(self._symbols("#intro#"))
        dynamic = world.fluent | {"not_" + p for p in world.fluent}
        self.static_template = {
            name: not (self._predicates(text.template, rules, givens) & dynamic)
            for name, text in self.text.items()
        }
        self.id_to_name = dict(zip(world.names, self.shown, strict=True))

    # -- load helpers --------------------------------------------------------------------------

    def _query(self, preds: Any, part: str) -> CompiledQuery | None:
        if preds is None:
            return None
        try:
            return CompiledQuery(preds, self.tree)
        except KeyError as e:
            raise GameFileError(
                self.path, part, f"unknown type {e.args[0]!r} in a condition"
            ) from None

    def _collect_givens(self, symbols: Any, givens: dict[str, CompiledQuery], part: str) -> None:
        for sym in symbols:
            if isinstance(sym, ListOf):
                sym = sym.item
            if isinstance(sym, Conditional) and sym.given is not None and sym.given not in givens:
                try:
                    cq = self._query(parse_query(sym.given), part)
                except GrammarError as e:
                    raise GameFileError(self.path, part, str(e)) from None
                assert cq is not None
                givens[sym.given] = cq

    def _symbols(self, text: str) -> list[Any]:
        from gagpo.envs.alfworld.native.csg import parse_symbols

        return parse_symbols(text)

    def _predicates(self, symbols: Any, rules: dict, givens: dict) -> set[str]:
        """Predicates a derivation of ``symbols`` may read (through rules and queries); a rule
        that does not exist counts as reading everything."""
        seen_rules: set[str] = set()
        preds: set[str] = set()
        stack = list(symbols)
        while stack:
            sym = stack.pop()
            if isinstance(sym, ListOf):
                stack.append(sym.item)
                for sep in ("list_empty", "list_separator", "list_last_separator"):
                    stack.append(Nonterminal(sep))
                continue
            if isinstance(sym, Conditional):
                if sym.given is not None:
                    preds |= {s[0] for _, sigs in givens[sym.given].preds for s in sigs}
                stack.append(sym.expression)
            elif isinstance(sym, Nonterminal):
                if sym.name in seen_rules:
                    continue
                seen_rules.add(sym.name)
                if sym.name not in rules:
                    return {"*"} | self.world.fluent
                for cond, rhs in rules[sym.name]:
                    if cond is not None:
                        preds |= {s[0] for _, sigs in cond.preds for s in sigs}
                    stack.extend(rhs)
        return preds


_cache_lock = threading.Lock()
_games: OrderedDict[tuple[str, int, int], NativeGame] = OrderedDict()
_MAX_GAMES = 256


def load_game(path: str | os.PathLike[str]) -> NativeGame:
    """The game at ``path``, read once per process (kept while the file is unchanged)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise GameFileError(str(p), "file", str(e)) from None
    key = (str(p), st.st_mtime_ns, st.st_size)
    with _cache_lock:
        game = _games.get(key)
        if game is not None:
            _games.move_to_end(key)
            return game
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GameFileError(str(p), "file", f"not a JSON game file: {e}") from None
    if not isinstance(data, dict):
        raise GameFileError(str(p), "file", "not a JSON object")
    game = NativeGame(data, str(p))
    with _cache_lock:
        _games[key] = game
        while len(_games) > _MAX_GAMES:
            _games.popitem(last=False)
    return game


class FactList(Sequence):
    """``infos["facts"]``: the fact view with shown names, built when first read."""

    def __init__(self, env: NativeEnv) -> None:
        self._env = env
        self._items: list[Fact] | None = None
        self._version = env._version

    def _list(self) -> list[Fact]:
        if self._items is None:
            self._items = self._env._facts_now()
        return self._items

    def __getitem__(self, i: Any) -> Any:
        return self._list()[i]

    def __len__(self) -> int:
        return len(self._list())

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._list())


class NativeEnv:
    """Plays games with the reference engine's interface (see the module doc)."""

    def __init__(self) -> None:
        self.game: NativeGame | None = None
        self._version = 0

    def load(self, path: str | os.PathLike[str]) -> None:
        self.game = load_game(path)
        self.state: ground.State | None = None

    def load_data(self, data: dict[str, Any], name: str) -> None:
        """Play a game given as its parsed JSON (not kept in the per-process cache); ``name``
        stands for its file in messages."""
        self.game = NativeGame(data, name)
        self.state = None

    # -- play ----------------------------------------------------------------------------------

    def reset(self) -> tuple[str, dict[str, Any]]:
        game = self._game()
        self.state = ground.State(set(game.init_atoms), game.masks)
        self.view = FactView(game.world.types, game.rank)
        self.view.copy_from(game.view_init)
        self._by_pred: dict[str, list[tuple[str, ...]]] = {}
        self._version += 1
        obs = game.deriver.derive(game.intro, self.view, {}, {})
        self._refresh()
        return obs, self.infos()

    def step(self, command: str) -> tuple[str, int, bool, dict[str, Any]]:
        game = self._game()
        if self.state is None:
            raise RuntimeError("call reset() first")
        command = command.strip()
        try:
            at = self.valid_commands.index(command)
        except ValueError:
            obs = NOTHING_HAPPENS
        else:
            op = self._ops[at]
            self._apply(op)
            obs = game.deriver.derive(
                game.text[op.action].feedback, self.view, *self._context(op)
            )
        self._refresh()
        won = self.won
        return obs, 1 if won else 0, won, self.infos()

    def infos(self) -> dict[str, Any]:
        return {
            "admissible_commands": self.admissible_commands,
            "won": self.won,
            "facts": FactList(self),
        }

    # -- internals -----------------------------------------------------------------------------

    def _game(self) -> NativeGame:
        if self.game is None:
            raise RuntimeError("load a game first")
        return self.game

    def _context(self, op: ground.Operator) -> tuple[dict[str, Any], dict[Any, Any]]:
        """The operator's variables (name -> entity) and mapping (placeholder -> variable), as
        the reference builds them from the action's parameters."""
        game = self._game()
        schema = game.schemas[op.action]
        variables: dict[str, Any] = {}
        mapping: dict[Any, Any] = {}
        for (pname, ptype), obj in zip(schema.params, op.args, strict=True):
            key = (pname.lstrip("?"), ptype)
            mapping[key] = (obj, ptype)
            variables[key[0]] = game.entities[obj]
        return variables, mapping

    def _apply(self, op: ground.Operator) -> None:
        state, view = self.state, self.view
        assert state is not None
        atoms = state.atoms
        fired = [
            (atom, post)
            for atom, post, cond in op.entries
            if all((a in atoms) == v for a, v in cond)
        ]
        for atom, post in fired:
            if post:
                state.add(atom)
            else:
                state.remove(atom)
        by_pred = self._by_pred
        for atom, post, _ in op.entries:
            pred, args = atom[0], tuple(atom[1:])
            by_pred.pop(pred, None)
            by_pred.pop("not_" + pred, None)
            if post:
                view.discard("not_" + pred, args)
                view.add(pred, args)
            else:
                view.discard(pred, args)
                view.add("not_" + pred, args)
        self._version += 1

    def _refresh(self) -> None:
        """The operators that apply now, their commands, and the goal."""
        game = self._game()
        state = self.state
        assert state is not None
        world = game.world
        ops: dict[tuple[str, tuple[int, ...]], ground.Operator] = {}
        cache = game.op_cache
        for action in game.actions:
            name = action.schema.name
            for conj in action.alternatives:
                for binding in ground.solutions(conj, state, world):
                    key = (id(conj), binding)
                    op = cache.get(key, _MISSING)
                    if op is _MISSING:
                        op = self._operator(action, conj, binding)
                        cache[key] = op
                    if op is None:
                        continue  # a no-op: the translator drops it
                    if (name, op.args) not in ops:
                        ops[(name, op.args)] = op
        ordered = sorted(ops.values(), key=_name)
        commands = [op.command or self._command(op) for op in ordered]
        self._ops = ordered
        self.valid_commands = commands
        self.admissible_commands = sorted(set(commands))
        self.won = any(ground.holds_any(conj, state, world) for conj in game.goal)

    def _operator(
        self, action: ground.CompiledAction, conj: ground.Conjunction, binding: tuple[int, ...]
    ) -> ground.Operator | None:
        """The operator of a binding (None for a no-op); effects depend on static facts only,
        so operators are made once per game."""
        game = self._game()
        state = self.state
        assert state is not None
        entries = ground.ground_effects(action, conj, binding, state.atoms, game.world, game.model)
        if entries is None:
            return None
        name = action.schema.name
        ext = tuple(binding[: len(action.schema.params)])
        op_name = "(" + " ".join([name, *(game.world.names[i] for i in ext)]) + ")"
        return ground.Operator(op_name, name, ext, entries)

    def _command(self, op: ground.Operator) -> str:
        game = self._game()
        variables, mapping = self._context(op)
        text = game.deriver.derive(game.text[op.action].template, self.view, variables, mapping)
        if "{" in text or "}" in text:
            text = text.format(**game.id_to_name)
        if text and game.static_template[op.action]:
            op.command = text  # operators are made once per game: so is their command
        return text

    def _facts_now(self) -> list[Fact]:
        game = self._game()
        shown, types = game.shown, game.world.types
        return [
            Fact(pred, tuple(Arg(shown[a], types[a]) for a in args)) for pred, args in self.view
        ]

    def world_facts(self, predicates: frozenset[str]) -> tuple[tuple[str, ...], ...]:
        """The view's facts of ``predicates`` as sorted ``(predicate, name, ...)`` tuples (what
        :func:`gagpo.envs.alfworld.state.world_facts` computes from ``facts``, without building
        them)."""
        game = self._game()
        shown = game.shown
        by_pred = self._by_pred  # pred -> its facts sorted, kept until a step writes pred
        out: list[tuple[str, ...]] = []
        for pred in sorted({pred for pred, _ in self.view.by_sig if pred in predicates}):
            facts = by_pred.get(pred)
            if facts is None:
                facts = by_pred[pred] = sorted(
                    (pred, *(shown[a] for a in args))
                    for (p, _), bucket in self.view.by_sig.items()
                    if p == pred
                    for args in bucket
                )
            out += facts
        return tuple(out)


_MISSING = object()


def _name(op: ground.Operator) -> str:
    return op.name


__all__ = [
    "DerivationError",
    "Fact",
    "GameFileError",
    "NativeEnv",
    "NativeGame",
    "load_game",
]
