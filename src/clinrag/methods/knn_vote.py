"""`knn-vote`: no LLM — the answer is the similarity-weighted vote of the labels of the most similar past
patients. It is what experience alone can do, and a baseline for every experience-using method.

Similarity is the coded-set ranker (weighted Jaccard, EXPRAG) over the case's coded fields when the case has
codes the patient base shares, and cosine between narrative embeddings (DoctorRAG eq. 2) otherwise. The
case's own record is always excluded, so evaluating on a dataset's patients never retrieves the answer.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Literal

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, Evidence, RankedDiagnosis, StructuredResult
from clinrag.embed.base import Embedder
from clinrag.methods.base import Method, MethodContext, MethodSpec
from clinrag.patients.base import PatientBase, format_record
from clinrag.patients.ranker import CodedSetRanker, preset_weights
from clinrag.patients.record import PatientRecord
from clinrag.tasks.render import case_text

DDX_SIZE = 10


class KnnVote(Method):
    name = "knn-vote"

    def __init__(
        self,
        records: Sequence[PatientRecord],
        labels: dict[str, list[str]],
        *,
        embedder: Callable[[], Embedder] | None = None,
        k: int = 10,
        weighting: Literal["similarity", "uniform"] = "similarity",
        select_threshold: float = 0.5,
    ) -> None:
        if not records:
            raise InvalidInputError("knn-vote needs a patient base: this dataset has no patient records")
        if k < 1:
            raise InvalidInputError(f"k must be positive, got {k}")
        if weighting not in ("similarity", "uniform"):
            raise InvalidInputError(f"weighting must be 'similarity' or 'uniform', got {weighting!r}")
        self.records = list(records)
        self.labels = labels
        self.embedder = embedder
        self.k = k
        self.weighting = weighting
        self.select_threshold = select_threshold
        self._by_id = {r.id: r for r in self.records}
        self._lock = threading.Lock()
        self._base: PatientBase | None = None
        if self._fields:
            self._ranker  # noqa: B018 - built now, before cases are answered from several threads

    @cached_property
    def _fields(self) -> list[str]:
        return sorted({field for r in self.records for field in r.codes})

    @cached_property
    def _ranker(self) -> CodedSetRanker:
        return CodedSetRanker([r.id for r in self.records], [r.codes for r in self.records], self._fields)

    def _patient_base(self) -> PatientBase:
        # Built on first need, once, even when cases are answered from several threads.
        with self._lock:
            if self._base is None:
                if self.embedder is None:
                    raise InvalidInputError("knn-vote needs an embedder for cases without coded findings")
                self._base = PatientBase.create(self.records, self.embedder(), progress=True)
            return self._base

    def neighbours(self, case: Case) -> tuple[str, list[tuple[PatientRecord, float]]]:
        """(how they were found, the k most similar records with their similarity)."""
        codes = {f: v for f, v in (case.patient.codes if case.patient else {}).items() if f in self._fields}
        if any(codes.values()):
            weights = preset_weights("uniform", sorted(codes))
            hits = self._ranker.rank(codes, self.k, weights, exclude=[case.id])
            return "coded-set jaccard", [(self._by_id[h.id], h.score) for h in hits]
        return "narrative cosine", self._patient_base().similar(case_text(case), self.k, exclude=[case.id])

    def answer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        with answer.trace.step("similar_patients", k=self.k) as step:
            how, found = self.neighbours(case)
            step.output = {"similarity": how, "patients": [[r.id, round(s, 4)] for r, s in found]}
        with answer.trace.step("vote", weighting=self.weighting) as step:
            shares = self._vote(found)
            step.output = {"shares": dict(list(shares.items())[:DDX_SIZE])}
        answer.evidence = [
            Evidence(id=r.id, kind="patient", text=format_record(r), score=s, source="patients")
            for r, s in found
        ]
        if not shares:
            answer.error = "no similar patient with a label was found"
            return answer
        top = list(shares.items())[:DDX_SIZE]
        ddx = [RankedDiagnosis(name=label, probability=share) for label, share in top]
        choices = [label for label, share in shares.items() if share >= self.select_threshold]
        answer.result = StructuredResult(
            choice=_option_key(ddx[0].name, case.options),
            choices=[_option_key(label, case.options) for label in choices],
            ddx=ddx,
        )
        answer.text = "Votes of the most similar patients: " + "; ".join(
            f"{d.name} {d.probability:.0%}" for d in ddx
        )
        return answer

    def _vote(self, found: list[tuple[PatientRecord, float]]) -> dict[str, float]:
        """Label → share of the neighbours' weight, best first (ties by first appearance)."""
        totals: dict[str, float] = defaultdict(float)
        weight_sum = 0.0
        for record, score in found:
            weight = score if self.weighting == "similarity" else 1.0
            record_labels = self.labels.get(record.id, [])
            if not record_labels:
                continue
            weight_sum += weight
            for label in dict.fromkeys(record_labels):
                totals[label] += weight
        if weight_sum <= 0:
            return {}
        return dict(sorted(((lab, w / weight_sum) for lab, w in totals.items()), key=lambda kv: -kv[1]))


def _option_key(label: str, options: dict[str, str]) -> str:
    """The option key whose text is `label` (labels are option texts), or the label itself."""
    for key, text in options.items():
        if text == label:
            return key
    return label


def build(context: MethodContext) -> KnnVote:
    params = dict(context.params)
    unknown = set(params) - {"k", "weighting", "select_threshold"}
    if unknown:
        raise InvalidInputError(
            f"knn-vote takes the parameters k, weighting, select_threshold; got {sorted(unknown)}"
        )
    # The embedder is only loaded if a case has no coded findings shared with the base.
    return KnnVote(context.experience, context.labels, embedder=lambda: context.embedder, **params)


SPEC = MethodSpec(
    name="knn-vote",
    description="no LLM: similarity-weighted vote of the labels of the most similar patients",
    build=build,
    uses_llm=False,
    needs_experience=True,
)
