"""The purchase reward, with the original WebShop's semantics (Yao et al. 2022), quirks included.

    R = r_type * (N_att + N_opt + [price <= U]) / (|attributes| + |goal_options| + 1)

Published scores depend on the exact rules, so they are reproduced rather than improved:

* Fuzzy matches use thefuzz's ``token_set_ratio > 85``. The original pins thefuzz 0.19.0
  (verl-agent too) without python-Levenshtein, i.e. difflib's ``SequenceMatcher`` ratios, each
  rounded with ``int(round(.))``; that is what :func:`fuzzy_score` computes (checked equal to
  thefuzz 0.19.0 on 60,000 option-like pairs). thefuzz >= 0.20 scores with rapidfuzz instead
  and disagrees on about 0.1% of such pairs. rapidfuzz's Indel ratio
  (2 * LCS / total length) is never below difflib's (whose matching blocks are a common
  subsequence), so it serves as an exact fast reject; difflib runs only on would-be matches.
* thefuzz's preprocessing drops only the characters U+0080..U+00FF ('é', '®', '°', NBSP...),
  not every non-ASCII one; then non-word characters become spaces, text is lower-cased and
  stripped. An input that is not a ``str`` is first turned into its ``str()``.
* Option values are colour-normalised by substring in list order ("monitor + stand" -> "tan").
  Synthetic goals pass ``goal_options.items()``: a ``(group, value)`` tuple is normalised only if
  a colour *equals* one of its elements, and otherwise is compared as the text of the tuple
  ("('color', 'dark red')" -> tokens ``color dark red``).
* title_score's denominator counts duplicate nouns of the goal name, its numerator does not.

Differences, both where the original would crash: a goal with ``price_upper <= 0`` gets
``r_price=None`` counted as 0 (the original adds None and raises), and a goal without attributes
gets ``r_att=1.0`` (the original divides by zero).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass
from typing import Any

from rapidfuzz.fuzz import ratio as _indel_ratio

from gagpo.servers.lru import bounded_cache
from gagpo.servers.webshop.goals import Goal
from gagpo.servers.webshop.nouns import noun_tokens
from gagpo.servers.webshop.product import Product

MATCH_THRESHOLD = 85
"""A fuzzy match needs a score strictly above this (integer scores)."""
_CACHE_ENTRIES, _CACHE_BYTES = 1 << 16, 16 << 20
"""Bounds of each fuzzy-matching memo: the served shop's done page takes any option values a
URL names (as the original's does), so the keys are partly the client's to choose."""

# The original's colour vocabulary (web_agent_site/engine/normalize.py), in its order: order
# matters, because the first word found in a value wins ("dark red" -> "dark").
COLOR_WORDS: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure",
    "banana", "beige", "black", "blue", "blush", "bordeaux", "bronze",
    "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee",
    "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark",
    "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite",
    "grape", "graphite", "grass", "gray", "green", "grey", "heather", "indigo",
    "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac",
    "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive",
    "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red",
    "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull",
    "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal",
    "tiger", "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
)  # fmt: skip

CATEGORY_SEPARATOR = "\u203a"  # '›'

_LATIN1_DROP = dict.fromkeys(range(128, 256))
# thefuzz 0.19.0's pattern: Unicode-aware \W (underscore counts as a word character).
_NON_WORD = re.compile(r"(?ui)\W")


@dataclass(frozen=True, slots=True)
class RewardParts:
    """The reward and the parts it is made of (the original's verbose info, all fields kept)."""

    reward: float
    """In [0, 1]."""
    r_type: float
    r_att: float
    r_option: float | None
    """None when the goal has no options."""
    r_price: bool | None
    """None when the goal's price limit is not positive (never the case in practice)."""
    query_match: bool
    category_match: bool
    title_score: float

    def as_dict(self) -> dict[str, Any]:
        """Every field, JSON-friendly (floats, bools and None only)."""
        return asdict(self)


# --------------------------------------------------------------------------- fuzzy matching


@bounded_cache(_CACHE_ENTRIES, _CACHE_BYTES)
def fuzz_process(value: Any) -> str:
    """thefuzz 0.19.0's ``full_process(value, force_ascii=True)``."""
    text = str(value).translate(_LATIN1_DROP)
    return _NON_WORD.sub(" ", text).lower().strip()


def _difflib_ratio(a: str, b: str) -> int:
    """thefuzz 0.19.0's ``ratio`` (pure-Python path): equal -> 100, an empty side -> 0."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def _token_set_strings(p1: str, p2: str) -> tuple[str, str, str]:
    """The three strings thefuzz's token_set_ratio compares: the sorted shared tokens, and
    each side's shared tokens followed by its own remaining tokens."""
    t1, t2 = set(p1.split()), set(p2.split())
    shared = " ".join(sorted(t1 & t2))
    only1 = " ".join(sorted(t1 - t2))
    only2 = " ".join(sorted(t2 - t1))
    return shared.strip(), f"{shared} {only1}".strip(), f"{shared} {only2}".strip()


@bounded_cache(_CACHE_ENTRIES, _CACHE_BYTES)
def fuzzy_score(a: Any, b: Any) -> int:
    """``thefuzz.fuzz.token_set_ratio(a, b)`` as in thefuzz 0.19.0 (integer 0..100)."""
    if a is None or b is None:
        return 0
    p1, p2 = fuzz_process(a), fuzz_process(b)
    if not p1 or not p2:
        return 0
    shared, c1, c2 = _token_set_strings(p1, p2)
    return max(_difflib_ratio(shared, c1), _difflib_ratio(shared, c2), _difflib_ratio(c1, c2))


@bounded_cache(_CACHE_ENTRIES, _CACHE_BYTES)
def fuzzy_match(a: Any, b: Any) -> bool:
    """``token_set_ratio(a, b) > 85``, decided exactly as thefuzz 0.19.0 decides it."""
    if a is None or b is None:
        return False
    p1, p2 = fuzz_process(a), fuzz_process(b)
    if not p1 or not p2:
        return False
    shared, c1, c2 = _token_set_strings(p1, p2)
    # Fast exact reject: the Indel ratio bounds difflib's ratio from above, and int(round(x)) > 85
    # needs x >= 85.5; a margin of 0.5 absorbs float noise between the two formulas.
    best_upper = max(_indel_ratio(shared, c1), _indel_ratio(shared, c2), _indel_ratio(c1, c2))
    if best_upper < MATCH_THRESHOLD:
        return False
    return fuzzy_score(a, b) > MATCH_THRESHOLD


def normalize_color(value: Any) -> Any:
    """The first colour word ``in`` the value replaces it. For a string that is a substring
    test; for a (group, value) tuple it is element equality, as in the original."""
    for colour in COLOR_WORDS:
        if colour in value:
            return colour
    return value


# --------------------------------------------------------------------------- reward parts


def type_parts(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """(r_type, query_match, category_match, title_score) of buying ``product`` for ``goal``."""
    query_match = product.query == goal.query
    bought_segments = {s.strip() for s in product.product_category.split(CATEGORY_SEPARATOR)}
    goal_segments = {s.strip() for s in goal.product_category.split(CATEGORY_SEPARATOR)}
    category_match = len(bought_segments & goal_segments) >= 2

    goal_nouns = noun_tokens(goal.name)
    if not goal_nouns:
        title_score = 0.2
    else:
        # Set on top, list below: duplicate nouns in the goal name lower the score.
        title_score = len(set(noun_tokens(product.title)) & set(goal_nouns)) / len(goal_nouns)

    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def count_attribute_matches(product: Product, attributes: tuple[str, ...] | list[str]) -> int:
    """Goal attributes found in the product's attributes (fuzzy), else in its texts (substring,
    case-sensitive on the goal side as in the original)."""
    texts: tuple[str, ...] | None = None
    count = 0
    for wanted in attributes:
        if any(fuzzy_match(have, wanted) for have in product.attributes):
            count += 1
            continue
        if texts is None:
            texts = (
                product.title.lower(),
                " ".join(product.bullet_points).lower(),
                product.description.lower(),
            )
        if any(wanted in text for text in texts):
            count += 1
    return count


def count_option_matches(chosen: list[Any], wanted: list[Any]) -> int:
    """Goal options matched by some chosen value, both sides colour-normalised first."""
    chosen_norm = [normalize_color(v) for v in chosen]
    count = 0
    for goal_option in (normalize_color(w) for w in wanted):
        if any(fuzzy_match(have, goal_option) for have in chosen_norm):
            count += 1
    return count


def compute_reward(
    product: Product,
    goal: Goal,
    options: dict[str, str],
    price: float | None = None,
) -> RewardParts:
    """The reward of buying ``product`` with the chosen ``options`` ({group: value}) for
    ``goal``; ``price`` defaults to the product's reward price."""
    if price is None:
        price = product.price
    r_type, query_match, category_match, title_score = type_parts(product, goal)

    r_price = price <= goal.price_upper if goal.price_upper > 0 else None

    n_att = count_attribute_matches(product, goal.attributes)
    r_att = n_att / len(goal.attributes) if goal.attributes else 1.0

    goal_options = goal.goal_options
    # Synthetic goals are dicts: the original hands over their (group, value) pairs.
    wanted = list(goal_options.items()) if isinstance(goal_options, dict) else list(goal_options)
    n_opt = count_option_matches(list(options.values()), wanted)
    r_option = n_opt / len(wanted) if wanted else None

    denominator = len(goal.attributes) + len(wanted) + 1
    # Same operation order as the original, so the float is bit-identical.
    reward = (n_att + n_opt + bool(r_price)) / denominator
    reward *= r_type
    return RewardParts(
        reward=reward,
        r_type=r_type,
        r_att=r_att,
        r_option=r_option,
        r_price=r_price,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )
