"""Generate a WebShop catalog in the original file format, deterministically from a seed.

``write_catalog(dir, n_products, seed)`` writes ``items_shuffle.json``, ``items_ins_v2.json``
and ``items_human_ins.json`` laid out as the original's files are, so that
:func:`gagpo.servers.webshop.catalog.load_catalog` reads ours and the original's alike.
``generate(n_products, seed)`` yields the same products without writing files.

How it is made hard, the way the original is:

* Products come in *families*: one product type and search query, 5-20 members by default,
  sharing most attributes, option groups, title words and often the brand, differing in one
  or two attributes, in option values and in price; some members are near duplicates of a
  sibling (one attribute swapped).
* The original's attributes are mined phrases that product texts often spell differently
  ("easy clean" vs "easy to clean"), and its search index holds only the first bullet point.
  So here a text names each attribute either as its phrase or in another spelling (same search
  words; the reward's substring test misses it and credits it through the attribute list),
  only some attributes are named where search looks (title, description, first bullet), and
  texts name a few attributes the product lacks, in the other spelling (*decoys*).

Searching an instruction's text therefore tends to rank look-alikes first that match most but
not all of what is asked. The knobs are the fields of :class:`GeneratorConfig`; the defaults
were set so that the rule baseline (search the instruction, buy the first hit without
choosing options) lands near its score on the original data.

Scale: each family draws from its own seeded RNG; families are grouped in chunks of about
4,000 products, shuffled within the chunk (hence "items_shuffle") and streamed to disk, so
memory stays flat at any size; ``workers`` renders chunks in parallel processes with
byte-identical output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from gagpo.servers.webshop.generator import vocab
from gagpo.servers.webshop.generator.vocab import (
    CATEGORIES,
    PRODUCT_TYPES,
    OptionGroup,
    ProductType,
    Query,
)

FILES = ("items_shuffle", "items_ins_v2", "items_human_ins")
CHUNK_PRODUCTS = 4096
IMAGE_HOST = "https://m.media-amazon.com/images/I/"


@dataclass(frozen=True)
class GeneratorConfig:
    """Shape and difficulty of a generated catalog. Defaults aim at the original's hardness."""

    family_size: tuple[int, int] = (5, 20)
    """Products per family (same type and query). Bigger families: more look-alikes."""
    core_attributes: int = 3
    """Attributes a family shares; members keep each with ``core_keep``."""
    core_keep: float = 0.8
    extra_attributes: tuple[int, int] = (1, 2)
    """Member-specific attributes drawn from the rest of the type's vocabulary."""
    attribute_visibility: float = 0.3
    """Chance each attribute is named in the indexed text (title, description, first bullet)
    rather than only in later bullets: lower means search finds the asked attributes less."""
    surface_variation: float = 0.5
    """Chance a text writes one of its attributes in another spelling ("non-slip" for
    "non slip"): the reward then credits it through the attribute list only."""
    decoy_mentions: float = 2.0
    """Expected attributes per product that its text names (in another spelling) without the
    product having them: what makes the first search hit lack asked attributes."""
    near_duplicates_per_product: float = 1.0
    """Expected look-alike siblings per product (copy of a sibling with one attribute swapped)."""
    same_brand_share: float = 0.35
    """Chance a member reuses a sibling's brand (one seller, several listings)."""
    human_instructions_per_product: float = 2.0
    instruction_attributes: tuple[float, ...] = (0.45, 0.4, 0.15)
    """Weights of naming 1, 2, 3 attributes in an instruction."""
    no_option_share: float = 0.2
    """Share of instructions that name no option (only those let a buy-without-options win)."""
    option_mention: float = 0.8
    """Otherwise, the chance each of the product's option groups is named (at least one is)."""
    synonym_share: float = 0.3
    """Chance an instruction calls the product by a synonym rather than its main noun."""
    no_options_share: float = 0.15
    """Products without customization options."""
    max_option_groups: int = 3
    max_option_values: int = 6
    max_option_combinations: int = 24
    """Caps the product of option counts: synthetic goals are one per combination."""
    price_spread: float = 0.4
    """Log-normal spread of member prices around the family's price."""
    price_range_share: float = 0.12
    null_price_share: float = 0.01
    recipient_share: float = 0.1
    """Chance an instruction adds who it is for ("for my wife"): noise for the search."""

    def __post_init__(self) -> None:
        lo, hi = self.family_size
        if not 1 <= lo <= hi:
            raise ValueError(f"family_size must be 1 <= lo <= hi, got {self.family_size}")
        if self.max_option_combinations < 1 or self.max_option_values < 1:
            raise ValueError("option caps must be >= 1")


