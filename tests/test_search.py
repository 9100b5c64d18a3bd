"""Search: Lucene's BM25 (k1 0.9, b 0.4, English analysis), top 50, cached index."""

import math
from collections import Counter

import pytest

from gagpo.servers.webshop.catalog import Catalog
from gagpo.servers.webshop.product import Product
from gagpo.servers.webshop.search import K1, B, SearchEngine, analyze

WORDS = ("shoe running red blue coffee dark roast mug ceramic sofa leather chair desk lamp "
         "cable charger wireless headphones case phone").split()


def _product(i: int, text: str) -> Product:
    return Product(
        asin=f"B{i:09d}", title=text, description="", bullet_points=(), pricing=(1.0,),
        price_tag="$1.0", price=1.0, options={}, attributes=("DUMMY_ATTR",), category="x",
        query="q", product_category="",
    )


def _catalog(texts, fingerprint):
    return Catalog([_product(i, t) for i, t in enumerate(texts)], fingerprint=fingerprint)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path))


def test_analyzer_is_lucene_english():
    assert analyze("The Men's Running Shoes, size 8 x 60.00 for a walk") == [
        "men", "run", "shoe", "size", "8", "x", "60.00", "walk"]
    assert analyze("and or the of") == []


def lucene_scores(docs: list[list[str]], query: list[str]) -> list[float]:
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in set(query):
            if tf[t] == 0:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * tf[t] / (tf[t] + K1 * (1 - B + B * len(d) / avgdl))
        scores.append(s)
    return scores


def test_ranking_equals_lucene_bm25_formula():
    import random

    rng = random.Random(0)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(3, 30))) for _ in range(300)]
    engine = SearchEngine(_catalog(texts, "rank"))
    for query in ["red running shoe", "dark roast coffee mug", "wireless phone charger case"]:
        expected = lucene_scores([analyze(t) for t in texts], analyze(query))
        order = sorted((i for i, s in enumerate(expected) if s > 0),
                       key=lambda i: (-round(expected[i], 4), i))[:50]
        got = list(engine.search(query))
        assert len(got) == min(50, len(order))
        # float32 scores: compare the ranked scores, and the exact order where scores differ
        assert [round(expected[i], 3) for i in got] == [round(expected[i], 3) for i in order]


def test_no_match_ties_and_keywords_list():
    engine = SearchEngine(_catalog(["red shoe", "blue shoe", "red shoe", "lamp"], "ties"))
    assert engine.search("zebra unicorn") == ()
    assert engine.search("the of and") == ()
    assert engine.search("red shoe") == (0, 2, 1)  # equal scores: catalog order, like Lucene
    assert engine.search(["red", "shoe"]) == (0, 2, 1)
    assert engine.search("shoe", k=1) == (0,)


def test_index_is_built_once_per_catalog_content(tmp_path):
    cat = _catalog(["red shoe", "blue lamp"], "fp1")
    first = SearchEngine(cat)
    stamp = (first.index_dir / "gagpo.json").stat().st_mtime_ns
    second = SearchEngine(_catalog(["red shoe", "blue lamp"], "fp1"))
    assert second.index_dir == first.index_dir
    assert (second.index_dir / "gagpo.json").stat().st_mtime_ns == stamp
    other = SearchEngine(_catalog(["green sofa"], "fp2"))
    assert other.index_dir != first.index_dir
    assert other.search("sofa") == (0,) and second.search("lamp") == (1,)
