"""A game's ``grammar`` field: the text rules and, per action, its command template and feedback.

The field is TextWorld's PDDL-logic document::

    grammar :: \"\"\" {JSON: rule name -> [{"rhs": ..., "condition": ..., "weight": ...}]} \"\"\";
    action GotoLocation {
        template :: "go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]";
        feedback :: "#GotoLocation.feedback#";
        grammar :: \"\"\" {more rules} \"\"\";
    }

Blank space and ``#`` comments separate tokens; a ``\"\"\"`` block is dedented and read as JSON
(inside an action's block, lines starting with ``#`` are dropped first). Rules of later blocks
replace earlier ones of the same name; actions are keyed by their lower-cased name (the
translator lower-cases operator names). Every right-hand side, template and feedback name is
parsed once here (:mod:`csg`), every rule condition too, so that play never parses.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass

from gagpo.envs.alfworld.native.csg import (
    GrammarError,
    Predicate,
    Symbol,
    parse_query,
    parse_symbols,
)
from gagpo.envs.alfworld.native.errors import GameFileError


@dataclass(frozen=True)
class Rule:
    """One production: its right-hand side applies when ``condition`` has a match."""

    condition: tuple[Predicate, ...] | None
    rhs: tuple[Symbol, ...]
    condition_text: str


@dataclass(frozen=True)
class ActionText:
    template: tuple[Symbol, ...]
    feedback: tuple[Symbol, ...]
    template_text: str


@dataclass
class Grammar:
    rules: dict[str, tuple[Rule, ...]]
    actions: dict[str, ActionText]


_TOKEN = re.compile(
    r'(?P<block>"""(?:.|\n)*?""")|(?P<str>"[^"]*")|(?P<name>[\w/-]+)|(?P<punct>::|[;{}])'
)
_SKIP = re.compile(r"(?:\s+|#[^\n]*)+")


def _tokens(text: str, fail: callable) -> list[tuple[str, str, int]]:  # (kind, text, offset)
    out = []
    pos = 0
    while True:
        m = _SKIP.match(text, pos)
        if m:
            pos = m.end()
        if pos >= len(text):
            return out
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise fail(f"line {line}: unexpected {text[pos:pos + 30]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(), pos))  # the line is counted only for an error
        pos = m.end()


def parse_grammar(text: str, path: str = "<grammar>") -> Grammar:
    """Read a game's ``grammar`` field (see the module doc); errors name the file and part."""

    def fail(detail: str, part: str = "grammar") -> GameFileError:
        return GameFileError(path, part, detail)

    tokens = _tokens(text, fail)
    at = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal at
        if at >= len(tokens):
            raise fail(f"expected {value or kind} at the end")
        k, v, pos = tokens[at]
        if k != kind or (value is not None and v != value):
            line = text.count("\n", 0, pos) + 1
            raise fail(f"line {line}: expected {value or kind}, got {v[:30]!r}")
        at += 1
        return v

    def block_json(code: str, part: str, drop_comments: bool) -> dict:
        body = textwrap.dedent(code[3:-3])
        if drop_comments:
            body = "\n".join(ln for ln in body.split("\n") if not ln.lstrip().startswith("#"))
        try:
            data = json.loads(body)
        except json.JSONDecodeError as e:
            raise fail(f"not JSON: {e}", part) from None
        if not isinstance(data, dict):
            raise fail("the rules must be a JSON object", part)
        return data

    raw_rules: dict[str, object] = {}
    raw_actions: dict[str, tuple[str, str]] = {}
    while at < len(tokens):
        word = take("name")
        if word == "grammar":
            take("punct", "::")
            code = take("block")
            take("punct", ";")
            raw_rules.update(block_json(code, "grammar block", False))
        elif word == "action":
            name = take("name")
            take("punct", "{")
            parts: dict[str, str] = {}
            while at < len(tokens) and tokens[at][1] != "}":
                key = take("name")
                if key not in ("template", "feedback", "pddl", "grammar"):
                    raise fail(f"unknown part {key!r} of action {name}")
                if key in parts:
                    raise fail(f"action {name} has two '{key}' parts")
                take("punct", "::")
                parts[key] = take("block" if key in ("pddl", "grammar") else "str")
                take("punct", ";")
            take("punct", "}")
            for key in ("template", "feedback"):
                if key not in parts:
                    raise fail(f"action {name} has no {key}")
            if "grammar" in parts:
                raw_rules.update(block_json(parts["grammar"], f"grammar of action {name}", True))
            raw_actions[name.lower()] = (parts["template"][1:-1], parts["feedback"][1:-1])
        else:
            raise fail(f"expected 'grammar' or 'action', got {word!r}")

    rules: dict[str, tuple[Rule, ...]] = {}
    for name, entries in raw_rules.items():
        part = f"grammar rule {name!r}"
        if not isinstance(entries, list):
            raise fail("a rule name must map to a list of productions", part)
        built = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("rhs"), str):
                raise fail(f"production {i} has no text 'rhs'", part)
            condition = entry.get("condition") or ""
            if not isinstance(condition, str):
                raise fail(f"production {i} has a condition that is not text", part)
            try:
                rhs = tuple(parse_symbols(entry["rhs"]))
                query = parse_query(condition) if condition else None
            except GrammarError as e:
                raise fail(f"production {i}: {e}", part) from None
            built.append(Rule(query, rhs, condition))
        rules[name] = tuple(built)

    actions = {}
    for name, (template, feedback) in raw_actions.items():
        try:
            actions[name] = ActionText(
                tuple(parse_symbols(template)), tuple(parse_symbols(feedback)), template
            )
        except GrammarError as e:
            raise fail(str(e), f"template or feedback of action {name}") from None
    return Grammar(rules, actions)