class GeneratedProduct(NamedTuple):
    """One product's entries in the three files."""

    record: dict[str, Any]
    ins_v2: dict[str, Any]
    human: list[dict[str, Any]]


# --- precomputed per-type data ------------------------------------------------------------------

_UPPER_WORDS = {
    "usda": "USDA", "gmo": "GMO", "bpa": "BPA", "pu": "PU", "hd": "HD", "led": "LED",
    "gps": "GPS", "ips": "IPS", "hdmi": "HDMI", "vesa": "VESA", "uv": "UV", "msg": "MSG",
    "gan": "GaN", "magsafe": "MagSafe", "usb": "USB", "v": "V",
}  # fmt: skip


def _title_case(phrase: str) -> str:
    words = []
    for w in phrase.split(" "):
        if w in _UPPER_WORDS:
            words.append(_UPPER_WORDS[w])
        elif w in ("for", "with", "and", "of", "in"):
            words.append(w)
        else:
            words.append("-".join(part[:1].upper() + part[1:] for part in w.split("-")))
    return " ".join(words)


@dataclass(frozen=True)
class _Type:
    """A product type with everything the hot loop needs precomputed.

    Texts name an attribute in one of two *forms*: 0 the phrase itself ("non slip"), 1 another
    spelling ("non-slip", see :func:`vocab.surface_variant`). Search sees the same words in
    both; the reward's substring test only finds form 0.
    """

    spec: ProductType
    attributes: tuple[str, ...]
    kind: dict[str, str]
    """attribute -> "adj", "pre" (a noun phrase), "with" or "for": how instructions say it."""
    text: dict[str, tuple[str, str]]
    """attribute -> its text in form 0 and form 1 (lower case)."""
    title_form: dict[str, tuple[str, str]]
    bullet: dict[str, tuple[tuple[str, str], tuple[str, str]]]
    """attribute -> [form][style]: "NON SLIP: ..." or "Non Slip - ..."."""
    spelled: frozenset[str]
    """Attributes that have a form 1 (only those can be decoys)."""
    spelled_order: tuple[str, ...]


def _build_types() -> dict[str, tuple[_Type, ...]]:
    built: dict[str, tuple[_Type, ...]] = {}
    for category in CATEGORIES:
        items = []
        for spec in PRODUCT_TYPES[category]:
            attrs, kind, text, title, bullet, spelled = [], {}, {}, {}, {}, set()
            for entry in spec.attributes:
                phrase, k = vocab.attribute_phrase(entry)
                attrs.append(phrase)
                # "pre" attributes that read as nouns go after the noun with "with".
                kind[phrase] = "adj" if k == "pre" and vocab.is_adjectival(phrase) else k
                variant = vocab.surface_variant(phrase)
                if variant:
                    spelled.add(phrase)
                forms = (phrase, variant or phrase)
                text[phrase] = forms
                prefix = f"{k} " if k in ("for", "with") else ""
                title[phrase] = tuple(_title_case(prefix + f) for f in forms)
                blurb = vocab.BLURBS[phrase]
                bullet[phrase] = tuple(
                    (f"{f.upper()}: {blurb}", f"{_title_case(f)} - {blurb}") for f in forms
                )
            items.append(
                _Type(
                    spec=spec,
                    attributes=tuple(attrs),
                    kind=kind,
                    text=text,
                    title_form=title,
                    bullet=bullet,
                    spelled=frozenset(spelled),
                    spelled_order=tuple(a for a in attrs if a in spelled),
                )
            )
        built[category] = tuple(items)
    return built


TYPES = _build_types()

# --- small deterministic helpers ------------------------------------------------------------------

_ASIN_SPACE = 36**8
_ASIN_MULT = 1_779_033_703  # odd and not a multiple of 3: coprime with 36**8, so i -> asin is 1:1
_B36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


_B36_PAIRS = tuple(a + b for a in _B36 for b in _B36)


def asin_for(index: int, seed: int) -> str:
    """The ASIN of product ``index``: 'B0' + 8 base-36 characters, unique for every index
    below 36**8 (an affine bijection of the index, offset by the seed)."""
    return _asin(index, _asin_offset(seed))


def _asin_offset(seed: int) -> int:
    return random.Random(f"gagpo-asin:{seed}").randrange(_ASIN_SPACE)


def _asin(index: int, offset: int) -> str:
    x = (index * _ASIN_MULT + offset) % _ASIN_SPACE
    p = _B36_PAIRS
    return f"B0{p[x % 1296]}{p[x // 1296 % 1296]}{p[x // 1679616 % 1296]}{p[x // 2176782336]}"


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-"
_B64_PAIRS = tuple(a + b for a in _B64 for b in _B64)
_MASK64 = (1 << 64) - 1


