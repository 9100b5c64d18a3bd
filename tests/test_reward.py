"""The purchase reward, case by case, with every part's expected value worked out by hand.

Most cases swap in a transparent noun tagger (every whitespace-separated word of the name is a
noun) so that title_score is easy to count by hand; the built-in tagger has tests of its own.
"""

from __future__ import annotations

import json

import pytest

from gagpo.servers.webshop import nouns
from gagpo.servers.webshop.goals import Goal
from gagpo.servers.webshop.product import Product
from gagpo.servers.webshop.reward import (
    RewardParts,
    compute_reward,
    fuzz_process,
    fuzzy_match,
    fuzzy_score,
    normalize_color,
)

CAT = "Clothing, Shoes & Jewelry \u203a Men \u203a Clothing \u203a Shirts"
OTHER_CAT = "Home & Kitchen \u203a Furniture \u203a Tables"


def make_product(
    title: str = "red cotton shirt",
    *,
    attributes: tuple[str, ...] = ("100% cotton", "machine wash"),
    description: str = "",
    bullets: tuple[str, ...] = (),
    query: str = "shirt",
    product_category: str = CAT,
    price: float = 20.0,
) -> Product:
    return Product(
        asin="B000TEST01",
        title=title,
        description=description,
        bullet_points=bullets,
        pricing=(price,),
        price_tag=f"${price}",
        price=price,
        options={"color": ("red", "navy blue"), "size": ("large", "x-large")},
        attributes=attributes,
        category="fashion",
        query=query,
        product_category=product_category,
    )


def make_goal(
    name: str = "red cotton shirt",
    *,
    attributes: tuple[str, ...] = ("cotton", "machine wash"),
    goal_options: tuple[str, ...] | dict[str, str] = ("red", "large"),
    query: str = "shirt",
    product_category: str = CAT,
    price_upper: float = 30.0,
) -> Goal:
    return Goal(
        asin="B000GOAL01",
        category="fashion",
        query=query,
        name=name,
        product_category=product_category,
        instruction_text="i need a shirt",
        attributes=attributes,
        goal_options=goal_options,
        price_upper=price_upper,
    )


@pytest.fixture(autouse=True)
def word_nouns():
    """Every word of a name counts as a noun (restored to the built-in tagger afterwards)."""
    nouns.set_noun_tagger(lambda text: text.lower().split())
    yield
    nouns.set_noun_tagger(None)


def test_full_match_is_one():
    # cotton ~ "100% cotton" (token subset: 100), "machine wash" equal; red/large chosen; 20 <= 30.
    parts = compute_reward(make_product(), make_goal(), {"color": "red", "size": "large"})
    assert parts == RewardParts(
        reward=1.0,
        r_type=1.0,
        r_att=1.0,
        r_option=1.0,
        r_price=True,
        query_match=True,
        category_match=True,
        title_score=1.0,
    )


def test_wrong_price_and_price_argument():
    chosen = {"color": "red", "size": "large"}
    over = compute_reward(make_product(price=35.0), make_goal(), chosen)
    assert over.r_price is False
    assert over.reward == pytest.approx(4 / 5)  # (2 att + 2 opt + 0) / (2 + 2 + 1)
    # An explicit price wins over the product's own.
    assert compute_reward(make_product(price=35.0), make_goal(), chosen, price=30.0).r_price
    assert compute_reward(make_product(), make_goal(), chosen, price=30.01).reward == 0.8


def test_attribute_found_in_title_bullets_or_description():
    product = make_product(
        "Gluten Free Pasta",
        attributes=("DUMMY_ATTR",),
        bullets=("High protein: 12g", "Made in Italy"),
        description="Certified organic. Non-GMO durum.",
    )
    goal = make_goal(
        "gluten free pasta",
        attributes=("gluten free", "high protein", "non gmo", "Organic"),
        goal_options=(),
    )
    parts = compute_reward(product, goal, {})
    # "gluten free": lower(title); "high protein": lower(bullets); "non gmo" is not a substring
    # of "non-gmo"; "Organic" is compared as written against lower-cased text: no.
    assert parts.r_att == 0.5
    assert parts.r_option is None
    # Query and category match; title nouns {gluten, free, pasta} all shared -> r_type 1.0.
    assert parts.reward == pytest.approx(3 / 5)  # (2 + 0 + 1) / (4 + 0 + 1)


