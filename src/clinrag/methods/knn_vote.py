"""`knn-vote`: no LLM — the answer is the similarity-weighted vote of the labels of the most similar past
patients (see `clinrag.patients.similarity`). It is what experience alone can do, and a baseline for every
experience-using method."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import Field

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import DDX_SIZE, Answer, Case, RankedDiagnosis, StructuredResult
from clinrag.embed.base import Embedder
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.options import option_key
from clinrag.methods.registry import register
from clinrag.patients.record import PatientRecord
from clinrag.patients.similarity import SimilarPatients, label_vote, patient_evidence


class KnnVoteConfig(MethodConfig):
    method_name: ClassVar[str] = "knn-vote"

    k: int = Field(default=10, ge=1)
    weighting: Literal["similarity", "uniform"] = "similarity"
    select_threshold: float = Field(default=0.5, gt=0.0, le=1.0)  # multi-select: the share a label needs


class KnnVote(Method):
    name = "knn-vote"

    def __init__(
        self,
        records: Sequence[PatientRecord],
        labels: dict[str, list[str]],
        config: KnnVoteConfig | None = None,
        *,
        embedder: Callable[[], Embedder] | None = None,
    ) -> None:
        if not records:
            raise InvalidInputError("knn-vote needs a patient base: this dataset has no patient records")
        self.similar = SimilarPatients(records, embedder=embedder)
        self.labels = labels
        self.config = config or KnnVoteConfig()

    async def aanswer(self, case: Case) -> Answer:
        return await asyncio.to_thread(self._vote, case)

    def _vote(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        k, weighting = self.config.k, self.config.weighting
        with answer.trace.step("similar_patients", k=k) as step:
            how, found = self.similar.find(case, k)
            step.output = {"similarity": how, "patients": [[r.id, round(s, 4)] for r, s in found]}
        with answer.trace.step("vote", weighting=weighting) as step:
            shares = label_vote(found, self.labels, weighting)
            step.output = {"shares": dict(list(shares.items())[:DDX_SIZE])}
        answer.evidence = patient_evidence(found)
        if not shares:
            answer.error = "no similar patient with a label was found"
            return answer
        top = list(shares.items())[:DDX_SIZE]
        ddx = [RankedDiagnosis(name=label, probability=share) for label, share in top]
        choices = [label for label, share in shares.items() if share >= self.config.select_threshold]
        answer.result = StructuredResult(
            choice=option_key(ddx[0].name, case.options),
            choices=[option_key(label, case.options) for label in choices],
            ddx=ddx,
        )
        answer.text = "Votes of the most similar patients: " + "; ".join(
            f"{d.name} {d.probability:.0%}" for d in ddx
        )
        return answer


SPEC = register(
    MethodSpec(
        name="knn-vote",
        description="no LLM: similarity-weighted vote of the labels of the most similar patients",
        config=KnnVoteConfig,
        # The embedder is only loaded if a case has no coded findings shared with the base.
        factory=lambda context, config: KnnVote(
            context.experience, context.labels, config, embedder=lambda: context.embedder
        ),
        uses_llm=False,
        needs_experience=True,
        uses_patients=True,
    )
)
