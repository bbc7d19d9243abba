"""Finding a case's most similar past patients: the coded-set ranker (weighted Jaccard, EXPRAG) over the
coded fields the case shares with the base, else cosine between narrative embeddings (DoctorRAG eq. 2).
The case's own record is always excluded, so evaluating on a dataset's patients never retrieves the answer."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Literal

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case, Evidence, case_text
from clinrag.embed.base import Embedder
from clinrag.patients.base import PatientBase, format_record
from clinrag.patients.ranker import CodedSetRanker, preset_weights
from clinrag.patients.record import PatientRecord

Neighbours = list[tuple[PatientRecord, float]]


class SimilarPatients:
    def __init__(
        self, records: Sequence[PatientRecord], *, embedder: Callable[[], Embedder] | None = None
    ) -> None:
        if not records:
            raise InvalidInputError("similar-patient retrieval needs a patient base with at least one record")
        self.records = list(records)
        self.embedder = embedder
        self._by_id = {r.id: r for r in self.records}
        self._lock = threading.Lock()
        self._base: PatientBase | None = None
        if self._fields:
            self._ranker  # noqa: B018 - built now, before cases are answered from several threads

    @classmethod
    def from_base(cls, base: PatientBase) -> SimilarPatients:
        """Over a saved patient base, whose narrative index is already built."""
        similar = cls(list(base.records.values()), embedder=lambda: base.embedder)
        similar._base = base
        return similar

    @cached_property
    def _fields(self) -> list[str]:
        return sorted({field for r in self.records for field in r.codes})

    @cached_property
    def _ranker(self) -> CodedSetRanker:
        return CodedSetRanker([r.id for r in self.records], [r.codes for r in self.records], self._fields)

    def _patient_base(self) -> PatientBase:
        # Embedded on first need, once, even when cases are answered from several threads.
        with self._lock:
            if self._base is None:
                if self.embedder is None:
                    raise InvalidInputError("narrative similarity needs an embedder (the case has no codes)")
                self._base = PatientBase.create(self.records, self.embedder(), progress=True)
            return self._base

    def find(self, case: Case, k: int, code_guard: float | None = None) -> tuple[str, Neighbours]:
        """(how they were found, the k most similar records with their similarity, best first). Narratives
        always drop copies of the case (cosine > 0.99); coded sets drop those above `code_guard`, if given."""
        if k < 1:
            raise InvalidInputError(f"k must be positive, got {k}")
        codes = {f: v for f, v in (case.patient.codes if case.patient else {}).items() if f in self._fields}
        if any(codes.values()):
            weights = preset_weights("uniform", sorted(codes))
            hits = self._ranker.rank(codes, k, weights, exclude=[case.id], guard=code_guard)
            return "coded-set jaccard", [(self._by_id[h.id], h.score) for h in hits]
        return "narrative cosine", self._patient_base().similar(case_text(case), k, exclude=[case.id])


def patient_evidence(found: Neighbours, labels: dict[str, list[str]] | None = None) -> list[Evidence]:
    """The neighbours as evidence (their formatted records); `labels` adds each one's labels in the cases'
    answer space to its provenance."""
    return [
        Evidence(
            id=r.id,
            kind="patient",
            text=format_record(r),
            score=s,
            source="patients",
            provenance={"labels": labels[r.id]} if labels and labels.get(r.id) else {},
        )
        for r, s in found
    ]


def label_vote(
    found: Neighbours,
    labels: dict[str, list[str]],
    weighting: Literal["similarity", "uniform"] = "similarity",
) -> dict[str, float]:
    """Label → share of the neighbours' weight, best first (ties by first appearance). Neighbours without a
    label do not vote."""
    totals: dict[str, float] = defaultdict(float)
    weight_sum = 0.0
    for record, score in found:
        record_labels = labels.get(record.id, [])
        if not record_labels:
            continue
        weight = score if weighting == "similarity" else 1.0
        weight_sum += weight
        for label in dict.fromkeys(record_labels):
            totals[label] += weight
    if weight_sum <= 0:
        return {}
    return dict(sorted(((label, w / weight_sum) for label, w in totals.items()), key=lambda kv: -kv[1]))
