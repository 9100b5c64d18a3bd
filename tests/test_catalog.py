"""A small catalog in the original WebShop file format loads into the products and goals that
webshop.md describes."""

import dataclasses
import json
import random

import pytest

from gagpo.servers.webshop.catalog import load_catalog
from gagpo.servers.webshop.goals import NO_PRICE_LIMIT, build_goals, split_range
from gagpo.servers.webshop.product import parse_pricing

RECORDS = [
    {
        "asin": "B000000001", "name": "Acme Red Running Shoe",
        "full_description": "A light shoe.", "small_description": ["Breathable mesh", "Rubber"],
        "pricing": "$25.99", "images": ["http://img/1.jpg"], "category": "fashion",
        "query": " Running Shoes ", "product_category": "Clothing › Men › Shoes",
        "customization_options": {
            "Size": [{"value": "8", "image": None}, {"value": "9 ", "image": None}],
            "Color": [{"value": "Black/White", "image": "x"}],
        },
        "extra_key": "ignored",
    },
    {"asin": "nan", "name": "skipped: nan asin", "pricing": None, "images": [],
     "category": "food", "query": "q", "product_category": "", "full_description": "",
     "small_description": [], "customization_options": None},
    {"asin": "B0000000010X", "name": "skipped: asin longer than 10", "pricing": None,
     "images": [], "category": "food", "query": "q", "product_category": "",
     "full_description": "", "small_description": [], "customization_options": None},
    {
        "asin": "B000000002", "name": "Tasty Coffee Beans", "full_description": "Dark roast.",
        "small_description": "One bullet as a string", "pricing": "$10.00 - $20.00",
        "images": [], "category": "food", "query": "coffee",
        "product_category": "Grocery › Coffee", "customization_options": None,
    },
    {"asin": "B000000001", "name": "skipped: duplicate", "pricing": "$1", "images": [],
     "category": "food", "query": "q", "product_category": "", "full_description": "",
     "small_description": [], "customization_options": None},
    {
        "asin": "B000000003", "name": "Plain Mug", "full_description": "", "small_description": [],
        "pricing": None, "images": [], "category": "furniture", "query": "mug",
        "product_category": "Home › Kitchen", "customization_options": None,
    },
    {
        "asin": "B000000004", "name": "Luxury Sofa", "full_description": "Big.",
        "small_description": [], "pricing": "$985.00", "images": [], "category": "furniture",
        "query": "sofa", "product_category": "Home › Living", "customization_options": None,
    },
]
INS_V2 = {
    "B000000001": {"attributes": ["lace closure", "rubber sole"], "instruction": "i want shoes",
                   "instruction_attributes": ["rubber sole"]},
    "B000000002": {"attributes": ["dark roast"], "instruction": None,
                   "instruction_attributes": []},
}
HUMAN = {
    "B000000001": [
        {"instruction": "i need running shoes with a rubber sole.",
         "instruction_attributes": ["rubber sole"], "instruction_options": ["9"]},
        {"instruction": "skipped: no attributes", "instruction_attributes": [],
         "instruction_options": []},
    ],
    "B000000002": [
        {"instruction": "dark roast coffee. Flavored.", "instruction_attributes": ["dark roast"],
         "instruction_options": []},
    ],
    "B000000004": [
        {"instruction": "a luxury sofa", "instruction_attributes": ["big"],
         "instruction_options": []},
    ],
}


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture()
def catalog_dir(tmp_path):
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(RECORDS))
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(INS_V2))
    (tmp_path / "items_human_ins.json").write_text(json.dumps(HUMAN))
    return tmp_path


def test_products_follow_the_original_loader(catalog_dir):
    cat = load_catalog(catalog_dir)
    assert [p.asin for p in cat.products] == [
        "B000000001", "B000000002", "B000000003", "B000000004"]
    shoe, coffee, mug, sofa = cat.products
    assert shoe.title == "Acme Red Running Shoe"
    assert shoe.query == "running shoes"
    assert shoe.price_tag == "$25.99" and shoe.price == 25.99
    assert shoe.options == {"size": ("8", "9"), "color": ("black | white",)}
    assert shoe.attributes == ("lace closure", "rubber sole")
    assert shoe.bullet_points == ("Breathable mesh", "Rubber")
    assert coffee.bullet_points == ("One bullet as a string",)
    assert coffee.price_tag == "$10.0 to $20.0" and coffee.pricing == (10.0, 20.0)
    assert 10.0 <= coffee.price <= 20.0
    assert mug.price_tag == "$100.0" and mug.attributes == ("DUMMY_ATTR",)
    assert shoe.search_text.startswith("acme red running shoe a light shoe. breathable mesh")
    assert shoe.search_text.endswith("8 9 black | white")
    assert cat.get("b000000001") == shoe and cat.get("B999999999") is None


