"""Tests of the generated catalog: format, determinism, loader round trip, solvability and
hardness (servers/webshop/generator/families.py, servers/webshop/generator/vocab.py)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from gagpo.servers.webshop.catalog import load_catalog
from gagpo.servers.webshop.generator import families, vocab
from gagpo.servers.webshop.generator.families import GeneratorConfig, generate, write_catalog
from gagpo.servers.webshop.goals import build_goals
from gagpo.servers.webshop.product import parse_pricing

N = 1000
PRICE_RE = re.compile(r"^\$\d+\.\d\d( - \$\d+\.\d\d)?$")
ASIN_RE = re.compile(r"^B0[0-9A-Z]{8}$")
RECORD_FIELDS = {
    "asin": str,
    "name": str,
    "full_description": str,
    "small_description": list,
    "images": list,
    "category": str,
    "query": str,
    "product_category": str,
}


@pytest.fixture(scope="module")
def catalog_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("catalog")
    write_catalog(directory, N, seed=0)
    return directory


@pytest.fixture(scope="module")
def files(catalog_dir: Path) -> dict[str, object]:
    return {
        stem: json.loads((catalog_dir / f"{stem}.json").read_text(encoding="utf-8"))
        for stem in families.FILES
    }


@pytest.fixture(scope="module")
def catalog(catalog_dir: Path):
    return load_catalog(catalog_dir)


@pytest.fixture(scope="module")
def human_goals(catalog):
    return build_goals(catalog, "human")


def _bytes(directory: Path) -> dict[str, bytes]:
    return {stem: (directory / f"{stem}.json").read_bytes() for stem in families.FILES}


def _type_of_query() -> dict[str, families._Type]:
    types = {}
    for category_types in families.TYPES.values():
        for t in category_types:
            for q in t.spec.queries:
                assert q.text not in types, f"query {q.text!r} used by two product types"
                types[q.text] = t
    return types


# --- determinism ------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_catalog(a, 300, seed=7)
    write_catalog(b, 300, seed=7)
    write_catalog(c, 300, seed=8)
    assert _bytes(a) == _bytes(b)
    assert all(_bytes(a)[s] != _bytes(c)[s] for s in families.FILES)


def test_workers_do_not_change_the_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(families, "CHUNK_PRODUCTS", 60)  # several chunks in flight
    write_catalog(tmp_path / "one", 400, seed=3, workers=1)
    write_catalog(tmp_path / "two", 400, seed=3, workers=2)
    assert _bytes(tmp_path / "one") == _bytes(tmp_path / "two")


def test_generate_yields_what_write_catalog_writes(files: dict) -> None:
    products = list(generate(N, seed=0))
    assert [p.record for p in products] == files["items_shuffle"]
    assert {p.record["asin"]: p.ins_v2 for p in products} == files["items_ins_v2"]
    assert {p.record["asin"]: p.human for p in products if p.human} == files["items_human_ins"]


def test_fast_encoder_is_byte_identical_to_json_dumps() -> None:
    assert families._FAST_JSON, "vocabulary gained characters that need JSON escaping"
    for p in generate(500, seed=11):
        assert families._encode_fast(p) == families._encode_json(p)


def test_empty_catalog_is_valid_json(tmp_path: Path) -> None:
    paths = write_catalog(tmp_path, 0)
    assert json.loads(paths["items_shuffle"].read_text()) == []
    assert json.loads(paths["items_ins_v2"].read_text()) == {}
    assert json.loads(paths["items_human_ins"].read_text()) == {}


def test_progress_callable_and_bar(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    write_catalog(tmp_path / "a", 150, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (150, 150)

    class Bar:
        n = 0
        total = 150

        def update(self, k: int) -> None:
            self.n += k

    bar = Bar()
    write_catalog(tmp_path / "b", 150, progress=bar)
    assert bar.n == 150
    assert not list(tmp_path.glob("*/.*.tmp")), "temporary files left behind"


# --- format -------------------------------------------------------------------------------------


def test_records_have_the_original_fields_and_types(files: dict) -> None:
    records = files["items_shuffle"]
    assert len(records) == N
    asins = [r["asin"] for r in records]
    assert len(set(asins)) == N
    for r in records:
        for name, kind in RECORD_FIELDS.items():
            assert isinstance(r[name], kind), (name, r[name])
        assert ASIN_RE.match(r["asin"])
        assert r["category"] in vocab.CATEGORIES
        assert r["query"] == r["query"].lower().strip()
        assert r["product_category"].count(" \u203a ") >= 2
        assert 3 <= len(r["small_description"]) <= 6
        assert all(isinstance(b, str) and b for b in r["small_description"])
        assert 1 <= len(r["images"]) <= 5
        assert all(u.startswith("https://") and u.endswith(".jpg") for u in r["images"])
        sentences = re.findall(r"[.!?](?:\s|$)", r["full_description"])
        assert 2 <= len(sentences) <= 5, r["full_description"]
        pricing = r["pricing"]
        assert pricing is None or PRICE_RE.match(pricing), pricing
        options = r["customization_options"]
        assert options is None or (isinstance(options, dict) and options)
        for values in (options or {}).values():
            assert len(values) >= 2
            for v in values:
                assert set(v) == {"value", "image"}
                assert isinstance(v["value"], str) and "/" not in v["value"]
                assert v["image"] is None or v["image"].startswith("https://")
    ranges = sum(" - " in (r["pricing"] or "") for r in records)
    nulls = sum(r["pricing"] is None for r in records)
    assert 0 < ranges < N * 0.3 and nulls < N * 0.05


def test_attribute_files_match_the_records(files: dict) -> None:
    asins = {r["asin"] for r in files["items_shuffle"]}
    ins_v2, human = files["items_ins_v2"], files["items_human_ins"]
    assert set(ins_v2) == asins
    for entry in ins_v2.values():
        assert set(entry) == {"attributes", "instruction", "instruction_attributes"}
        assert 2 <= len(entry["attributes"]) <= 6
        assert len(set(entry["attributes"])) == len(entry["attributes"])
        assert entry["instruction"].startswith(vocab.SYNTHETIC_OPENERS)
        assert entry["instruction_attributes"]
        assert set(entry["instruction_attributes"]) <= set(entry["attributes"])
    assert set(human) <= asins
    for asin, entries in human.items():
        for h in entries:
            assert h["asin"] == asin
            assert (
                isinstance(h["instruction"], str) and h["instruction"] == h["instruction"].lower()
            )
            assert h["instruction_attributes"]
            assert set(h["instruction_attributes"]) <= set(ins_v2[asin]["attributes"])
            assert all(isinstance(o, str) for o in h["instruction_options"])


def test_pricing_parses_like_the_original(files: dict, catalog) -> None:
    for r in files["items_shuffle"]:
        prices, tag = parse_pricing(r["pricing"])
        if r["pricing"] is None:
            assert prices == (100.0,)
        else:
            assert 0 < prices[0] < 2000 and (len(prices) == 1 or prices[0] < prices[1])
    # A few products cost 980 or more (their goals get no price limit, as in the original).
    assert sum(p.price < 980 for p in catalog.products) > 0.97 * N


def test_all_five_categories_even_in_a_small_catalog() -> None:
    counts = Counter(p.record["category"] for p in generate(120, seed=5))
    assert set(counts) == set(vocab.CATEGORIES)
    big = Counter(p.record["category"] for p in generate(N, seed=0))
    assert min(big.values()) > N / 5 * 0.6


# --- loader round trip and goals ----------------------------------------------------------------


def test_loader_reads_every_product(catalog, files: dict) -> None:
    assert len(catalog) == N
    assert [p.asin for p in catalog.products] == [r["asin"] for r in files["items_shuffle"]]
    assert all(p.attributes != ("DUMMY_ATTR",) for p in catalog.products)
    assert sum(bool(p.options) for p in catalog.products) > N * 0.6


def test_goal_counts(catalog, human_goals) -> None:
    assert len(human_goals) >= 1.5 * N  # test 500 + eval 1000 + some train
    synthetic = build_goals(catalog, "synthetic")
    assert 5 * N <= len(synthetic) <= 30 * N, len(synthetic)


def test_every_human_instruction_is_solvable(catalog, human_goals) -> None:
    no_options = 0
    for goal in human_goals:
        product = catalog.get(goal.asin)
        assert product is not None
        assert goal.attributes and set(goal.attributes) <= set(product.attributes)
        groups_used = []
        for option in goal.goal_options:
            groups = [g for g, values in product.options.items() if option in values]
            assert groups, (option, product.options)
            groups_used.append(groups[0])
        assert len(groups_used) == len(set(groups_used)), "two values of one option group"
        assert product.price <= goal.price_upper
        no_options += not goal.goal_options
    # Some goals name no option (only those can be won by buying without choosing options).
    assert 0.05 * len(human_goals) < no_options < 0.5 * len(human_goals)


def test_every_synthetic_goal_is_solvable(catalog) -> None:
    for goal in build_goals(catalog, "synthetic"):
        product = catalog.get(goal.asin)
        assert set(goal.attributes) <= set(product.attributes)
        assert set(goal.goal_options) == set(product.options)
        assert all(v in product.options[k] for k, v in goal.goal_options.items())


# --- hardness -------------------------------------------------------------------------------------


def test_goal_products_have_look_alikes(catalog, human_goals) -> None:
    by_query: dict[str, list] = defaultdict(list)
    for p in catalog.products:
        by_query[p.query].append(p)
    shared = distractor = 0
    for goal in human_goals:
        product = catalog.get(goal.asin)
        others = [p for p in by_query[product.query] if p.asin != product.asin]
        shared += len(others) >= 3
        # A distractor shares some of the product's attributes but lacks an asked one.
        distractor += any(
            set(p.attributes) & set(product.attributes)
            and not set(goal.attributes) <= set(p.attributes)
            for p in others
        )
    assert shared >= 0.95 * len(human_goals)
    assert distractor >= 0.8 * len(human_goals)


def test_search_often_misses_the_goal(catalog, human_goals, tmp_path: Path) -> None:
    from gagpo.servers.webshop.search import SearchEngine

    engine = SearchEngine(catalog, index_dir=tmp_path / "index")
    test_goals = human_goals[:500]
    first = sum(
        bool(hits := engine.search(g.instruction_text)) and catalog.products[hits[0]].asin == g.asin
        for g in test_goals
    )
    assert first < 0.5 * len(test_goals), first


def test_texts_never_name_attributes_the_product_lacks(files: dict) -> None:
    """The reward credits a goal attribute found as a substring of the bought product's text,
    so a product must not name, word for word, a type attribute it does not have."""
    types = _type_of_query()
    ins_v2 = files["items_ins_v2"]
    decoyed = 0
    for r in files["items_shuffle"]:
        t = types[r["query"]]
        own = set(ins_v2[r["asin"]]["attributes"])
        assert own <= set(t.attributes)
        texts = [
            r["name"].lower(),
            " ".join(r["small_description"]).lower(),
            r["full_description"].lower(),
        ]
        for a in t.attributes:
            if a not in own:
                assert not any(a in text for text in texts), (a, r["asin"], texts)
        decoyed += any(t.text[a][1] in text for a in t.spelled - own for text in texts)
    assert decoyed > N * 0.3  # decoys (other spellings of lacked attributes) are common


def test_knobs_change_the_catalog() -> None:
    easy = GeneratorConfig(decoy_mentions=0.0, attribute_visibility=1.0, surface_variation=0.0)
    assert [p.record for p in generate(50, 0, easy)] != [p.record for p in generate(50, 0)]
    flat = GeneratorConfig(max_option_combinations=4)
    for p in generate(200, 0, flat):
        combos = 1
        for values in (p.record["customization_options"] or {}).values():
            combos *= len(values)
        assert combos <= 4
    with pytest.raises(ValueError):
        GeneratorConfig(family_size=(5, 2))


# --- vocabulary ----------------------------------------------------------------------------


def test_vocabulary_attributes_are_distinct_within_a_type() -> None:
    fuzz = pytest.importorskip("rapidfuzz.fuzz")
    utils = pytest.importorskip("rapidfuzz.utils")
    for category_types in families.TYPES.values():
        for t in category_types:
            attrs = t.attributes
            assert len(set(attrs)) == len(attrs) >= 8, t.spec.nouns
            for a in attrs:
                assert a in vocab.BLURBS and a == a.lower()
                variant = t.text[a][1]
                assert a not in variant or variant == a
                for b in attrs:
                    if a == b:
                        continue
                    assert a not in b, (a, b)
                    assert a not in t.text[b][1], (a, t.text[b][1])
                    score = fuzz.token_set_ratio(a, b, processor=utils.default_process)
                    assert score <= 85, (a, b, score)


def test_generic_texts_never_contain_an_attribute() -> None:
    for category, category_types in families.TYPES.items():
        generic = [*vocab.CLOSERS[category], *vocab.INTROS]
        for t in category_types:
            spec = t.spec
            texts = [*spec.facts, *spec.tails, *spec.words, *spec.title_nouns]
            texts += [vocab.BLURBS[a] for a in t.attributes] + generic
            for text in texts:
                for a in t.attributes:
                    assert a not in text.lower(), (a, text)


def test_option_values_load_unchanged() -> None:
    for category_types in families.TYPES.values():
        for t in category_types:
            for group in t.spec.options:
                assert len(set(group.values)) == len(group.values)
                for v in group.values:
                    assert v == v.strip() and "/" not in v
                assert group.kind in vocab.OPTION_PHRASES
