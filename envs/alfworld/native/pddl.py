"""PDDL domain and problem, read as fast-downward's translator reads them.

What the reference does with the text decides what the game is, so the reading follows it:

- tokens are split on parentheses and white space, ``;`` starts a comment, every token is
  lower-cased (object ids, predicate, action and parameter names alike) and text outside comments
  must be ASCII;
- a typed list ``a b - t c`` gives ``a`` and ``b`` type ``t`` and ``c`` type ``object``; a type
  is whatever token follows ``-``, so ``?l - location,`` declares type ``location,``, which no
  object has (ALFWorld's ``examineObject`` carries that typo: its first alternative can never
  hold);
- conditions are read into negation normal form (``imply`` becomes ``or``);
- ``(= ...)`` numeric assignments of the initial state are no facts; ``(increase (total-cost)
  ...)`` effects change no fact.

Formulas are tuples: ``("and", parts)``, ``("or", parts)``, ``("exists", params, body)``,
``("forall", params, body)`` and literals ``("lit", positive, predicate, args)`` where ``args``
are variable names (``?x``) or object names and the predicate ``=`` is equality.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gagpo.envs.alfworld.native.errors import GameFileError

Formula = tuple[Any, ...]
Params = tuple[tuple[str, str], ...]  # ((name, type), ...)


@dataclass(frozen=True)
class Effect:
    """One simple effect: under ``condition`` (literals), make ``pred(args)`` ``positive``."""

    condition: tuple[Formula, ...]
    positive: bool
    pred: str
    args: tuple[str, ...]


@dataclass
class ActionSchema:
    name: str
    params: Params
    precondition: Formula
    effects: list[Effect]


@dataclass
class Domain:
    name: str
    types: list[tuple[str, str | None]]  # (type, parent) in declaration order, "object" first
    predicates: dict[str, int]
    constants: list[tuple[str, str]]
    actions: list[ActionSchema]


@dataclass
class Problem:
    name: str
    domain: str
    objects: list[tuple[str, str]]
    init: list[tuple[str, tuple[str, ...]]]
    goal: Formula
    extra: dict[str, Any] = field(default_factory=dict)


class _Reader:
    """Raises GameFileError for the part being read."""

    def __init__(self, path: str, part: str) -> None:
        self.path = path
        self.part = part

    def fail(self, detail: str) -> GameFileError:
        return GameFileError(self.path, self.part, detail)

    # -- s-expressions -------------------------------------------------------------------------

    def tokens(self, text: str) -> Iterator[str]:
        for number, line in enumerate(text.split("\n"), 1):
            line = line.split(";", 1)[0]
            if not line.isascii():
                raise self.fail(f"line {number}: a character outside ASCII outside a comment")
            line = line.replace("(", " ( ").replace(")", " ) ").replace("?", " ?")
            for token in line.split():
                yield token.lower()

    def nested(self, text: str) -> list[Any]:
        tokens = self.tokens(text)
        first = next(tokens, None)
        if first != "(":
            raise self.fail(f"expected '(' at the start, got {first!r}")
        stack: list[list[Any]] = [[]]
        for token in tokens:
            if token == "(":
                stack.append([])
            elif token == ")":
                done = stack.pop()
                if not stack:
                    rest = next(tokens, None)
                    if rest is not None:
                        raise self.fail(f"unexpected {rest!r} after the closing ')'")
                    return done
                stack[-1].append(done)
            else:
                stack[-1].append(token)
        raise self.fail("missing ')'")

    # -- pieces --------------------------------------------------------------------------------

    def typed_list(self, items: list[Any], variables: bool = False) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if any(not isinstance(i, str) for i in items):
            raise self.fail(f"a typed list holds a list: {_show(items)}")
        start, end = 0, len(items)
        while start < end:
            try:
                at = items.index("-", start)
            except ValueError:
                names, kind, start = items[start:], "object", end
            else:
                if at + 1 >= end:
                    raise self.fail(f"a typed list ends with '-': {_show(items)}")
                names, kind, start = items[start:at], items[at + 1], at + 2
            for name in names:
                if variables and not name.startswith("?"):
                    raise self.fail(f"expected a variable, got {name!r}")
                out.append((name, kind))
        return out

    def condition(self, expr: Any, predicates: dict[str, int], negated: bool = False) -> Formula:
        if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
            raise self.fail(f"not a condition: {_show(expr)}")
        tag = expr[0]
        if tag in ("and", "or", "imply", "not"):
            args = expr[1:]
            if tag == "not":
                if len(args) != 1:
                    raise self.fail(f"'not' takes one condition: {_show(expr)}")
                return self.condition(args[0], predicates, not negated)
            if tag == "imply":
                if len(args) != 2:
                    raise self.fail(f"'imply' takes two conditions: {_show(expr)}")
                parts = [
                    self.condition(args[0], predicates, not negated),
                    self.condition(args[1], predicates, negated),
                ]
                tag = "or"
            else:
                parts = [self.condition(a, predicates, negated) for a in args]
            conj = (tag == "and") != negated
            return ("and" if conj else "or", tuple(parts))
        if tag in ("exists", "forall"):
            if len(expr) != 3 or not isinstance(expr[1], list):
                raise self.fail(f"'{tag}' takes a parameter list and one condition: {_show(expr)}")
            params = tuple(self.typed_list(expr[1], variables=True))
            body = self.condition(expr[2], predicates, negated)
            universal = (tag == "forall") != negated
            return ("forall" if universal else "exists", params, body)
        return self.literal(expr, predicates, negated)

    def literal(self, expr: list[Any], predicates: dict[str, int], negated: bool) -> Formula:
        if expr[0] == "not" and len(expr) == 2 and isinstance(expr[1], list):
            return self.literal(expr[1], predicates, not negated)
        pred, args = expr[0], expr[1:]
        if not isinstance(pred, str) or any(not isinstance(a, str) for a in args):
            raise self.fail(f"not a literal: {_show(expr)}")
        if pred == "=":
            if len(args) != 2:
                raise self.fail(f"'=' takes two terms: {_show(expr)}")
        elif pred not in predicates:
            raise self.fail(f"undeclared predicate {pred!r} in {_show(expr)}")
        elif predicates[pred] != len(args):
            raise self.fail(f"predicate used with the wrong arity: {_show(expr)}")
        return ("lit", not negated, pred, tuple(args))

    def effects(
        self, expr: Any, predicates: dict[str, int], out: list[Effect], cond: tuple = ()
    ) -> None:
        if not isinstance(expr, list) or not expr:
            if expr == []:
                return
            raise self.fail(f"not an effect: {_show(expr)}")
        tag = expr[0]
        if tag == "and":
            for part in expr[1:]:
                self.effects(part, predicates, out, cond)
        elif tag == "when":
            if len(expr) != 3:
                raise self.fail(f"'when' takes a condition and an effect: {_show(expr)}")
            if cond:
                raise self.fail(f"nested 'when' is not supported: {_show(expr)}")
            condition = self.condition(expr[1], predicates)
            literals = _conjunction_literals(condition)
            if literals is None:
                raise self.fail(
                    f"only conjunctions of literals are supported as effect conditions: "
                    f"{_show(expr[1])}"
                )
            self.effects(expr[2], predicates, out, tuple(literals))
        elif tag in ("increase", "decrease", "assign", "scale-up", "scale-down"):
            return  # action costs: no fact changes
        elif tag == "forall":
            raise self.fail(f"universal effects are not supported: {_show(expr)}")
        else:
            lit = self.literal(expr, predicates, False)
            if lit[2] == "=":
                raise self.fail(f"an effect cannot change equality: {_show(expr)}")
            out.append(Effect(cond, lit[1], lit[2], lit[3]))


def _conjunction_literals(formula: Formula) -> list[Formula] | None:
    if formula[0] == "lit":
        return [formula]
    if formula[0] == "and":
        out: list[Formula] = []
        for part in formula[1]:
            sub = _conjunction_literals(part)
            if sub is None:
                return None
            out += sub
        return out
    return None


def _show(expr: Any, limit: int = 160) -> str:
    def text(e: Any) -> str:
        return "(" + " ".join(text(x) for x in e) + ")" if isinstance(e, list) else str(e)

    out = text(expr)
    return out if len(out) <= limit else out[: limit - 3] + "..."


_domains: dict[str, Domain] = {}


def parse_domain(text: str, path: str = "<domain>") -> Domain:
    """The domain of a game file's ``pddl_domain`` (games share theirs: each text is read once
    per process; the result is never changed)."""
    if text not in _domains:
        if len(_domains) > 32:
            _domains.clear()
        _domains[text] = _parse_domain(text, path)
    return _domains[text]


def _parse_domain(text: str, path: str) -> Domain:
    r = _Reader(path, "pddl_domain")
    tree = r.nested(text)
    if len(tree) < 2 or tree[0] != "define" or not isinstance(tree[1], list):
        raise r.fail("expected (define (domain NAME) ...)")
    if tree[1][:1] != ["domain"] or len(tree[1]) != 2:
        raise r.fail(f"expected (domain NAME), got {_show(tree[1])}")
    types: list[tuple[str, str | None]] = [("object", None)]
    predicates: dict[str, int] = {}
    constants: list[tuple[str, str]] = []
    raw_actions: list[list[Any]] = []
    for section in tree[2:]:
        if not isinstance(section, list) or not section or not isinstance(section[0], str):
            raise r.fail(f"not a domain section: {_show(section)}")
        tag = section[0]
        if tag == ":requirements" or tag == ":functions":
            continue
        if tag == ":types":
            seen = {t for t, _ in types}
            for name, parent in r.typed_list(section[1:]):
                if name not in seen:  # "object" is the root already
                    types.append((name, parent))
                    seen.add(name)
        elif tag == ":constants":
            constants += r.typed_list(section[1:])
        elif tag == ":predicates":
            for pred in section[1:]:
                if not isinstance(pred, list) or not pred or not isinstance(pred[0], str):
                    raise r.fail(f"not a predicate declaration: {_show(pred)}")
                predicates[pred[0]] = len(r.typed_list(pred[1:], variables=True))
        elif tag == ":action":
            raw_actions.append(section)
        elif tag == ":derived":
            raise r.fail("derived predicates (:derived) are not supported")
        else:
            raise r.fail(f"unknown domain section {tag!r}")
    actions = []
    for section in raw_actions:
        r.part = f"pddl_domain action {section[1] if len(section) > 1 else '?'!s}"
        action = _action(r, section, predicates)
        if action is not None:
            actions.append(action)
    return Domain(tree[1][1], types, predicates, constants, actions)


def _action(r: _Reader, section: list[Any], predicates: dict[str, int]) -> ActionSchema | None:
    items = iter(section[1:])
    name = next(items, None)
    if not isinstance(name, str):
        raise r.fail("an action without a name")
    tag = next(items, None)
    params: list[tuple[str, str]] = []
    if tag == ":parameters":
        plist = next(items, None)
        if not isinstance(plist, list):
            raise r.fail("':parameters' needs a list")
        params = r.typed_list(plist, variables=True)
        tag = next(items, None)
    precondition: Formula = ("and", ())
    if tag == ":precondition":
        pre = next(items, None)
        if pre:
            precondition = r.condition(pre, predicates)
        elif pre != []:
            raise r.fail("':precondition' needs a condition")
        tag = next(items, None)
    if tag != ":effect":
        raise r.fail(f"expected ':effect', got {tag!r}")
    effects: list[Effect] = []
    r.effects(next(items, []), predicates, effects)
    rest = next(items, None)
    if rest is not None:
        raise r.fail(f"unexpected {_show(rest)} after the effect")
    if not effects:
        return None  # the translator drops actions without effects
    return ActionSchema(name, tuple(params), precondition, effects)


def parse_problem(text: str, domain: Domain, path: str = "<problem>") -> Problem:
    """The problem of a game file's ``pddl_problem``, checked against its domain."""
    r = _Reader(path, "pddl_problem")
    tree = r.nested(text)
    if len(tree) < 3 or tree[0] != "define" or not isinstance(tree[1], list):
        raise r.fail("expected (define (problem NAME) (:domain NAME) ...)")
    if tree[1][:1] != ["problem"] or len(tree[1]) != 2:
        raise r.fail(f"expected (problem NAME), got {_show(tree[1])}")
    if not isinstance(tree[2], list) or tree[2][:1] != [":domain"] or len(tree[2]) != 2:
        raise r.fail(f"expected (:domain NAME), got {_show(tree[2])}")
    if tree[2][1] != domain.name:
        raise r.fail(f"the problem is for domain {tree[2][1]!r}, the game's is {domain.name!r}")
    objects: list[tuple[str, str]] = []
    init: list[tuple[str, tuple[str, ...]]] = []
    goal: Formula | None = None
    for section in tree[3:]:
        if not isinstance(section, list) or not section:
            raise r.fail(f"not a problem section: {_show(section)}")
        tag = section[0]
        if tag == ":requirements" or tag == ":metric":
            continue
        if tag == ":objects":
            objects += r.typed_list(section[1:])
        elif tag == ":init":
            for fact in section[1:]:
                if not isinstance(fact, list) or not fact:
                    raise r.fail(f"not an initial fact: {_show(fact)}")
                if fact[0] == "=":
                    continue  # numeric fluents (costs, distances): not facts
                lit = r.literal(fact, domain.predicates, False)
                if not lit[1]:
                    continue  # (not p) in the initial state only restates the closed world
                init.append((lit[2], lit[3]))
        elif tag == ":goal":
            if len(section) != 2:
                raise r.fail("':goal' takes one condition")
            goal = r.condition(section[1], domain.predicates)
        else:
            raise r.fail(f"unknown problem section {tag!r}")
    if goal is None:
        raise r.fail("no ':goal'")
    names = [n for n, _ in domain.constants + objects]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise r.fail(f"objects declared twice: {dup[:5]}")
    known = set(names)
    for pred, args in init:
        for a in args:
            if a not in known:
                raise r.fail(f"initial fact ({pred} {' '.join(args)}) names undeclared {a!r}")
    return Problem(tree[1][1], tree[2][1], objects, init, goal)
