"""BASELINE ONLY — brute-force concept-constrained search, the ground truth for `ConceptIndex`.

It applies DoctorRAG eq. 1 literally: score every statement by cosine (one matrix product over all of them),
set the score of every statement that shares no tag with the query to −∞, take the top k. It is exact and
simple, and its cost grows with the whole knowledge base for every query, which is what the in-index
constraint of `ConceptIndex` avoids. Tests and `benchmarks/bench_concept_search.py` compare against it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.index.hits import Hit
from clinrag.index.validate import check_k, check_new_ids, check_tag_sets, check_vectors


class MaskedSearch:
    """Score-everything-then-mask search over fixed statements (prepared once, searched many times)."""

    def __init__(self, vectors: np.ndarray, ids: Sequence[str], tags: Sequence[Iterable[int]]) -> None:
        if not isinstance(vectors, np.ndarray) or vectors.ndim != 2:
            raise InvalidInputError("statement vectors must be a 2-D numpy array")
        self._vectors = check_vectors(vectors, vectors.shape[1])
        self._ids = check_new_ids(ids, len(vectors), ())
        tag_sets = check_tag_sets(tags, len(vectors), what="tags")
        self._columns = {tag: column for column, tag in enumerate(sorted(set().union(*tag_sets)))}
        # membership[i, c]: statement i carries the tag of column c.
        self._membership = np.zeros((len(tag_sets), len(self._columns)), dtype=bool)
        rows = [row for row, tag_set in enumerate(tag_sets) for _ in tag_set]
        columns = [self._columns[tag] for tag_set in tag_sets for tag in tag_set]
        self._membership[rows, columns] = True

    def search(
        self, query_vectors: np.ndarray, query_tags: Sequence[Iterable[int]], k: int, *, batch_size: int = 64
    ) -> list[list[Hit]]:
        """Top k per query by cosine among statements sharing a tag with it, best first (ties by position).
        Queries are scored `batch_size` at a time: a batch needs batch_size × n floats of memory."""
        queries = check_vectors(query_vectors, self._vectors.shape[1], what="query vectors")
        k = check_k(k)
        if batch_size < 1:
            raise InvalidInputError(f"batch_size must be at least 1, got {batch_size}")
        tag_sets = check_tag_sets(query_tags, len(queries), what="query tags")
        results: list[list[Hit]] = []
        for start in range(0, len(queries), batch_size):
            scores = queries[start : start + batch_size] @ self._vectors.T
            for row_scores, tag_set in zip(scores, tag_sets[start : start + batch_size], strict=True):
                results.append(self._top(row_scores, tag_set, k))
        return results

    def _top(self, scores: np.ndarray, tag_set: frozenset[int], k: int) -> list[Hit]:
        columns = [self._columns[tag] for tag in tag_set if tag in self._columns]
        if not columns:
            return []
        allowed = self._membership[:, columns].any(axis=1)
        masked = np.where(allowed, scores, -np.inf)
        k = min(k, int(allowed.sum()))
        top = np.argpartition(-masked, k - 1)[:k]
        top = top[np.lexsort((top, -masked[top]))]
        return [Hit(self._ids[i], float(masked[i])) for i in top]


def masked_search(
    vectors: np.ndarray,
    ids: Sequence[str],
    tags: Sequence[Iterable[int]],
    query_vectors: np.ndarray,
    query_tags: Sequence[Iterable[int]],
    k: int,
) -> list[list[Hit]]:
    """One-shot `MaskedSearch(vectors, ids, tags).search(query_vectors, query_tags, k)`."""
    return MaskedSearch(vectors, ids, tags).search(query_vectors, query_tags, k)
