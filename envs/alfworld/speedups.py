"""Narrow patches that make the reference engine fast without changing its output.

Where TextWorld's PDDL backend spends its time (measured on a 29-object, 38-receptacle kitchen:
300 ms a step, 2.5 s a load + reset):

1. deep-copying the derivation context (every entity's info) for every grammar symbol;
2. re-parsing, with tatsu, the same short grammar strings (command templates, feedback rules,
   rule right-hand sides) every time it derives a text: once per admissible command per step;
3. re-parsing, with tatsu, the same conjunctive queries of the grammar's conditions;
4. running fast-downward's Python translator (PDDL -> SAS) on the same domain and problem: twice
   for every ``PddlState``, and the gym layer builds two per reset (load, then reset);
5. parsing the whole game grammar (about 40 production rules) on every load.

2-5 are pure functions of their string arguments, so each is memoised here (results that callers
mutate are deep-copied out of the cache); 1 copies the two dicts a derivation extends instead of
every value in them, which nothing mutates. Nothing else changes: the derivations, the planner, the
state updates all run as before, and ``tests/test_alfworld_engine.py`` compares transcripts
(observations, admissible commands, won) against the stock engine character for character.

The patches are process-wide module attributes, switched with :func:`enable` / :func:`disable`
(or the :func:`enabled` / :func:`disabled` context managers), and undone exactly.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

_originals: dict[str, tuple[Any, str, Any]] = {}
_caches: list[_LRU] = []


class _LRU:
    """A small least-recently-used cache (functools.lru_cache cannot deep-copy on the way out)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.hits = self.misses = 0
        _caches.append(self)

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        try:
            value = self.data[key]
        except KeyError:
            self.misses += 1
            value = compute()
            self.data[key] = value
            if len(self.data) > self.maxsize:
                self.data.popitem(last=False)
            return value
        self.hits += 1
        self.data.move_to_end(key)
        return value

    def clear(self) -> None:
        self.data.clear()
        self.hits = self.misses = 0


# Grammar snippets: a few hundred distinct strings per game set (the task text is per game).
_symbols_cache = _LRU(8192)
_query_cache = _LRU(4096)
# Translator results and parsed game logic are per game and hold the whole task: keep a few.
_translate_cache = _LRU(64)
_logic_cache = _LRU(64)


def _patch(module: Any, name: str, replacement: Any) -> None:
    key = (
        f"{module.__module__}.{module.__name__}.{name}"
        if isinstance(module, type)
        else (f"{module.__name__}.{name}")
    )
    if key not in _originals:
        # For a class, keep the raw descriptor (a classmethod), not the bound method.
        original = module.__dict__[name] if isinstance(module, type) else getattr(module, name)
        _originals[key] = (module, name, original)
    setattr(module, name, replacement)


def is_enabled() -> bool:
    return bool(_originals)


def enable() -> None:
    """Install the memoisation patches (idempotent)."""
    if _originals:
        return
    import fast_downward
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as textgen
    import textworld.logic as tw_logic

    parse_symbols = textgen._parse_and_convert

    def cached_parse_symbols(text: str, rule_name: str = "symbols", **kwargs: Any) -> Any:
        if kwargs.get("trace"):  # TW_CSG_TRACE debugging wants tatsu's trace: no cache
            return parse_symbols(text, rule_name=rule_name, **kwargs)
        # Symbols get their derivation context assigned by the caller: hand out fresh copies.
        return copy.deepcopy(
            _symbols_cache.get((text, rule_name), lambda: parse_symbols(text, rule_name=rule_name))
        )

    parse_logic = tw_logic._parse_and_convert
    rule_cls = tw_logic.Rule

    def cached_conjunctive_query(cls: type, expr: str) -> Any:
        # The predicates are immutable values; the Rule around them is built fresh, as before.
        preconditions = _query_cache.get(
            expr, lambda: parse_logic(expr, rule_name="conjunctiveQuery")
        )
        return cls("query", list(preconditions), [])

    pddl2sas = fast_downward.pddl2sas

    def cached_pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False):
        def translate() -> Any:
            argv = sys.argv[:]  # the translator overwrites sys.argv; give the process its own back
            try:
                return pddl2sas(domain, problem, verbose=verbose, optimize=optimize)
            finally:
                sys.argv[:] = argv

        if verbose:  # TW_PDDL_DEBUG wants the translator's log: no cache
            return translate()
        return _translate_cache.get((domain, problem, optimize), translate)

    parse_game_logic = pddl_logic._parse_and_convert

    def cached_parse_game_logic(text: str, rule_name: str = "pddlStart", **kwargs: Any) -> Any:
        if kwargs:
            return parse_game_logic(text, rule_name=rule_name, **kwargs)
        # GameLogic merges the parsed actions and grammar into its own containers; copy them so
        # that no two games share (or could mutate) one parse.
        return copy.deepcopy(
            _logic_cache.get((text, rule_name), lambda: parse_game_logic(text, rule_name=rule_name))
        )

    def shallow_copy_context(context: dict[str, Any]) -> dict[str, Any]:
        # The original deep-copies the variables (EntityInfo objects) and the mapping
        # (Placeholder -> Variable) for every symbol of every derivation. Derivations only add
        # keys to these dicts and read the entities (names, articles); nothing mutates an
        # EntityInfo, Placeholder or Variable while deriving, so fresh dicts over the same values
        # give the same text.
        return {
            "state": context["state"],
            "facts": context["facts"],
            "variables": dict(context["variables"]),
            "mapping": dict(context["mapping"]),
            "entity_infos": context["entity_infos"],
        }

    _patch(textgen, "_parse_and_convert", cached_parse_symbols)
    _patch(textgen, "copy_context", shallow_copy_context)
    _patch(rule_cls, "parse_conjunctive_query", classmethod(cached_conjunctive_query))
    _patch(fast_downward, "pddl2sas", cached_pddl2sas)
    _patch(pddl_logic, "_parse_and_convert", cached_parse_game_logic)


def disable() -> None:
    """Restore the engine's original functions (the caches stay: they hold pure results)."""
    for module, name, original in _originals.values():
        setattr(module, name, original)
    _originals.clear()


def clear() -> None:
    """Drop every cached result."""
    for cache in _caches:
        cache.clear()


@contextlib.contextmanager
def enabled() -> Iterator[None]:
    """Run a block with the patches on, leaving them as they were afterwards."""
    was = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was:
            disable()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run a block on the stock engine (the transcript test and the benchmark's reference)."""
    was = is_enabled()
    disable()
    try:
        yield
    finally:
        if was:
            enable()


def stats() -> dict[str, tuple[int, int]]:
    """(hits, misses) of each cache, for the benchmark."""
    names = ("symbols", "queries", "translator", "game_logic")
    return {n: (c.hits, c.misses) for n, c in zip(names, _caches, strict=True)}