@pytest.mark.parametrize("source", ["title", "bullets", "description"])
def test_attribute_text_fallback_reads_each_source(source):
    # The attribute is in one text only, in capitals (the product's text is lower-cased, the
    # goal's is not); the product's attributes match nothing.
    texts = {"title": "Hooded Rain Jacket", "bullets": ("Two zip pockets", "Packable hood"),
             "description": "A light jacket for walks."}
    texts[source] = {"title": "Water Resistant Rain Jacket",
                     "bullets": ("Two zip pockets", "Fully WATER RESISTANT shell"),
                     "description": "A light, Water Resistant jacket for walks."}[source]
    product = make_product(texts["title"], attributes=("DUMMY_ATTR",), bullets=texts["bullets"],
                           description=texts["description"])
    goal = make_goal("rain jacket", attributes=("water resistant", "fleece lined"),
                     goal_options=())
    parts = compute_reward(product, goal, {})
    assert parts.r_att == 0.5  # "water resistant" found; "fleece lined" is nowhere
    # Nowhere at all: no match (the fallback does not match everything).
    bare = make_product("Hooded Rain Jacket", attributes=("DUMMY_ATTR",),
                        bullets=("Two zip pockets",), description="A light jacket.")
    assert compute_reward(bare, goal, {}).r_att == 0.0


def test_attribute_text_fallback_joins_bullets_with_spaces():
    # Split across two bullet points, the attribute is found in their space-joined text.
    product = make_product("Rain Jacket", attributes=("DUMMY_ATTR",),
                           bullets=("Fully water", "resistant shell"), description="")
    goal = make_goal("rain jacket", attributes=("water resistant",), goal_options=())
    assert compute_reward(product, goal, {}).r_att == 1.0


def test_attribute_matched_by_token_set_ratio():
    product = make_product(attributes=("long lasting fragrance", "pack of 3"))
    goal = make_goal(attributes=("long-lasting", "pack of 2", "travel size"), goal_options=())
    parts = compute_reward(product, goal, {})
    # "long lasting" is a token subset (100); "pack of 2" vs "pack of 3" scores 89 > 85;
    # "travel size" matches nothing and is not in the texts.
    assert parts.r_att == pytest.approx(2 / 3)
    assert parts.reward == pytest.approx(3 / 4)  # (2 + 0 + 1) / (3 + 0 + 1)


def test_token_set_ratio_values():
    # "of pack" vs "of pack 2" = 2*7/16 -> 88; "of pack 2" vs "of pack 3" = 2*8/18 -> 89.
    assert fuzzy_score("pack of 2", "pack of 3") == 89
    assert fuzzy_match("pack of 2", "pack of 3")
    # Shared "large": "large" vs "large x" = 2*5/12 -> 83, vs "large size" = 2*5/15 -> 67,
    # "large x" vs "large size" = 2*6/17 -> 71; the best, 83, is no match.
    assert fuzzy_score("x-large", "size large") == 83
    assert not fuzzy_match("x-large", "size large")
    assert fuzzy_score("large", "x-large") == 100  # token subset
    assert fuzzy_score("", "large") == 0
    assert fuzzy_score("!!", "large") == 0  # empty after processing
    assert fuzzy_score("Large", "large") == 100


def test_options_partially_chosen():
    goal = make_goal(goal_options=("navy", "x-large", "pack of 2"))
    parts = compute_reward(make_product(), goal, {"color": "navy blue", "size": "large"})
    # "navy blue" normalises to "blue" ('blue' comes before 'navy' in the colour list): no match
    # for "navy". "large" vs "x-large": token subset, 100. "pack of 2": nothing chosen.
    assert parts.r_option == pytest.approx(1 / 3)
    assert parts.r_att == 1.0
    assert parts.reward == pytest.approx(4 / 6)  # (2 + 1 + 1) / (2 + 3 + 1)