def _images(r: _Rng, n: int) -> list[str]:
    """``n`` Amazon-style image URLs ("…/I/71TdLH7+7eL.jpg"): a prefix digit, 8 base64-ish
    characters and "L". One draw per call, then a cheap LCG step per image."""
    x = r.getrandbits(64)
    p = _B64_PAIRS
    out = []
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & _MASK64
        code = p[(x >> 14) & 4095] + p[(x >> 26) & 4095] + p[(x >> 38) & 4095]
        out.append(f"{IMAGE_HOST}{'4567'[x >> 62]}1{code}{p[(x >> 50) & 4095]}L.jpg")
    return out


class _Rng(random.Random):
    """``random.Random`` whose choice/sample/randint/shuffle are driven by ``random()``.

    The standard versions draw exact integers in Python code, which made them most of the
    generator's run time; these are several times faster and just as deterministic (their
    tiny float bias does not matter for made-up products).
    """

    def choice(self, seq: Sequence[Any]) -> Any:  # type: ignore[override]
        return seq[int(self.random() * len(seq))]

    def randint(self, a: int, b: int) -> int:
        return a + int(self.random() * (b - a + 1))

    def below(self, n: int) -> int:
        return int(self.random() * n)

    def sample(self, seq: Sequence[Any], k: int) -> list[Any]:  # type: ignore[override]
        pool = list(seq)
        n = len(pool)
        rnd = self.random
        for i in range(k):
            j = i + int(rnd() * (n - i))
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def shuffle(self, x: list[Any]) -> None:  # type: ignore[override]
        rnd = self.random
        for i in range(len(x) - 1, 0, -1):
            j = int(rnd() * (i + 1))
            x[i], x[j] = x[j], x[i]

    def weighted(self, weights: Sequence[float]) -> int:
        """Index drawn with the given (not necessarily normalized) weights."""
        u = self.random() * sum(weights)
        for i, w in enumerate(weights):
            u -= w
            if u < 0:
                return i
        return len(weights) - 1


def _article(word: str) -> str:
    return "an" if word[:1] in "aeio" else "a"


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _price_text(p: float) -> str:
    return f"${p:.2f}"


# --- one family ---------------------------------------------------------------------------


class _Member(NamedTuple):
    attrs: list[str]
    brand: str
    words: tuple[str, ...]
    noun: str
    groups: tuple[OptionGroup, ...]
    price: float


def _brand(r: _Rng, category: str) -> str:
    style = r.random()
    if style < 0.45:
        name = r.choice(vocab.BRAND_HEADS) + r.choice(vocab.BRAND_TAILS)
        return name if r.random() < 0.7 else name.upper()
    if style < 0.75:
        head = r.choice(vocab.BRAND_HEADS) + r.choice(vocab.BRAND_TAILS)
        return f"{head} {r.choice(vocab.BRAND_WORDS[category])}"
    # Marketplace-style all-caps names ("KORVAMI").
    n = r.choice((3, 3, 4))
    return "".join(r.choice(vocab.CONSONANTS) + r.choice(vocab.VOWELS) for _ in range(n))


def _family_category(seed: int, family: int) -> str:
    # Every run of five consecutive families covers all five categories, in a seeded order:
    # balanced categories, and all five present in even a tiny catalog.
    order = list(CATEGORIES)
    _Rng(f"gagpo-cat:{seed}:{family // 5}").shuffle(order)
    return order[family % 5]


def _choose_options(
    r: _Rng, groups: Sequence[OptionGroup], cfg: GeneratorConfig
) -> dict[str, tuple[str, ...]]:
    """Values per group (pool order kept, so sizes stay ascending), capped in combinations."""
    chosen: dict[str, tuple[str, ...]] = {}
    combos = 1
    for group in groups:
        room = cfg.max_option_combinations // combos
        hi = min(cfg.max_option_values, len(group.values), room)
        if hi < 2:
            break
        k = r.randint(2, hi)
        picks = sorted(r.sample(range(len(group.values)), k))
        chosen[group.name] = tuple(group.values[i] for i in picks)
        combos *= k
    return chosen


def _make_members(
    r: _Rng, t: _Type, size: int, category: str, cfg: GeneratorConfig
) -> list[_Member]:
    spec = t.spec
    core = r.sample(t.attributes, min(cfg.core_attributes, len(t.attributes)))
    lo, hi = spec.price
    base_price = math.exp(r.uniform(math.log(lo), math.log(hi)))
    floor, cap = 0.6 * lo, 1.4 * hi  # keeps the spread's tails plausible for the type
    family_words = r.sample(spec.words, min(3, len(spec.words)))
    groups = spec.options[: cfg.max_option_groups]
    dup_p = cfg.near_duplicates_per_product / (1.0 + cfg.near_duplicates_per_product)
    members: list[_Member] = []
    for _ in range(size):
        if members and r.random() < dup_p:
            # A look-alike of a sibling: same words, noun and option groups, one attribute
            # swapped (or dropped/added), price nearby.
            base = r.choice(members)
            attrs = list(base.attrs)
            rest = [a for a in t.attributes if a not in attrs]
            move = r.random()
            if (move < 0.6 or len(attrs) <= 2) and rest:
                if len(attrs) > 2 and move < 0.6:
                    attrs.pop(r.below(len(attrs)))
                attrs.append(r.choice(rest))
            elif len(attrs) > 2:
                attrs.pop(r.below(len(attrs)))
            brand = base.brand if r.random() < 0.5 else _brand(r, category)
            price = min(max(base.price * math.exp(r.gauss(0.0, cfg.price_spread / 2)), floor), cap)
            members.append(_Member(attrs, brand, base.words, base.noun, base.groups, price))
            continue
        attrs = [a for a in core if r.random() < cfg.core_keep]
        rest = [a for a in t.attributes if a not in attrs]
        n_extra = r.randint(*cfg.extra_attributes)
        n_extra = max(n_extra, 2 - len(attrs))
        attrs += r.sample(rest, min(n_extra, len(rest)))
        r.shuffle(attrs)
        if members and r.random() < cfg.same_brand_share:
            brand = r.choice(members).brand
        else:
            brand = _brand(r, category)
        noun = r.choice(spec.title_nouns)
        # Skip selling words already in the noun ("Wireless Wireless Earbuds").
        fresh = [w for w in family_words if w.split()[-1] not in noun] or family_words
        words = tuple(r.sample(fresh, r.randint(1, min(2, len(fresh)))))
        if not groups or r.random() < cfg.no_options_share:
            member_groups: tuple[OptionGroup, ...] = ()
        else:
            k = r.choice((len(groups), len(groups), max(1, len(groups) - 1)))
            member_groups = tuple(groups[:k])
        price = min(max(base_price * math.exp(r.gauss(0.0, cfg.price_spread)), floor), cap)
        members.append(_Member(attrs, brand, words, noun, member_groups, price))
    return members


def _round_price(r: _Rng, p: float) -> float:
    p = max(p, 1.0)
    cents = r.choice((0.99, 0.99, 0.95, 0.49, 0.0, 0.97, 0.89))
    whole = math.floor(p)
    return whole + cents if whole >= 1 else 0.99


def _pricing(r: _Rng, price: float, has_options: bool, cfg: GeneratorConfig) -> str | None:
    roll = r.random()
    if roll < cfg.null_price_share:
        return None
    p = _round_price(r, price)
    if has_options and roll < cfg.null_price_share + cfg.price_range_share:
        q = _round_price(r, p * r.uniform(1.15, 1.9))
        return f"{_price_text(p)} - {_price_text(q)}"
    return _price_text(p)


_Mention = tuple[str, int]
"""(attribute, form) as a product text names it."""


def _mentions(
    r: _Rng, t: _Type, m: _Member, cfg: GeneratorConfig
) -> tuple[list[_Mention], list[_Mention]]:
    """What a product's text names: ``indexed`` (title, description, first bullet: what search
    sees) and ``listed`` (all bullets). Own attributes appear in either form; decoys are type
    attributes the product lacks, only ever in form 1, so search is drawn to them while the
    reward does not count them."""
    rnd = r.random
    spelled = t.spelled
    variation, visibility = cfg.surface_variation, cfg.attribute_visibility
    listed = [(a, 1 if a in spelled and rnd() < variation else 0) for a in m.attrs]
    indexed = [x for x in listed if rnd() < visibility]
    n_decoys = int(rnd() * 2 * cfg.decoy_mentions + 0.5)
    if n_decoys:
        own = m.attrs
        pool = [a for a in t.spelled_order if a not in own]
        decoys = [(a, 1) for a in r.sample(pool, min(n_decoys, len(pool)))]
        indexed += decoys
        listed += decoys
        r.shuffle(indexed)
    return indexed, listed


def _title(r: _Rng, t: _Type, m: _Member, audience: str, shown: list[_Mention]) -> str:
    aud = f"{audience.capitalize()}'s " if audience else ""
    tail = r.choice(t.spec.tails)
    words = "".join([f"{w} " for w in m.words if w not in tail])  # none repeated in the tail
    titles = [t.title_form[a][f] for a, f in shown[:3]]
    style = r.random()
    if style < 0.4 or not titles:
        return f"{m.brand} {aud}{words}{m.noun} {''.join(x + ' ' for x in titles)}{tail}"
    if style < 0.8:
        return f"{m.brand} {aud}{words}{m.noun}, {', '.join(titles)}, {tail}"
    aud_tail = f" for {audience.capitalize()}" if audience else ""
    return f"{m.brand} {m.noun}{aud_tail} - {' | '.join(titles)} - {words}{tail}"


