"""EXPRAG's coded-set ranker (eq. 4–7): τ(p, p') = Σ_f λ_f · Jaccard(E_p^f, E_p'^f) over coded fields.

Each field is stored as a sparse patient × code incidence matrix in compressed-column form (for every code,
the sorted rows of the patients that have it). A query's intersection counts with every patient are one
sparse product — the concatenated columns of the query's codes, counted with `bincount` — and unions come
from the set sizes: |A ∪ B| = |A| + |B| − |A ∩ B|. No Python loop runs over patients."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.index.hits import Hit

CodedSets = Mapping[str, Iterable[str]]


def preset_weights(preset: str, fields: Sequence[str], focus: str | None = None) -> dict[str, float]:
    """Field weights λ_f summing to 1, after EXPRAG Table 3: `uniform` (equal), `focused` (the field the task
    asks about, e.g. diagnoses for a diagnosis question, weighs half, the rest share the other half) and
    `complementary` (the task's own field is left out; the others share the weight equally)."""
    if not fields:
        raise InvalidInputError("weights need at least one field")
    if preset == "uniform":
        return {f: 1 / len(fields) for f in fields}
    if focus not in fields:
        raise InvalidInputError(f"preset {preset!r} needs a focus field among {list(fields)}, got {focus!r}")
    others = [f for f in fields if f != focus]
    if preset == "focused":
        if not others:
            return {focus: 1.0}
        return {focus: 0.5, **{f: 0.5 / len(others) for f in others}}
    if preset == "complementary":
        if not others:
            raise InvalidInputError("the complementary preset needs a field besides the focus")
        return {focus: 0.0, **{f: 1 / len(others) for f in others}}
    raise InvalidInputError(f"unknown weight preset {preset!r}: use uniform, focused or complementary")


@dataclass(frozen=True)
class _Field:
    vocabulary: dict[str, int]  # code → column
    indptr: np.ndarray  # column c's rows are rows[indptr[c]:indptr[c + 1]]
    rows: np.ndarray
    union_base: np.ndarray  # |E_p^f| per patient (float32); a 0 becomes 1 so that 0/0 cannot occur


def _compress(sets: list[set[str]]) -> _Field:
    vocabulary: dict[str, int] = {}
    columns, rows = [], []
    for row, codes in enumerate(sets):
        for code in codes:
            columns.append(vocabulary.setdefault(code, len(vocabulary)))
            rows.append(row)
    columns_arr = np.asarray(columns, dtype=np.int64)
    rows_arr = np.asarray(rows, dtype=np.intp)  # bincount's own index type: no conversion per query
    order = np.argsort(columns_arr, kind="stable")
    indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(np.bincount(columns_arr, minlength=len(vocabulary)), out=indptr[1:])
    sizes = np.fromiter((len(s) for s in sets), dtype=np.float32, count=len(sets))
    # With an empty patient set the intersection is 0, so any positive union keeps its Jaccard at 0.
    return _Field(vocabulary, indptr, rows_arr[order], np.maximum(sizes, 1))


class CodedSetRanker:
    """Top-k patients by weighted Jaccard over coded fields."""

    def __init__(self, ids: Sequence[str], records: Sequence[CodedSets], fields: Sequence[str]) -> None:
        if len(ids) != len(records):
            raise InvalidInputError(f"{len(ids)} ids for {len(records)} records")
        if len(set(ids)) != len(ids):
            duplicates = sorted({i for i in ids if ids.count(i) > 1})[:5] if len(ids) < 10_000 else []
            raise InvalidInputError(f"patient ids must be unique (duplicates: {duplicates or 'several'})")
        if not fields:
            raise InvalidInputError("the ranker needs at least one coded field")
        self.ids = list(ids)
        self._row = {pid: row for row, pid in enumerate(self.ids)}
        self.fields = list(fields)
        self._fields = {f: _compress([set(record.get(f, ())) for record in records]) for f in self.fields}

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query: CodedSets, weights: Mapping[str, float]) -> np.ndarray:
        """τ for every patient (float64, one per row)."""
        unknown = set(weights) - set(self.fields)
        if unknown:
            raise InvalidInputError(f"weights name fields the ranker does not have: {sorted(unknown)}")
        query_sets = {f: set(query.get(f, ())) for f in self.fields}
        if not any(query_sets[f] for f in weights if weights[f] > 0):
            raise InvalidInputError("the query patient has no codes in any weighted field")
        total = np.zeros(len(self.ids), dtype=np.float32)
        for name, weight in weights.items():
            codes = query_sets[name]
            if weight == 0 or not codes:
                continue
            field = self._fields[name]
            columns = [field.vocabulary[c] for c in codes if c in field.vocabulary]
            postings = [field.rows[field.indptr[c] : field.indptr[c + 1]] for c in columns]
            if not postings:
                continue  # no patient shares any of these codes: Jaccard 0 everywhere
            intersection = np.bincount(np.concatenate(postings), minlength=len(self.ids)).astype(np.float32)
            # Whole-array arithmetic: cheaper than gathering the (often most) rows that share a code.
            union = field.union_base + np.float32(len(codes)) - intersection
            total += np.float32(weight) * (intersection / union)
        return total

    def rank(
        self, query: CodedSets, k: int, weights: Mapping[str, float], *, exclude: Iterable[str] = ()
    ) -> list[Hit]:
        """The k most similar patients (score > 0), best first, ties by insertion order; `exclude` lists ids
        that must not be returned (e.g. the query patient itself: the leakage guard)."""
        if k < 1:
            raise InvalidInputError(f"k must be positive, got {k}")
        total = self.scores(query, weights)
        for pid in exclude:
            if pid in self._row:
                total[self._row[pid]] = 0.0
        candidates = np.flatnonzero(total > 0)
        if candidates.size > k:
            threshold = np.partition(total[candidates], -k)[-k]
            candidates = candidates[total[candidates] >= threshold]
        order = candidates[np.lexsort((candidates, -total[candidates]))][:k]
        return [Hit(self.ids[row], float(total[row])) for row in order]