def test_colour_normalisation_quirks():
    assert normalize_color("monitor + stand") == "tan"
    assert normalize_color("lilac purple") == "lilac"
    assert normalize_color("white and grey") == "grey"
    assert normalize_color("dark red") == "dark"
    assert normalize_color("xl") == "xl"
    # Tuples (synthetic goals) only match a colour equal to one of their elements.
    assert normalize_color(("color", "red")) == "red"
    assert normalize_color(("color", "dark red")) == ("color", "dark red")

    goal = make_goal(attributes=("cotton",), goal_options=("tan", "purple", "white"))
    chosen = {"style": "monitor + stand", "color": "lilac purple", "trim": "white and grey"}
    parts = compute_reward(make_product(), goal, chosen)
    # Only "tan" matches (the chosen values became tan, lilac and grey).
    assert parts.r_option == pytest.approx(1 / 3)
    assert parts.reward == pytest.approx(3 / 5)  # (1 + 1 + 1) / (1 + 3 + 1)


def test_non_ascii_dropped_like_thefuzz():
    # thefuzz drops U+0080..U+00FF only; other characters go through its \W rule.
    assert fuzz_process("Crème Brûlée") == "crme brle"
    assert fuzz_process("Brand\u2122 caf\u00e9") == "brand  caf"  # ™ (U+2122) -> space
    assert fuzz_process("\u0142\u00f3d\u017a") == "\u0142d\u017a"  # ł, ź kept; ó dropped
    assert fuzz_process("under_score") == "under_score"  # '_' is a word character
    product = make_product(attributes=("crme brle",))
    goal = make_goal(attributes=("crème brûlée",), goal_options=("café",))
    parts = compute_reward(product, goal, {"flavor": "caf"})
    assert parts.r_att == 1.0
    assert parts.r_option == 1.0
    assert parts.reward == 1.0


def test_synthetic_goal_compares_group_and_value_as_text():
    goal = make_goal(attributes=("cotton",), goal_options={"color": "dark red", "size": "large"})
    parts = compute_reward(make_product(), goal, {"color": "red", "size": "x-large"})
    # ('color', 'dark red') -> "color dark red" contains "red": 100. ('size', 'large') ->
    # "size large" vs "x large": best ratio "large" vs "large x" = 83: no match.
    assert parts.r_option == 0.5
    assert parts.reward == pytest.approx(3 / 4)  # (1 + 1 + 1) / (1 + 2 + 1)

    # A value equal to a colour normalises; the chosen "dark red" becomes "dark": no match.
    goal = make_goal(attributes=("cotton",), goal_options={"color": "red"})
    assert compute_reward(make_product(), goal, {"color": "dark red"}).r_option == 0.0
    assert compute_reward(make_product(), goal, {"color": "red"}).r_option == 1.0


@pytest.mark.parametrize(
    ("bought", "wanted", "expected"),
    [
        ("A \u203a B \u203a C", "A \u203a X \u203a C", True),  # A and C
        ("A \u203a B", "A \u203a C", False),  # only A
        ("A\u203aB", "A \u203a B", True),  # segments are stripped
        ("A \u203a A \u203a B", "A \u203a C \u203a C", False),  # sets: only A
    ],
)
def test_category_match_needs_two_shared_segments(bought, wanted, expected):
    product = make_product("red cotton shirt", query="q1", product_category=bought)
    goal = make_goal("red cotton shirt", query="q2", product_category=wanted)
    assert compute_reward(product, goal, {}).category_match is expected


