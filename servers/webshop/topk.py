"""The search hot path, compiled: sum the query terms' BM25 postings and keep the top k.

bm25s stores each term's precomputed per-document BM25 contribution as a sparse column. This
kernel adds the query's columns into a dense accumulator (only the touched entries are reset
afterwards) and keeps the k best documents by (score descending, document ascending): Lucene's
order. One pass over the postings, no full sort: 1.2M products answer in a few milliseconds,
where numpy's bincount + argpartition took ten times longer.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def top_k(indptr, indices, data, term_ids, k, acc, touched):  # pragma: no cover (compiled)
    """Documents and float32 scores of the best ``k`` matches, best first.

    ``acc`` (float32, one per document, all zero) and ``touched`` (int32, as long) are
    scratch buffers owned by the caller; ``acc`` is left all zero again. Repeated terms count
    again, as in Lucene's boolean query.
    """
    n_touched = 0
    for q in range(term_ids.shape[0]):
        t = term_ids[q]
        for p in range(indptr[t], indptr[t + 1]):
            d = indices[p]
            if acc[d] == 0.0:
                touched[n_touched] = d
                n_touched += 1
            acc[d] += data[p]
    best_s = np.full(k, -1.0, dtype=np.float32)
    best_d = np.full(k, -1, dtype=np.int64)
    m = 0
    for j in range(n_touched):
        d = touched[j]
        s = acc[d]
        acc[d] = 0.0
        if s <= 0.0:
            continue
        if m == k:  # full: skip unless better than the current last
            if s < best_s[k - 1] or (s == best_s[k - 1] and d > best_d[k - 1]):
                continue
            i = k - 1
        else:
            i = m
            m += 1
        # insertion into the sorted top list (k is small)
        while i > 0 and (best_s[i - 1] < s or (best_s[i - 1] == s and best_d[i - 1] > d)):
            best_s[i] = best_s[i - 1]
            best_d[i] = best_d[i - 1]
            i -= 1
        best_s[i] = s
        best_d[i] = d
    return best_d[:m], best_s[:m]