_HIGHLIGHTS = ("Highlights", "Key features", "Why you will love it", "Features")


def _description(r: _Rng, t: _Type, m: _Member, category: str, shown: list[_Mention]) -> str:
    spec = t.spec
    intro = r.choice(vocab.INTROS).format(brand=m.brand, noun=m.noun.lower())
    pre = [t.text[a][f] for a, f in shown if t.kind[a] in ("adj", "pre")]
    withs = [t.text[a][f] for a, f in shown if t.kind[a] == "with"]
    fors = [t.text[a][f] for a, f in shown if t.kind[a] == "for"]
    sentences = [intro]
    # Attribute phrases mix adjectives ("non slip") and nouns ("leather band"), so they are
    # listed rather than put in a "This is ..." sentence.
    if pre:
        sentences.append(f"{r.choice(_HIGHLIGHTS)}: {_join(pre)}.")
    if withs:
        sentences.append(f"{r.choice(('Comes with', 'Includes', 'Designed with'))} {_join(withs)}.")
    if fors:
        sentences.append(
            f"{r.choice(('A smart pick for', 'Made for', 'Ideal for'))} {_join(fors)}."
        )
    n = r.randint(2, 5)
    facts = r.sample(spec.facts, min(len(spec.facts), max(0, n - len(sentences))))
    sentences.extend(facts)
    if len(sentences) < n:
        sentences.append(r.choice(vocab.CLOSERS[category]))
    return " ".join(sentences[:5])


def _bullets(r: _Rng, t: _Type, shown: list[_Mention], listed: list[_Mention]) -> list[str]:
    """One bullet per mention (up to 6) plus facts. Only the first bullet is indexed for
    search (as in the original), so it is a fact or one of the ``shown`` mentions."""
    style = 0 if r.random() < 0.5 else 1
    listed = listed[:6]
    n = r.randint(max(3, len(listed)), 6)
    facts = r.sample(t.spec.facts, min(len(t.spec.facts), n - len(listed)))
    firsts = [t.bullet[a][f][style] for a, f in listed if (a, f) in shown] + facts
    first = r.choice(firsts) if firsts else t.bullet[listed[0][0]][listed[0][1]][style]
    rest = [t.bullet[a][f][style] for a, f in listed] + facts
    rest.remove(first)
    r.shuffle(rest)
    return [first, *rest]


def _noun_phrase(r: _Rng, t: _Type, audience: str, cfg: GeneratorConfig) -> str:
    nouns = t.spec.nouns
    noun = nouns[0] if len(nouns) == 1 or r.random() >= cfg.synonym_share else r.choice(nouns[1:])
    if audience:
        return f"{audience}'s {noun}" if r.random() < 0.5 else f"{noun} for {audience}"
    return noun


def _instruction(
    r: _Rng,
    t: _Type,
    audience: str,
    attrs: Sequence[str],
    options: Sequence[tuple[OptionGroup, str]],
    opener: str,
    cfg: GeneratorConfig,
    category: str,
    recipient: bool = True,
) -> str:
    """A shopper's request naming ``attrs`` and option values (lower case, no final dot).
    ``recipient`` allows a "for my wife" ending (not in synthetic instructions, which the
    goal builder extends with "with k: v")."""
    noun = _noun_phrase(r, t, audience, cfg)
    # Attributes go before the noun ("a gluten free coffee") or after it: adjectives as
    # "that is ...", noun phrases and "with:" ones as "with ...", "for:" ones as "for ...".
    head: list[str] = []
    adjs: list[str] = []
    withs: list[str] = []
    fors: list[str] = []
    for a in attrs:
        kind = t.kind[a]
        if kind == "adj":
            (head if r.random() < 0.65 else adjs).append(a)
        elif kind == "pre":
            (head if r.random() < 0.35 else withs).append(a)
        elif kind == "with":
            withs.append(a)
        else:
            fors.append(a)
    after = []
    if adjs:
        after.append(("that are " if noun.endswith("s") else "that is ") + _join(adjs))
    if withs:
        after.append("with " + _join(withs))
    if fors:
        after.append("for " + _join(fors))
    if len(head) > 1 and r.random() < 0.5:
        head = [", ".join(head)]
    pre_opts: list[str] = []
    post_opts: list[str] = []
    for group, value in options:
        if group.kind == "color" and r.random() < 0.2:
            pre_opts.append(value)  # "a black t-shirt"
        else:
            post_opts.append(r.choice(vocab.OPTION_PHRASES[group.kind]).format(v=value))
    head = pre_opts + head
    phrase = " ".join([*head, noun])
    spec = t.spec
    if spec.pair and r.random() < 0.5:
        article = "a pair of"
    elif spec.plural:
        article = r.choice(("", "some"))
    else:
        article = _article(phrase)
    text = f"{opener} {article} {phrase}".replace("  ", " ")
    if after:
        text += " " + " and ".join(after)
    if post_opts:
        sep = r.choice((", ", " and ", ", "))
        text += (" " if r.random() < 0.6 else ", ") + sep.join(post_opts).lstrip(", ")
    if recipient and r.random() < cfg.recipient_share:
        text += " " + r.choice(vocab.RECIPIENTS[category])
    return text