@pytest.mark.parametrize(
    ("bought", "goal_name", "same_query", "title_score", "r_type"),
    [
        # 2 of 3 goal nouns: > 0.2, enough on its own.
        ("glass coffee table", "wooden coffee table", False, 2 / 3, 1.0),
        # 1 of 5 = 0.2, not > 0.2, no query/category match: 0.5.
        ("coffee mug", "wooden coffee table desk lamp", False, 0.2, 0.5),
        # ... but the same query lifts it to 1.0.
        ("coffee mug", "wooden coffee table desk lamp", True, 0.2, 1.0),
        # 1 of 11 < 0.1: 0.1 even with the query matching.
        ("coffee mug", "a b c d e f g h i j coffee", True, 1 / 11, 0.1),
        # Nothing shared: 0.0 even with query and category matching.
        ("coffee mug", "wooden table", True, 0.0, 0.0),
    ],
)
def test_r_type_tiers(bought, goal_name, same_query, title_score, r_type):
    product = make_product(bought, product_category=OTHER_CAT if not same_query else CAT)
    goal = make_goal(goal_name, query="shirt" if same_query else "lamp")
    parts = compute_reward(product, goal, {"color": "red", "size": "large"})
    assert parts.query_match is same_query
    assert parts.category_match is same_query
    assert parts.title_score == pytest.approx(title_score)
    assert parts.r_type == r_type
    assert parts.reward == pytest.approx(r_type * 1.0)  # everything else matches


def test_goal_name_without_nouns_scores_point_two():
    nouns.set_noun_tagger(lambda text: [])
    product = make_product(query="other", product_category=OTHER_CAT)
    parts = compute_reward(product, make_goal(), {"color": "red", "size": "large"})
    assert parts.title_score == 0.2
    assert parts.r_type == 0.5  # 0.2 is not > 0.2 and nothing else matches
    assert parts.reward == 0.5


def test_title_score_denominator_counts_duplicates():
    parts = compute_reward(make_product("table"), make_goal("table table lamp"), {})
    # set(["table"]) & set(goal nouns) = {table}: 1, over 3 goal nouns.
    assert parts.title_score == pytest.approx(1 / 3)
    assert parts.r_type == 1.0  # query matches


def test_goal_without_options():
    goal = make_goal(attributes=("cotton", "silk"), goal_options=())
    parts = compute_reward(make_product(), goal, {"color": "red"})
    assert parts.r_option is None
    assert parts.r_att == 0.5
    assert parts.reward == pytest.approx(2 / 3)  # (1 + 0 + 1) / (2 + 0 + 1)


def test_non_positive_price_limit_and_no_attributes():
    goal = make_goal(attributes=(), goal_options=("red",), price_upper=0.0)
    parts = compute_reward(make_product(), goal, {"color": "red"})
    assert parts.r_price is None  # counted as 0 (the original would add None and fail)
    assert parts.r_att == 1.0  # nothing asked (the original would divide by zero)
    assert parts.reward == 0.5  # (0 + 1 + 0) / (0 + 1 + 1)


def test_reward_scaled_by_r_type():
    product = make_product("coffee mug", query="mug", product_category=OTHER_CAT)
    goal = make_goal("wooden coffee table desk lamp")
    parts = compute_reward(product, goal, {"color": "red"}, price=40.0)
    # r_type 0.5; (2 att + 1 opt + 0 price) / 5 = 0.6; times 0.5.
    assert parts.r_type == 0.5
    assert parts.reward == pytest.approx(0.3)


def test_as_dict_is_json_friendly():
    parts = compute_reward(make_product(), make_goal(), {"color": "red"})
    d = parts.as_dict()
    assert set(d) == {
        "reward", "r_type", "r_att", "r_option", "r_price",
        "query_match", "category_match", "title_score",
    }  # fmt: skip
    assert json.loads(json.dumps(d)) == d
    assert d["r_option"] == 0.5


# --------------------------------------------------------------------------- built-in tagger


