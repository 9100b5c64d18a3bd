"""Extracting the action from a ReAct reply, and judging it.

A reply is *well-formed* when it is exactly one ``<think>...</think>`` block followed by one
``<action>...</action>`` block with a non-empty action, and nothing but whitespace around them.
The parser is lenient about what it *extracts* and strict about what it calls well-formed, and
it reports the two separately from *admissible* (the action is one the environment offers now):

- Tags match case-insensitively and may carry a little whitespace (``< Action >``, ``</ think>``).
- Text inside a think block is free text: tags there are ignored, so a reply cannot smuggle an
  action in through its reasoning, and an ``<action>`` quoted in the reasoning does not count.
- A ``</think>`` before any other tag (some chat templates open the block in the prompt) closes a
  block that began at the start of the reply. An unclosed ``<think>`` ends at the next
  ``<action>`` tag. Either way the reply is not well-formed.
- With several action blocks, the FIRST one is the action (as the reference implementations
  do: what a model writes after its answer is not the answer) and the reply is not well-formed.
  An unclosed ``<action>`` runs to the end of the reply (extracted, not well-formed).
- The action's whitespace is collapsed; it matches an admissible action case-insensitively and
  then takes that action's spelling. A template such as WebShop's ``search[<query>]`` admits any
  non-empty text in place of its ``<placeholder>``.
- Near misses (``click[buy]`` for ``click[buy now]``, a bare ``buy now``) are mapped to an
  admissible action only when asked (``map_near_miss=True``); ``mapped_from`` then keeps what
  the model wrote.

Everything runs in time linear in the reply's length: tags are found with one bounded regex
scan, no pattern can backtrack over unbounded input, and fuzzy matching is skipped for texts far
longer than any admissible action.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

# Bounded whitespace inside a tag keeps the scan linear on adversarial input ("<" + 1 MB of
# spaces): an unbounded ``\s*`` pair would backtrack quadratically at every "<".
_TAG = re.compile(r"<\s{0,8}(/?)\s{0,8}(think|action)\s{0,8}>", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"<[^<>\[\]]{1,40}>")
# Texts longer than this many times the longest admissible action are not near misses.
_NEAR_MISS_LENGTH_FACTOR = 3
_QUOTES = "\"'`"
# A well-formed reply with no other tag-like text; bounded so it cannot get slow.
_SIMPLE = re.compile(r"\s*<think>[^<]*</think>\s*<action>([^<]*)</action>\s*")
_SIMPLE_MAX_CHARS = 20_000


class ParsedAction(NamedTuple):
    """What :func:`parse_reply` found in a reply (a named tuple: cheap, once per env step)."""

    action: str | None
    """The action to send: the admissible spelling when it matches one, else the extracted
    text (whitespace collapsed); None when the reply holds no action."""
    well_formed: bool
    """``<think>...</think><action>...</action>``, each once, a non-empty action, nothing else."""
    admissible: bool
    """Whether ``action`` is one of the admissible actions (or fills an admissible template)."""
    mapped_from: str | None = None
    """The text the model wrote, when a near miss was mapped to ``action``; else None."""


@dataclass(frozen=True)
class _Span:
    start: int  # first character of the content
    end: int  # one past the content's last character
    closed: bool


def _tags(text: str) -> list[tuple[int, int, bool, str]]:
    """(start, end, is_closing, name) of every think/action tag, in order."""
    return [
        (m.start(), m.end(), m.group(1) == "/", m.group(2).lower()) for m in _TAG.finditer(text)
    ]


def _split(text: str) -> tuple[list[_Span], list[_Span], list[tuple[int, int]], bool]:
    """Think blocks, action blocks (outside think), the character ranges they cover (tags
    included), and whether a structural fault was seen (stray or unclosed tags)."""
    tags = _tags(text)
    n = len(tags)
    # next_close_think[k] / next_open_action[k]: index of the first such tag at or after k
    # (n if none). Precomputed so that every lookup is O(1) and the walk stays linear.
    next_close_think = [n] * (n + 1)
    next_open_action = [n] * (n + 1)
    for k in range(n - 1, -1, -1):
        _, _, closing, name = tags[k]
        next_close_think[k] = k if (name == "think" and closing) else next_close_think[k + 1]
        next_open_action[k] = k if (name == "action" and not closing) else next_open_action[k + 1]
    thinks: list[_Span] = []
    actions: list[_Span] = []
    covered: list[tuple[int, int]] = []
    fault = False
    i = 0
    # A "</think>" before any other tag: the block began at the start of the reply.
    if n and tags[0][3] == "think" and tags[0][2]:
        thinks.append(_Span(0, tags[0][0], closed=True))
        covered.append((0, tags[0][1]))
        fault = True
        i = 1
    while i < n:
        start, end, closing, name = tags[i]
        if closing:  # a stray closing tag outside any block
            fault = True
            covered.append((start, end))
            i += 1
        elif name == "think":
            j = next_close_think[i + 1]
            if j < n:
                thinks.append(_Span(end, tags[j][0], closed=True))
                covered.append((start, tags[j][1]))
                i = j + 1
            else:  # unclosed: the block ends at the next <action>, else at the end
                fault = True
                j = next_open_action[i + 1]
                stop = tags[j][0] if j < n else len(text)
                thinks.append(_Span(end, stop, closed=False))
                covered.append((start, stop))
                i = j
        else:  # an <action>: its content runs to the next tag, which should be </action>
            j = i + 1
            if j < n and tags[j][3] == "action" and tags[j][2]:
                actions.append(_Span(end, tags[j][0], closed=True))
                covered.append((start, tags[j][1]))
                i = j + 1
            else:
                fault = True
                stop = tags[j][0] if j < n else len(text)
                actions.append(_Span(end, stop, closed=False))
                covered.append((start, stop))
                i = j
    return thinks, actions, covered, fault


def _outside(text: str, covered: list[tuple[int, int]]) -> str:
    """The text not covered by any block."""
    parts, pos = [], 0
    for start, end in covered:
        parts.append(text[pos:start])
        pos = max(pos, end)
    parts.append(text[pos:])
    return "".join(parts)


def normalize(action: str) -> str:
    """Whitespace collapsed and stripped (case kept)."""
    # str.split() splits on exactly the characters that re's \s matches in str patterns.
    return " ".join(action.split())


def _template_parts(template: str) -> tuple[str, str] | None:
    """``("search[", "]")`` for ``"search[<query>]"``; None for a concrete action."""
    m = _PLACEHOLDER.search(template)
    if m is None:
        return None
    return template[: m.start()], template[m.end():]


def fills_template(action: str, template: str) -> bool:
    """Whether ``action`` is ``template`` with its placeholder replaced by non-empty text."""
    parts = _template_parts(template)
    return parts is not None and _fills(action, *parts)


def _fills(action: str, prefix: str, suffix: str) -> bool:
    low = action.lower()
    if not (low.startswith(prefix.lower()) and low.endswith(suffix.lower())):
        return False
    if len(action) < len(prefix) + len(suffix):
        return False
    filler = action[len(prefix): len(action) - len(suffix)].strip()
    # The model copying the placeholder itself ("search[<query>]") fills nothing.
    return bool(filler) and _PLACEHOLDER.fullmatch(filler) is None


@lru_cache(maxsize=4096)
def _admissible_index(
    admissible_actions: tuple[str, ...],
) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """The concrete actions keyed by their normalised lower-case text (the first spelling of
    each), and the templates' (prefix, suffix), in order. Cached: an episode's pages repeat
    their action lists, and a rollout parses one reply per env step."""
    concrete: dict[str, str] = {}
    templates: list[tuple[str, str]] = []
    for candidate in admissible_actions:
        parts = _template_parts(candidate)
        if parts is None:
            concrete.setdefault(normalize(candidate).lower(), candidate)
        else:
            templates.append(parts)
    return concrete, tuple(templates)


def match_admissible(action: str, admissible_actions: Sequence[str]) -> str | None:
    """The admissible spelling of ``action`` (case and whitespace aside), or ``action`` itself
    when it fills an admissible template; None when it matches nothing."""
    concrete, templates = _admissible_index(tuple(admissible_actions))
    found = concrete.get(normalize(action).lower())
    if found is not None:
        return found
    for prefix, suffix in templates:
        if _fills(action, prefix, suffix):
            filler = normalize(action[len(prefix): len(action) - len(suffix)])
            return f"{prefix}{filler}{suffix}"
    return None


def nearest_admissible(
    text: str, admissible_actions: Sequence[str], *, cutoff: float = 80.0
) -> str | None:
    """The admissible action closest to ``text``, if close enough; None otherwise.

    A template ``verb[<x>]`` takes ``verb <anything>`` or ``verb[anything`` (its filler being
    the rest). Then a concrete action written whole inside the text wins (the longest one).
    Then concrete actions are compared by rapidfuzz's ratio, both whole and by the text inside
    their brackets (so a bare ``buy now`` finds ``click[buy now]``).
    """
    from rapidfuzz import fuzz, process

    text = normalize(text).strip(_QUOTES).strip()
    if not text or not admissible_actions:
        return None
    longest = max(len(a) for a in admissible_actions)
    templates = [a for a in admissible_actions if _template_parts(a) is not None]
    concrete = [a for a in admissible_actions if _template_parts(a) is None]
    low = text.lower()
    for template in templates:
        prefix, suffix = _template_parts(template)  # type: ignore[misc]
        verb = prefix.rstrip("[( :").lower()
        if verb and low.startswith(verb):
            filler = text[len(verb):].strip(" :[](){}" + _QUOTES)
            if filler and _PLACEHOLDER.fullmatch(filler) is None:
                return f"{prefix}{normalize(filler)}{suffix}"
    if not concrete or len(text) > _NEAR_MISS_LENGTH_FACTOR * longest + 10:
        return None
    # An admissible action written whole inside the text ("I will open fridge 1"): the
    # longest one, so that "go to shelf 12" wins over "go to shelf 1".
    contained = [
        a for a in concrete
        if re.search(rf"(?<!\w){re.escape(a.lower())}(?!\w)", low) is not None
    ]
    if contained:
        return max(contained, key=len)
    keys: list[str] = []
    owners: list[str] = []
    for action in concrete:
        keys.append(action.lower())
        owners.append(action)
        inner = re.fullmatch(r"[^\[\]]{1,40}\[(.*)\]", action)
        if inner and inner.group(1).strip():
            keys.append(inner.group(1).lower())
            owners.append(action)
    best = process.extractOne(low, keys, scorer=fuzz.ratio, score_cutoff=cutoff)
    return owners[best[2]] if best is not None else None


def parse_reply(
    text: str,
    admissible_actions: Sequence[str] = (),
    *,
    map_near_miss: bool = False,
    near_miss_cutoff: float = 80.0,
) -> ParsedAction:
    """Extract and judge the action of one reply (see the module docstring for the rules)."""
    text = text if isinstance(text, str) else str(text)
    # Fast path for the common case, a plain well-formed reply naming an admissible action
    # exactly: the same answer as the full walk below, in a fraction of its time.
    simple = _SIMPLE.fullmatch(text) if len(text) < _SIMPLE_MAX_CHARS else None
    if simple is not None:
        action = normalize(simple.group(1))
        if action and action in admissible_actions:
            return ParsedAction(action, True, True)
        matched = match_admissible(action, admissible_actions) if action else None
        if matched is not None:
            return ParsedAction(matched, True, True)
        if action and not map_near_miss:
            return ParsedAction(action, True, False)
    thinks, actions, covered, fault = _split(text)
    action = normalize(text[actions[0].start: actions[0].end]) if actions else ""
    outside = _outside(text, covered)
    well_formed = (
        not fault
        and len(thinks) == 1
        and len(actions) == 1
        and thinks[0].closed
        and actions[0].closed
        and thinks[0].end <= actions[0].start
        and bool(action)
        and not outside.strip()
    )
    if action:
        matched = match_admissible(action, admissible_actions)
        if matched is not None:
            return ParsedAction(matched, well_formed, True)
    if map_near_miss:
        # Without an action block, what the model wrote outside its reasoning is the candidate.
        written = action or normalize(outside)
        mapped = (
            nearest_admissible(written, admissible_actions, cutoff=near_miss_cutoff)
            if written
            else None
        )
        if mapped is not None:
            return ParsedAction(mapped, well_formed, True, mapped_from=written)
    return ParsedAction(action or None, well_formed, False)


def fill_template(action: str, filler: str) -> str:
    """``action`` with its ``<placeholder>`` replaced by ``filler``; concrete actions unchanged.

    >>> fill_template("search[<query>]", "red shoes")
    'search[red shoes]'
    """
    parts = _template_parts(action)
    if parts is None:
        return action
    return f"{parts[0]}{normalize(filler)}{parts[1]}"


def is_template(action: str) -> bool:
    """Whether ``action`` holds a ``<placeholder>`` (such as WebShop's ``search[<query>]``)."""
    return _template_parts(action) is not None