def _human_instructions(
    r: _Rng,
    t: _Type,
    audience: str,
    asin: str,
    attrs: list[str],
    options: dict[str, tuple[str, ...]],
    groups: Sequence[OptionGroup],
    cfg: GeneratorConfig,
    category: str,
) -> list[dict[str, Any]]:
    rnd = r.random
    count = int(rnd() * 2 * cfg.human_instructions_per_product + 0.5)
    if not count:
        return []
    # Option values as instructions name them: lower-cased, exactly.
    named_groups = [(g, [v.lower() for v in options[g.name]]) for g in groups if g.name in options]
    out = []
    weights = cfg.instruction_attributes
    for _ in range(count):
        chosen = r.sample(attrs, min(len(attrs), 1 + r.weighted(weights)))
        named: list[tuple[OptionGroup, str]] = []
        if named_groups and rnd() >= cfg.no_option_share:
            for group, values in named_groups:
                if rnd() < cfg.option_mention:
                    named.append((group, values[int(rnd() * len(values))]))
            if not named:
                group, values = r.choice(named_groups)
                named.append((group, r.choice(values)))
        text = _instruction(r, t, audience, chosen, named, r.choice(vocab.OPENERS), cfg, category)
        out.append(
            {
                "asin": asin,
                "instruction": text,
                "instruction_attributes": chosen,
                "instruction_options": [v for _, v in named],
            }
        )
    return out


def _family(
    seed: int, family: int, start: int, size: int, asin_offset: int, cfg: GeneratorConfig
) -> list[GeneratedProduct]:
    r = _Rng(f"gagpo-family:{seed}:{family}")
    category = _family_category(seed, family)
    t = r.choice(TYPES[category])
    query: Query = r.choice(t.spec.queries)
    audience = query.audience
    members = _make_members(r, t, size, category, cfg)
    out = []
    for i, m in enumerate(members):
        asin = _asin(start + i, asin_offset)
        options = _choose_options(r, m.groups, cfg)
        shown, listed = _mentions(r, t, m, cfg)
        custom = None
        if options:
            custom = {}
            for group in m.groups:
                values = options.get(group.name)
                if values:
                    images = _images(r, len(values)) if group.images else [None] * len(values)
                    custom[group.name] = [
                        {"value": v, "image": img} for v, img in zip(values, images, strict=True)
                    ]
        record = {
            "asin": asin,
            "name": _title(r, t, m, audience, shown),
            "full_description": _description(r, t, m, category, shown),
            "small_description": _bullets(r, t, shown, listed),
            "pricing": _pricing(r, m.price, bool(options), cfg),
            "images": _images(r, r.randint(1, 5)),
            "product_category": query.path,
            "brand": m.brand,
            "category": category,
            "query": query.text,
            "customization_options": custom,
        }
        ins_attrs = r.sample(m.attrs, min(len(m.attrs), r.choice((1, 2, 2, 3))))
        ins_v2 = {
            "attributes": list(m.attrs),
            "instruction": _instruction(
                r,
                t,
                audience,
                ins_attrs,
                (),
                r.choice(vocab.SYNTHETIC_OPENERS),
                cfg,
                category,
                recipient=False,
            ),
            "instruction_attributes": ins_attrs,
        }
        human = _human_instructions(r, t, audience, asin, m.attrs, options, m.groups, cfg, category)
        out.append(GeneratedProduct(record, ins_v2, human))
    return out


# --- chunks: planning, rendering, streaming ----------------------------------------------

_Plan = tuple[int, list[tuple[int, int, int]]]
"""(chunk index, [(family index, first product index, family size), ...])."""