def test_default_tagger_on_titles():
    nouns.set_noun_tagger(None)
    # spaCy (en_core_web_sm 3.8): every word NOUN/PROPN except 's, Large (ADJ), 2, punctuation.
    title = "Amazon Basics Women's Fleece Lined Leggings, Black, Large (2-Pack)"
    assert nouns.noun_tokens(title) == [
        "amazon", "basics", "women", "fleece", "lined", "leggings", "black", "pack",
    ]  # fmt: skip
    # Lower-case titles are tagged by grammar: organic and free are ADJ.
    assert nouns.noun_tokens("organic green tea bags, 100 count, caffeine free") == [
        "green", "tea", "bags", "count", "caffeine",
    ]  # fmt: skip
    assert nouns.noun_tokens("Lindt 70% Cocoa Dark Chocolate Bar, 3.5 oz (12 Pack)") == [
        "lindt", "%", "cocoa", "dark", "chocolate", "bar", "pack",
    ]  # fmt: skip
    assert nouns.noun_tokens("") == []


def test_default_tagger_title_score():
    nouns.set_noun_tagger(None)
    product = make_product("Rustic Wooden Coffee Table for Living Room, Brown")
    goal = make_goal("Glass Coffee Table with Storage Shelf")
    # goal nouns: glass, coffee, table, storage, shelf; shared: coffee, table.
    assert compute_reward(product, goal, {}).title_score == pytest.approx(2 / 5)


def test_tagger_is_pluggable():
    nouns.set_noun_tagger(lambda text: ["x"])
    assert nouns.noun_tokens("anything") == ["x"]
    nouns.set_noun_tagger(None)
    assert nouns.noun_tokens("Coffee Table") == ["coffee", "table"]
    switched = nouns.use_spacy()
    try:
        assert isinstance(switched, bool)
        if not switched:  # no spaCy here: the built-in tagger stays
            assert nouns.noun_tokens("Coffee Table") == ["coffee", "table"]
    finally:
        nouns.set_noun_tagger(None)


def test_a_price_limit_below_one_dollar_is_still_a_limit():
    goal = make_goal(price_upper=0.5)
    assert compute_reward(make_product(price=0.3), goal, {}).r_price is True
    assert compute_reward(make_product(price=0.7), goal, {}).r_price is False


@pytest.mark.parametrize(("same_query", "same_category"), [(True, False), (False, True)])
def test_query_or_category_alone_keeps_r_type_at_one(same_query, same_category):
    # title_score 1/5 = 0.2 is not enough on its own; either match alone lifts r_type to 1.0.
    product = make_product(
        "coffee mug",
        query="shirt" if same_query else "mug",
        product_category=CAT if same_category else OTHER_CAT,
    )
    parts = compute_reward(product, make_goal("wooden coffee table desk lamp"), {})
    assert (parts.query_match, parts.category_match) == (same_query, same_category)
    assert parts.title_score == pytest.approx(0.2)
    assert parts.r_type == 1.0


def test_title_score_of_exactly_one_tenth_is_not_penalised():
    # 1 of 10 goal nouns: not < 0.1, so the query match keeps r_type at 1.0.
    parts = compute_reward(make_product("coffee mug"), make_goal("a b c d e f g h i coffee"), {})
    assert parts.title_score == pytest.approx(0.1)
    assert parts.r_type == 1.0


def test_category_segments_of_several_words_match_whole():
    cat = "Beauty & Personal Care \u203a Hair Care \u203a Shampoo"
    product = make_product(query="q1", product_category=cat)
    goal = make_goal(query="q2", product_category=cat)
    assert compute_reward(product, goal, {}).category_match is True


def test_token_set_ratio_with_several_tokens_of_its_own_on_each_side():
    # Shared "shirt"; each side's own tokens follow it, sorted and space-separated:
    # "shirt cotton red" vs "shirt blue linen": difflib matches "shirt " and two single
    # letters, 8 characters each side of 16 -> 2*8/32 = 50, above "shirt" vs either side
    # (2*5/21 -> 48).
    assert fuzzy_score("red cotton shirt", "blue linen shirt") == 50
    # Nothing in common at all: 0 (an empty shared part scores 0 against anything).
    assert fuzzy_score("a", "b") == 0
    assert fuzzy_score("red", "blue") == 29  # "red" vs "blue": 2*1/7 -> 29 ("e")
