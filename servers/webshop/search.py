"""Product search: BM25 scored as Lucene scores it, on bm25s.

The index is bm25s's (precomputed per-posting BM25 scores); queries run on a compiled kernel
(:mod:`servers.webshop.topk`). Lucene's parameters as the original's pyserini index used
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
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from servers.cache import build_once, cache_dir
from servers.webshop.catalog import Catalog
from servers.webshop.topk import top_k

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
_stemmer = Stemmer.Stemmer("porter")  # Lucene's PorterStemFilter (not Porter2)


@lru_cache(maxsize=1 << 18)
def _stem(word: str) -> str:
    return _stemmer.stemWord(word)


def analyze(text: str) -> list[str]:
    """Lucene-style English analysis of ``text`` into index terms."""
    terms = []
    for token in _TOKEN.findall(text.lower()):
        if token.endswith("'s"):
            token = token[:-2]
        if token and token not in LUCENE_STOPWORDS:
            terms.append(_stem(token))
    return terms


def _build_index(catalog: Catalog, out: Path) -> None:
    vocab: dict[str, int] = {}
    docs: list[list[int]] = []
    for product in catalog.products:
        ids = []
        for term in analyze(product.search_text):
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

    def __init__(self, catalog: Catalog, index_dir: Path | None = None, cache_size: int = 4096):
        self.catalog = catalog
        if len(catalog) == 0:
            raise ValueError("cannot search an empty catalog")
        if index_dir is None:
            index_dir = cache_dir() / "index" / f"bm25-v{INDEX_VERSION}-{catalog.fingerprint}"
        self.index_dir = build_once(Path(index_dir), lambda out: _build_index(catalog, out))
        self.retriever = bm25s.BM25.load(str(self.index_dir), mmap=True, show_progress=False)
        self.vocab: dict[str, int] = self.retriever.vocab_dict
        self._cache: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # served shops search from several threads
        self._local = threading.local()
        self._search("warm up", 1)  # compiles (or loads the cached) kernel now, not mid-episode

    def search(self, query: str | Sequence[str], k: int = TOP_K) -> tuple[int, ...]:
        """Catalog positions of the best ``k`` products for ``query`` (words or a string)."""
        text = query if isinstance(query, str) else " ".join(query)
        key = f"{k}\x00{text}"
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        result = self._search(text, k)
        with self._lock:
            self._cache[key] = result
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
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
