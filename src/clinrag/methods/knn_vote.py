"""`knn-vote`: no LLM — the answer is the similarity-weighted vote of the labels of the most similar past
patients (see `clinrag.patients.similarity`). It is what experience alone can do, and a baseline for every
experience-using method."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, RankedDiagnosis, StructuredResult
from clinrag.embed.base import Embedder
from clinrag.methods.base import Method, MethodContext, MethodSpec
from clinrag.methods.options import option_key
from clinrag.patients.record import PatientRecord
from clinrag.patients.similarity import SimilarPatients, label_vote, patient_evidence

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
        self.similar = SimilarPatients(records, embedder=embedder)
        if k < 1:
            raise InvalidInputError(f"k must be positive, got {k}")
        if weighting not in ("similarity", "uniform"):
            raise InvalidInputError(f"weighting must be 'similarity' or 'uniform', got {weighting!r}")
        self.labels = labels
        self.k = k
        self.weighting = weighting
        self.select_threshold = select_threshold

    def answer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        with answer.trace.step("similar_patients", k=self.k) as step:
            how, found = self.similar.find(case, self.k)
            step.output = {"similarity": how, "patients": [[r.id, round(s, 4)] for r, s in found]}
        with answer.trace.step("vote", weighting=self.weighting) as step:
            shares = label_vote(found, self.labels, self.weighting)
            step.output = {"shares": dict(list(shares.items())[:DDX_SIZE])}
        answer.evidence = patient_evidence(found)
        if not shares:
            answer.error = "no similar patient with a label was found"
            return answer
        top = list(shares.items())[:DDX_SIZE]
        ddx = [RankedDiagnosis(name=label, probability=share) for label, share in top]
        choices = [label for label, share in shares.items() if share >= self.select_threshold]
        answer.result = StructuredResult(
            choice=option_key(ddx[0].name, case.options),
            choices=[option_key(label, case.options) for label in choices],
            ddx=ddx,
        )
        answer.text = "Votes of the most similar patients: " + "; ".join(
            f"{d.name} {d.probability:.0%}" for d in ddx
        )
        return answer


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
