"""EXPRAG's coded-set ranker (eq. 4–7): τ(p, p') = Σ_f λ_f · Jaccard(E_p^f, E_p'^f) over coded fields.

Coded fields are heavy-tailed: a few codes (hypertension, aspirin, a blood count) belong to most patients, so
the postings of a typical query's codes hold many times more entries than there are patients and a query
shares a code with nearly everyone. Each field therefore keeps its 64 most frequent codes as one bit word
per patient (their share of an intersection is a popcount over compact words) and every other code as a
posting list, the sorted rows of the patients that have it, gathered only for the query's codes. Unions
come from the set sizes: |A ∪ B| = |A| + |B| − |A ∩ B|. Scores are float64 and computed in the same order
as plain Python set arithmetic, so they, and the order of ties, match it exactly."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.index.hits import Hit

CodedSets = Mapping[str, Iterable[str]]
# A field pre-encoded as (vocabulary, indptr, codes): row r has vocabulary[codes[indptr[r]:indptr[r + 1]]].
EncodedField = tuple[Sequence[str], np.ndarray, np.ndarray]

_HEAVY = 64  # the most frequent codes of a field, one bit each in a uint64 per patient


def preset_weights(
    preset: str, fields: Sequence[str], focus: str | None = None, focus_share: float = 0.5
) -> dict[str, float]:
    """Field weights λ_f summing to 1, after EXPRAG Table 3: `uniform` (equal), `focused` (the field the task
    asks about, e.g. diagnoses for a diagnosis question, weighs `focus_share`, half by default, the rest share
    what is left; 1: the focus alone) and `complementary` (the task's own field is left out; the others share
    the weight equally)."""
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
        return {focus: focus_share, **{f: (1.0 - focus_share) / len(others) for f in others}}
    if preset == "complementary":
        if not others:
            raise InvalidInputError("the complementary preset needs a field besides the focus")
        return {focus: 0.0, **{f: 1 / len(others) for f in others}}
    raise InvalidInputError(f"unknown weight preset {preset!r}: use uniform, focused or complementary")


@dataclass(frozen=True)
class _Field:
    vocabulary: dict[str, int]  # code → column, most frequent first; columns below _HEAVY are bits
    bits: np.ndarray  # uint64 per patient: bit c is set when the patient has column c
    indptr: np.ndarray  # column _HEAVY + c's rows are rows[indptr[c]:indptr[c + 1]]
    rows: np.ndarray  # int32, ascending within a column
    sizes: np.ndarray  # float64 |E_p^f| per patient: the type of the per-query arithmetic, so nothing is cast

    def terms(self, codes: set[str], weight: float) -> np.ndarray | None:
        """λ_f · Jaccard(A, E_p^f) per patient (float64), or None when no patient has any of the codes."""
        columns = [self.vocabulary[c] for c in codes if c in self.vocabulary]
        if not columns:
            return None
        mask = 0
        for column in columns:
            if column < _HEAVY:
                mask |= 1 << column
        term = np.zeros(len(self.sizes), dtype=np.float64)
        if mask:
            np.bitwise_count(self.bits & np.uint64(mask), out=term, casting="unsafe")
        for column in columns:
            if column >= _HEAVY:  # a posting lists each patient once, so a fancy-indexed add is exact
                term[self.rows[self.indptr[column - _HEAVY] : self.indptr[column - _HEAVY + 1]]] += 1
        union = np.subtract(self.sizes, term)
        union += len(codes)
        term *= weight  # (λ · |A ∩ B|) / |A ∪ B|, as Python evaluates it: same rounding, same ties
        term /= union
        return term


def _encode(vocabulary: Sequence[str], indptr: np.ndarray, codes: np.ndarray) -> _Field:
    """Bit words and postings from a patient-major list of distinct code indices per row."""
    n = len(indptr) - 1
    counts = np.bincount(codes, minlength=len(vocabulary))
    by_count = np.argsort(-counts, kind="stable")
    column_of = np.empty(len(vocabulary), dtype=np.int32)
    column_of[by_count] = np.arange(len(vocabulary), dtype=np.int32)
    columns = column_of[codes]
    heavy = columns < _HEAVY
    # A row's word is the sum of its distinct heavy bits: a difference of prefix sums (wrapping mod 2^64 is
    # harmless, the differences are exact). A repeated code in a row makes the popcount fall short.
    words = np.left_shift(np.uint64(1), np.where(heavy, columns, 0).astype(np.uint64))
    words[~heavy] = 0
    prefix = np.zeros(len(codes) + 1, dtype=np.uint64)
    np.cumsum(words, out=prefix[1:])
    del words
    bits = prefix[indptr[1:]] - prefix[indptr[:-1]]
    del prefix
    heavy_prefix = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(heavy, out=heavy_prefix[1:])
    duplicated = np.any(np.bitwise_count(bits) != heavy_prefix[indptr[1:]] - heavy_prefix[indptr[:-1]])
    del heavy_prefix

    light = ~heavy
    light_columns = columns[light] - _HEAVY
    light_rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))[light]
    order = np.argsort(light_columns, kind="stable")  # stable: rows stay ascending within a column
    light_columns, light_rows = light_columns[order], light_rows[order]
    duplicated |= np.any((light_rows[1:] == light_rows[:-1]) & (light_columns[1:] == light_columns[:-1]))
    if duplicated:
        raise InvalidInputError("a row lists the same code twice")
    posting_ptr = np.zeros(max(len(vocabulary) - _HEAVY, 0) + 1, dtype=np.int64)
    np.cumsum(np.bincount(light_columns, minlength=len(posting_ptr) - 1), out=posting_ptr[1:])
    return _Field(
        {code: int(column_of[i]) for i, code in enumerate(vocabulary)},
        bits,
        posting_ptr,
        light_rows,
        np.diff(indptr).astype(np.float64),
    )


def _factorise(records: Sequence[CodedSets], field: str) -> EncodedField:
    """One field of the records as (vocabulary, indptr, codes); Python work per record, C work per code."""
    lengths = np.zeros(len(records) + 1, dtype=np.int64)
    flat: list[str] = []
    for row, record in enumerate(records, start=1):
        codes = dict.fromkeys(record.get(field, ()))  # a record may repeat a code: the set has it once
        lengths[row] = len(codes)
        flat.extend(codes)
    vocabulary = list(dict.fromkeys(flat))
    column = {code: i for i, code in enumerate(vocabulary)}
    codes = np.fromiter(map(column.__getitem__, flat), dtype=np.int32, count=len(flat))
    return vocabulary, np.cumsum(lengths), codes


def _check_encoded(name: str, n: int, encoded: EncodedField) -> tuple[Sequence[str], np.ndarray, np.ndarray]:
    vocabulary, indptr, codes = encoded
    indptr, codes = np.asarray(indptr, dtype=np.int64), np.asarray(codes)
    if codes.dtype.kind not in "iu":
        raise InvalidInputError(f"field {name!r}: codes must be integer indices, not {codes.dtype}")
    if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr[-1] != len(codes) or np.any(np.diff(indptr) < 0):
        raise InvalidInputError(f"field {name!r}: indptr must rise from 0 to len(codes) over {n} rows")
    if codes.size and (codes.min() < 0 or codes.max() >= len(vocabulary)):
        raise InvalidInputError(f"field {name!r}: codes must index its vocabulary of {len(vocabulary)}")
    if len(set(vocabulary)) != len(vocabulary):
        raise InvalidInputError(f"field {name!r}: the vocabulary repeats a code")
    return vocabulary, indptr, codes.astype(np.int32, copy=False)


class CodedSetRanker:
    """Top-k patients by weighted Jaccard over coded fields."""

    def __init__(self, ids: Sequence[str], records: Sequence[CodedSets], fields: Sequence[str]) -> None:
        if len(ids) != len(records):
            raise InvalidInputError(f"{len(ids)} ids for {len(records)} records")
        if not fields:
            raise InvalidInputError("the ranker needs at least one coded field")
        self._set_ids(ids)
        self.fields = list(fields)
        self._fields = {f: _encode(*_factorise(records, f)) for f in self.fields}

    @classmethod
    def from_codes(cls, ids: Sequence[str], fields: Mapping[str, EncodedField]) -> CodedSetRanker:
        """From pre-encoded fields, without Python objects per code: each field is (vocabulary, indptr,
        codes), row r's distinct codes being vocabulary[codes[indptr[r]:indptr[r + 1]]]."""
        if not fields:
            raise InvalidInputError("the ranker needs at least one coded field")
        ranker = cls.__new__(cls)
        ranker._set_ids(ids)
        ranker.fields = list(fields)
        ranker._fields = {f: _encode(*_check_encoded(f, len(ids), e)) for f, e in fields.items()}
        return ranker

    def _set_ids(self, ids: Sequence[str]) -> None:
        self.ids = list(ids)
        self._row = {pid: row for row, pid in enumerate(self.ids)}
        if len(self._row) != len(self.ids):
            duplicates = sorted({i for i in ids if ids.count(i) > 1})[:5] if len(ids) < 10_000 else []
            raise InvalidInputError(f"patient ids must be unique (duplicates: {duplicates or 'several'})")

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query: CodedSets, weights: Mapping[str, float]) -> np.ndarray:
        """τ for every patient (float64, one per row), summed over `weights` in its order."""
        unknown = set(weights) - set(self.fields)
        if unknown:
            raise InvalidInputError(f"weights name fields the ranker does not have: {sorted(unknown)}")
        query_sets = {f: set(query.get(f, ())) for f in weights}
        if not any(query_sets[f] for f in weights if weights[f] > 0):
            raise InvalidInputError("the query patient has no codes in any weighted field")
        total = np.zeros(len(self.ids), dtype=np.float64)
        for name, weight in weights.items():
            codes = query_sets[name]
            term = self._fields[name].terms(codes, weight) if weight != 0 and codes else None
            if term is not None:  # None: no patient shares any of these codes, Jaccard 0 everywhere
                total += term
        return total

    def rank(
        self,
        query: CodedSets,
        k: int,
        weights: Mapping[str, float],
        *,
        exclude: Iterable[str] = (),
        guard: float | None = None,
    ) -> list[Hit]:
        """The k most similar patients (score > 0), best first, ties by insertion order; `exclude` lists ids
        that must not be returned (e.g. the query patient itself: the leakage guard), and with `guard` no
        patient scoring above it is (a copy of the query under another id)."""
        if k < 1:
            raise InvalidInputError(f"k must be positive, got {k}")
        total = self.scores(query, weights)
        if guard is not None:
            total[total > guard] = 0.0
        for pid in exclude:
            if pid in self._row:
                total[self._row[pid]] = 0.0
        return [Hit(self.ids[row], float(total[row])) for row in _top(total, k)]


def _top(total: np.ndarray, k: int) -> np.ndarray:
    """Rows of the k highest positive scores, best first, ties by row."""
    # The k-th best of an evenly spaced sample bounds the k-th best of all rows from below; a sample of
    # √(k·n) rows leaves about as many candidates, so neither step sorts or partitions every row.
    sample = total[:: max(1, math.isqrt(total.size // k))]
    floor = np.partition(sample, sample.size - k)[sample.size - k] if sample.size > k else 0.0
    candidates = np.flatnonzero(total >= floor) if floor > 0 else np.flatnonzero(total > 0)
    scores = total[candidates]
    if candidates.size > k:
        kth = np.partition(scores, scores.size - k)[scores.size - k]
        above = scores > kth
        tied = np.flatnonzero(scores == kth)[: k - int(above.sum())]  # ascending rows: insertion order
        keep = np.concatenate([np.flatnonzero(above), tied])
        candidates, scores = candidates[keep], scores[keep]
    return candidates[np.lexsort((candidates, -scores))]
