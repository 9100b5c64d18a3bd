"""Text from the game's own grammar: the reset text, command texts and feedback.

A derivation starts from a list of symbols (:mod:`csg`) and a context: the variables (placeholder
name -> entity) and the mapping (placeholder -> entity) of the action being described. As in the
reference:

- ``#name#`` takes the first production of rule ``name`` whose condition has a match under the
  context's mapping (a production without condition always applies), and derives its right-hand
  side in the same context (the condition's own bindings are not kept);
- ``{expr}`` evaluates the expression with the variables; ``{x | query}`` derives ``x`` once per
  match of the query, each match adding its bindings to the context;
- ``[{...}]`` joins those derivations with ``#list_separator#`` and, before the last,
  ``#list_last_separator#``; none gives ``#list_empty#``; these are rules of the grammar too;
- a value becomes text with ``str`` (an entity shows its ``name``).
"""

from __future__ import annotations

from typing import Any

from gagpo.envs.alfworld.native.csg import (
    ENTITY_ATTRS,
    Conditional,
    Eval,
    ListOf,
    Nonterminal,
    Symbol,
    Terminal,
)
from gagpo.envs.alfworld.native.facts import (
    CompiledQuery,
    FactView,
    Key,
    Var,
    any_assignment,
    assignments,
)

_NO_GLOBALS: dict[str, Any] = {"__builtins__": {}}


class DerivationError(RuntimeError):
    """The grammar cannot derive a text here (a rule missing, or no production applies)."""


class Entity:
    """What the grammar's expressions see of an object (the reference's entity record)."""

    __slots__ = ENTITY_ATTRS

    def __init__(self, id: str, type: str, name: str) -> None:
        for slot in ENTITY_ATTRS:
            setattr(self, slot, None)
        self.id = id
        self.type = type
        self.name = name
        self.definite = "the"
        self.indefinite = "a"

    def __str__(self) -> str:
        return self.name  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Entity({self.id!r}, {self.name!r})"


class Deriver:
    """Derives texts for one game (its rules and queries compiled against its types)."""

    def __init__(
        self,
        rules: dict[str, tuple[tuple[CompiledQuery | None, tuple[Symbol, ...]], ...]],
        givens: dict[str, CompiledQuery],
        entities: list[Entity],
    ) -> None:
        self.rules = rules
        self.givens = givens
        self.entities = entities

    def derive(
        self, symbols: tuple[Symbol, ...], view: FactView, variables: dict[str, Any],
        mapping: dict[Key, Var],
    ) -> str:
        out: list[str] = []
        for sym in symbols:
            self._symbol(sym, view, variables, mapping, out)
        return "".join(out)

    def _symbol(
        self, sym: Symbol, view: FactView, variables: dict[str, Any], mapping: dict[Key, Var],
        out: list[str],
    ) -> None:
        if isinstance(sym, Terminal):
            out.append(sym.text)
        elif isinstance(sym, Nonterminal):
            self._expand(sym.name, view, variables, mapping, out)
        elif isinstance(sym, Conditional):
            for expr, v, m in self._contexts(sym, view, variables, mapping):
                self._symbol(expr, view, v, m, out)
        elif isinstance(sym, Eval):
            out.append(str(eval(sym.code, _NO_GLOBALS, variables)))  # noqa: S307 - checked AST
        elif isinstance(sym, ListOf):
            items = self._contexts(sym.item, view, variables, mapping)
            if not items:
                self._expand("list_empty", view, variables, mapping, out)
            for i, (expr, v, m) in enumerate(items):
                if i:
                    sep = "list_last_separator" if i == len(items) - 1 else "list_separator"
                    self._expand(sep, view, variables, mapping, out)
                self._symbol(expr, view, v, m, out)
        else:  # pragma: no cover
            raise TypeError(sym)

    def _contexts(
        self, sym: Conditional, view: FactView, variables: dict[str, Any],
        mapping: dict[Key, Var],
    ) -> list[tuple[Any, dict[str, Any], dict[Key, Var]]]:
        if sym.given is None:
            return [(sym.expression, variables, mapping)]
        entities = self.entities
        out = []
        for match in assignments(view, self.givens[sym.given], mapping):
            v = dict(variables)
            for (name, _), var in match.items():
                v[name] = entities[var[0]]
            out.append((sym.expression, v, match))
        return out

    def _expand(
        self, name: str, view: FactView, variables: dict[str, Any], mapping: dict[Key, Var],
        out: list[str],
    ) -> None:
        rules = self.rules.get(name)
        if not rules:
            raise DerivationError(f"no rule #{name}# in the grammar")
        for condition, rhs in rules:
            if condition is None or any_assignment(view, condition, mapping):
                for sym in rhs:
                    self._symbol(sym, view, variables, mapping, out)
                return
        raise DerivationError(f"no production of #{name}# applies")
