"""Product search: BM25 scored as Lucene scores it, on bm25s.

The index is bm25s's (precomputed per-posting BM25 scores); queries run on a compiled kernel
(:mod:`gagpo.servers.webshop.topk`). Lucene's parameters as the original's pyserini index used
them: k1 = 0.9, b = 0.4, the English
analyzer (lower case, possessive ``'s`` removed, Lucene's 33 English stopwords, Porter
stemming). One document per product: ``lower(Title + Description + first bullet + option
texts)``. Hits with score 0 are dropped (bm25s returns k documents even for unknown words);
ties are broken by catalog order, as Lucene breaks them by document id.

The index is built once per catalog content (its fingerprint) and cached on disk, then loaded
memory-mapped, so a 1.2M-product catalog opens in milliseconds.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from gagpo.common.cache import build_once, cache_dir
from gagpo.servers.lru import BoundedLRU, bounded_cache
from gagpo.servers.webshop.catalog import Catalog
from gagpo.servers.webshop.topk import top_k

TOP_K = 50
K1, B = 0.9, 0.4
INDEX_VERSION = 1
# Lucene's EnglishAnalyzer default stop set.
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with".split()
)
# Words, numbers with inner dots ("60.00") and inner apostrophes ("men's"), like Lucene's
# StandardTokenizer keeps them; single characters ("8 oz", "x") are kept too.
_TOKEN = re.compile(r"[0-9a-z]+(?:['.][0-9a-z]+)*")
_stemmers = threading.local()
STEM_CACHE_ENTRIES = 1 << 16
STEM_CACHE_BYTES = 16 << 20
"""Query words are the client's to choose: the stemmer's memo is bounded by bytes too."""
SEARCH_CACHE_BYTES = 32 << 20


def _stemmer() -> Stemmer.Stemmer:
    """This thread's Porter stemmer (Lucene's PorterStemFilter, not Porter2). PyStemmer's
    instances must not be shared between threads, and their own word cache (10,000 words of
    any length by default) is turned off: ours below is bounded by bytes."""
    stemmer = getattr(_stemmers, "stemmer", None)
    if stemmer is None:
        stemmer = _stemmers.stemmer = Stemmer.Stemmer("porter", 0)
    return stemmer


@bounded_cache(STEM_CACHE_ENTRIES, STEM_CACHE_BYTES)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def analyze(text: str, stem: Callable[[str], str] = _stem) -> list[str]:
    """Lucene-style English analysis of ``text`` into index terms."""
    terms = []
    for token in _TOKEN.findall(text.lower()):
        if token.endswith("'s"):
            token = token[:-2]
        if token and token not in LUCENE_STOPWORDS:
            terms.append(stem(token))
    return terms


def _build_index(catalog: Catalog, out: Path) -> None:
    vocab: dict[str, int] = {}
    docs: list[list[int]] = []
    # The catalog's own words: a plain memo for this build (freed after it) is faster than
    # the shared bounded one and cannot grow past the catalog's vocabulary.
    stems: dict[str, str] = {}
    stemmer = Stemmer.Stemmer("porter", 0)

    def stem(word: str) -> str:
        s = stems.get(word)
        if s is None:
            s = stems[word] = stemmer.stemWord(word)
        return s

    for product in catalog.products:
        ids = []
        for term in analyze(product.search_text, stem):
            i = vocab.get(term)
            if i is None:
                i = vocab[term] = len(vocab)
            ids.append(i)
        docs.append(ids)
    retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
    retriever.index((docs, vocab), show_progress=len(docs) > 50_000)
    retriever.save(str(out), show_progress=False)
    (out / "gagpo.json").write_text(
        json.dumps({"version": INDEX_VERSION, "n": len(catalog), "fp": catalog.fingerprint})
    )


class SearchEngine:
    """Top-50 BM25 search over a catalog; returns catalog positions, best first."""

    def __init__(
        self,
        catalog: Catalog,
        index_dir: Path | None = None,
        cache_size: int = 4096,
        cache_bytes: int = SEARCH_CACHE_BYTES,
    ):
        self.catalog = catalog
        if len(catalog) == 0:
            raise ValueError("cannot search an empty catalog")
        if index_dir is None:
            index_dir = cache_dir() / "index" / f"bm25-v{INDEX_VERSION}-{catalog.fingerprint}"
        self.index_dir = build_once(Path(index_dir), lambda out: _build_index(catalog, out))
        self.retriever = bm25s.BM25.load(str(self.index_dir), mmap=True, show_progress=False)
        self.vocab: dict[str, int] = self.retriever.vocab_dict
        # Results of recent queries, bounded by bytes as well (queries are the client's).
        self._cache: BoundedLRU[str, tuple[int, ...]] = BoundedLRU(cache_size, cache_bytes)
        self._local = threading.local()
        self._search("warm up", 1)  # compiles (or loads the cached) kernel now, not mid-episode

    def search(self, query: str | Sequence[str], k: int = TOP_K) -> tuple[int, ...]:
        """Catalog positions of the best ``k`` products for ``query`` (words or a string)."""
        text = query if isinstance(query, str) else " ".join(query)
        key = f"{k}\x00{text}"
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        result = self._search(text, k)
        self._cache.put(key, result)
        return result

    def _search(self, text: str, k: int) -> tuple[int, ...]:
        ids = np.asarray([self.vocab[t] for t in analyze(text) if t in self.vocab], np.int64)
        if len(ids) == 0 or k <= 0:
            return ()
        index = self.retriever.scores
        acc, touched = self._buffers()
        docs, _ = top_k(index["indptr"], index["indices"], index["data"], ids, k, acc, touched)
        return tuple(int(d) for d in docs)

    def _buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """This thread's scratch buffers for :func:`top_k` (served shops search from several
        threads at once)."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            n = len(self.catalog)
            buffers = self._local.buffers = (np.zeros(n, np.float32), np.zeros(n, np.int32))
        return buffers