def _plan(n_products: int, seed: int, cfg: GeneratorConfig) -> Iterator[_Plan]:
    """Family sizes (from one seeded stream) grouped into chunks of ~CHUNK_PRODUCTS."""
    r = _Rng(f"gagpo-sizes:{seed}")
    lo, hi = cfg.family_size
    start = family = chunk = 0
    pending: list[tuple[int, int, int]] = []
    in_chunk = 0
    while start < n_products:
        left = n_products - start
        size = min(r.randint(lo, hi), left)
        if left - size < lo:  # never leave a runt family at the end
            size = left
        pending.append((family, start, size))
        in_chunk += size
        start += size
        family += 1
        if in_chunk >= CHUNK_PRODUCTS:
            yield chunk, pending
            chunk += 1
            pending, in_chunk = [], 0
    if pending:
        yield chunk, pending


def _chunk_products(seed: int, plan: _Plan, cfg: GeneratorConfig) -> list[GeneratedProduct]:
    chunk, families = plan
    offset = _asin_offset(seed)
    products: list[GeneratedProduct] = []
    for family, start, size in families:
        products.extend(_family(seed, family, start, size, offset, cfg))
    # Interleave families as the original's shuffled file does (within the chunk only, so
    # memory stays bounded at any catalog size).
    _Rng(f"gagpo-shuffle:{seed}:{chunk}").shuffle(products)
    return products