def test_human_goals_order_price_and_quirks(catalog_dir):
    cat = load_catalog(catalog_dir)
    goals = build_goals(cat, "human")
    built = ["B000000001", "B000000002", "B000000004"]  # load order, empty-attribute one skipped
    order = list(range(3))
    random.Random(233).shuffle(order)
    assert [g.asin for g in goals] == [built[i] for i in order]
    by_asin = {g.asin: g for g in goals}
    shoe = by_asin["B000000001"]
    # U: two of the first four multiples of 10 above 25.99, the larger kept.
    assert shoe.price_upper in (40.0, 50.0, 60.0)
    assert shoe.instruction_text == (
        f"i need running shoes with a rubber sole, and price lower than {shoe.price_upper:.2f}"
        " dollars")
    assert shoe.goal_options == ("9",) and shoe.attributes == ("rubber sole",)
    # strip('.') keeps an inner ". " (the original's quirk).
    assert by_asin["B000000002"].instruction_text.startswith("dark roast coffee. Flavored, and")
    # 980 or more: no price limit and no price clause.
    sofa = by_asin["B000000004"]
    assert sofa.price_upper == NO_PRICE_LIMIT and sofa.instruction_text == "a luxury sofa"
    # Seeded: the same goals in every build (the original's were not); the second build
    # reads the saved list.
    again = build_goals(load_catalog(catalog_dir), "human")
    assert [dataclasses.astuple(g) for g in again] == [dataclasses.astuple(g) for g in goals]


def test_synthetic_goals_enumerate_option_combinations(catalog_dir):
    goals = build_goals(load_catalog(catalog_dir), "synthetic")
    assert len(goals) == 2  # shoe: size {8, 9} x color {black | white}
    texts = sorted(g.instruction_text.split(", and price")[0] for g in goals)
    assert texts == ["i want shoes with color: black | white, and size: 8",
                     "i want shoes with color: black | white, and size: 9"]
    assert all(isinstance(g.goal_options, dict) for g in goals)
    assert goals[0].weight == pytest.approx(0.5)  # mean of 1/count(attribute)


def test_store_is_built_once_and_read_lazily(catalog_dir):
    first = load_catalog(catalog_dir)
    store = first.products.directory
    stamp = (store / "products.bin").stat().st_mtime_ns
    again = load_catalog(catalog_dir)
    assert again.products.directory == store and again.fingerprint == first.fingerprint
    assert (store / "products.bin").stat().st_mtime_ns == stamp
    assert list(again.products) == list(first.products)
    assert again.products[-1].asin == "B000000004" and again.products[1:3][0].asin == "B000000002"
    with pytest.raises(IndexError):
        again.products[4]
    assert again.position("B000000003") == 2 and again.position("xyz") is None
    assert again.get("") is None and again.get("b00000000\u00e9") is None
    (catalog_dir / "items_human_ins.json").write_text("{}")  # new content, new store
    assert load_catalog(catalog_dir).fingerprint != first.fingerprint


def test_num_products_and_missing_files(catalog_dir, tmp_path_factory):
    assert len(load_catalog(catalog_dir, num_products=4)) == 2  # nan and long asin skipped
    with pytest.raises(FileNotFoundError):
        load_catalog(tmp_path_factory.mktemp("empty"))


def test_splits_and_pricing():
    assert split_range("test", 2000) == range(0, 500)
    assert split_range("eval", 2000) == range(500, 1500)
    assert split_range("train", 2000) == range(1500, 2000)
    assert split_range("eval", 700) == range(500, 700)
    with pytest.raises(ValueError):
        split_range("dev", 10)
    assert parse_pricing("$1,299.00") == ((1299.0,), "$1299.0")
    assert parse_pricing("") == ((100.0,), "$100.0")