def generate(
    n_products: int = 1000, seed: int = 0, config: GeneratorConfig | None = None
) -> Iterator[GeneratedProduct]:
    """Yield the products in file order (the same ones :func:`write_catalog` writes)."""
    cfg = config or GeneratorConfig()
    for plan in _plan(n_products, seed, cfg):
        yield from _chunk_products(seed, plan, cfg)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _json_safe(value: Any) -> bool:
    """True when every string in ``value`` (nested) needs no JSON escaping."""
    if isinstance(value, str):
        return '"' not in value and "\\" not in value and all(c >= " " for c in value)
    if isinstance(value, dict):
        return all(_json_safe(k) and _json_safe(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_json_safe(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return all(_json_safe(getattr(value, f)) for f in value.__dataclass_fields__)
    return True


# Every text we write is assembled from the vocabulary, brand syllables, ASIN and image
# alphabets, so if the vocabulary needs no escaping, neither does any output string, and
# records can be formatted directly (3x faster than json.dumps; a test checks the bytes are
# identical). Should the vocabulary ever gain a quote or backslash, json.dumps is used.
_FAST_JSON = all(
    _json_safe(getattr(vocab, name)) for name in dir(vocab) if name.isupper()
) and _json_safe([t.spec for ts in TYPES.values() for t in ts])


def _strs(xs: Sequence[str]) -> str:
    return "[" + ", ".join([f'"{x}"' for x in xs]) + "]"


def _encode_fast(p: GeneratedProduct) -> tuple[str, str, str]:
    rec, ins, human = p
    custom = rec["customization_options"]
    if custom is None:
        opts = "null"
    else:
        groups = []
        for name, entries in custom.items():
            values = ", ".join(
                [
                    f'{{"value": "{e["value"]}", "image": "{e["image"]}"}}'
                    if e["image"]
                    else f'{{"value": "{e["value"]}", "image": null}}'
                    for e in entries
                ]
            )
            groups.append(f'"{name}": [{values}]')
        opts = "{" + ", ".join(groups) + "}"
    pricing = "null" if rec["pricing"] is None else f'"{rec["pricing"]}"'
    record = (
        f'{{"asin": "{rec["asin"]}", "name": "{rec["name"]}", '
        f'"full_description": "{rec["full_description"]}", '
        f'"small_description": {_strs(rec["small_description"])}, '
        f'"pricing": {pricing}, '
        f'"images": {_strs(rec["images"])}, "product_category": "{rec["product_category"]}", '
        f'"brand": "{rec["brand"]}", "category": "{rec["category"]}", "query": "{rec["query"]}", '
        f'"customization_options": {opts}}}'
    )
    ins_text = (
        f'{{"attributes": {_strs(ins["attributes"])}, "instruction": "{ins["instruction"]}", '
        f'"instruction_attributes": {_strs(ins["instruction_attributes"])}}}'
    )
    human_text = ""
    if human:
        human_text = (
            "["
            + ", ".join(
                [
                    f'{{"asin": "{h["asin"]}", "instruction": "{h["instruction"]}", '
                    f'"instruction_attributes": {_strs(h["instruction_attributes"])}, '
                    f'"instruction_options": {_strs(h["instruction_options"])}}}'
                    for h in human
                ]
            )
            + "]"
        )
    return record, ins_text, human_text


def _encode_json(p: GeneratedProduct) -> tuple[str, str, str]:
    return _dumps(p.record), _dumps(p.ins_v2), _dumps(p.human) if p.human else ""


def encode_product(p: GeneratedProduct) -> tuple[str, str, str]:
    """JSON text of a product's record, its items_ins_v2 value and its human list ("" if
    none), byte-identical to ``json.dumps(..., ensure_ascii=False)``."""
    return _encode_fast(p) if _FAST_JSON else _encode_json(p)


def _render_chunk(args: tuple[int, _Plan, GeneratorConfig]) -> tuple[str, str, str, int]:
    """Serialize one chunk into the three files' text (top level: picklable for workers)."""
    seed, plan, cfg = args
    products = _chunk_products(seed, plan, cfg)
    encode = _encode_fast if _FAST_JSON else _encode_json
    items, ins, human = [], [], []
    for p in products:
        asin = p.record["asin"]
        record, ins_text, human_text = encode(p)
        items.append(record)
        ins.append(f'"{asin}": {ins_text}')
        if human_text:
            human.append(f'"{asin}": {human_text}')
    return ",\n".join(items), ",\n".join(ins), ",\n".join(human), len(products)


def _rendered(
    n_products: int, seed: int, cfg: GeneratorConfig, workers: int
) -> Iterator[tuple[str, str, str, int]]:
    tasks = ((seed, plan, cfg) for plan in _plan(n_products, seed, cfg))
    if workers <= 1:
        yield from map(_render_chunk, tasks)
        return
    from concurrent.futures import ProcessPoolExecutor

    # A bounded window of chunks in flight keeps memory flat however large the catalog.
    with ProcessPoolExecutor(workers) as pool:
        window: deque = deque()
        for task in tasks:
            window.append(pool.submit(_render_chunk, task))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


class _Bar(Protocol):
    def update(self, n: int) -> Any: ...


Progress = Callable[[int, int], Any] | _Bar
"""``callable(done, total)``, or a tqdm-like bar advanced with ``update(n)``."""


def _report(progress: Progress | None, done: int, step: int, total: int) -> None:
    if progress is None:
        return
    if callable(progress):
        progress(done, total)
    else:
        progress.update(step)


def write_catalog(
    directory: str | Path,
    n_products: int = 1000,
    seed: int = 0,
    progress: Progress | None = None,
    *,
    config: GeneratorConfig | None = None,
    workers: int = 1,
) -> dict[str, Path]:
    """Write the three catalog files into ``directory``; return their paths by stem.

    The bytes depend only on ``n_products``, ``seed`` and ``config`` (not on ``workers``).
    ``progress`` is a ``callable(done, total)`` or a tqdm bar (``update(n)``). Files are
    written under temporary names and renamed at the end, so a crash leaves no partial file.
    """
    if n_products < 0:
        raise ValueError("n_products must be >= 0")
    cfg = config or GeneratorConfig()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {stem: directory / f"{stem}.json" for stem in FILES}
    tmp = {stem: p.with_name(f".{p.name}.{os.getpid()}.tmp") for stem, p in paths.items()}
    brackets = {"items_shuffle": "[]", "items_ins_v2": "{}", "items_human_ins": "{}"}
    try:
        with contextlib.ExitStack() as stack:
            handles = {
                stem: stack.enter_context(open(tmp[stem], "w", encoding="utf-8", buffering=1 << 20))
                for stem in FILES
            }
            for stem in FILES:
                handles[stem].write(brackets[stem][0] + "\n")
            first = dict.fromkeys(FILES, True)
            done = 0
            for chunk in _rendered(n_products, seed, cfg, workers):
                for stem, text in zip(FILES, chunk[:3], strict=True):
                    if text:
                        handles[stem].write(text if first[stem] else ",\n" + text)
                        first[stem] = False
                done += chunk[3]
                _report(progress, done, chunk[3], n_products)
            for stem in FILES:
                handles[stem].write("\n" + brackets[stem][1] + "\n")
    except BaseException:
        for path in tmp.values():
            path.unlink(missing_ok=True)
        raise
    for stem in FILES:
        os.replace(tmp[stem], paths[stem])
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gagpo.servers.webshop.generator DIR [-n N] [--seed S] [--workers W]``."""
    parser = argparse.ArgumentParser(
        prog="python -m gagpo.servers.webshop.generator",
        description="Write a generated WebShop catalog.",
    )
    parser.add_argument("directory")
    parser.add_argument("-n", "--products", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] > 1.0 or done == total:
            last[0] = now
            print(f"\r{done:,}/{total:,} products", end="", file=sys.stderr, flush=True)

    write_catalog(args.directory, args.products, args.seed, show, workers=args.workers)
    dt = time.perf_counter() - t0
    print(f"\n{args.products:,} products in {dt:.1f} s ({args.products / dt:,.0f}/s)")
    return 0
