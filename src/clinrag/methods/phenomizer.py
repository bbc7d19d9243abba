"""`phenomizer`: no LLM — the classic phenotype-similarity baseline for rare diseases. The case's HPO terms
(`PatientProfile.codes`, as the `phenopackets` and `rarebench` datasets give them) are compared with every
disease's annotations by Resnik similarity combined with funSimAvg (`clinrag.terms.hpo_similarity`); the
ranking is the answer. Excluded terms, age, sex and the text are not read: that is the baseline."""

from __future__ import annotations

import asyncio
from functools import cache
from typing import ClassVar, Literal

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import (
    DDX_SIZE,
    HPO_OBSERVED,
    Answer,
    Case,
    Evidence,
    RankedDiagnosis,
    StructuredResult,
)
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.registry import register
from clinrag.terms.hpo_similarity import PhenotypeSimilarity


class PhenomizerConfig(MethodConfig):
    method_name: ClassVar[str] = "phenomizer"

    database: Literal["OMIM", "ORPHA"] = "OMIM"  # whose diseases are ranked, and whose IC is used


@cache
def _similarity(database: str) -> PhenotypeSimilarity:
    return PhenotypeSimilarity(database)


class Phenomizer(Method):
    name = "phenomizer"
    model = None

    def __init__(self, config: PhenomizerConfig | None = None) -> None:
        self.config = config or PhenomizerConfig()
        self.similarity = _similarity(self.config.database)

    async def aanswer(self, case: Case) -> Answer:
        return await asyncio.to_thread(self.answer, case)

    def answer(self, case: Case) -> Answer:
        terms = case.patient.codes.get(HPO_OBSERVED, []) if case.patient is not None else []
        if not terms:
            raise InvalidInputError(
                f"case {case.id}: the phenomizer ranks HPO-coded cases; this one has no terms"
            )
        answer = Answer(case_id=case.id, method=self.name)
        with answer.trace.step("similarity", terms=len(terms), database=self.config.database) as step:
            ranked = self.similarity.rank(terms, DDX_SIZE)
            step.output = {"top": [[r.disease.id, round(r.score, 4)] for r in ranked]}
        answer.evidence = [
            Evidence(
                id=f"hpo-disease:{r.disease.id}",
                kind="graph_fact",
                text=f"{r.disease.name} ({r.disease.id}): funSimAvg {r.score:.3f} with the patient's terms",
                score=r.score,
                source="hpo:phenotype.hpoa",
                provenance={"disease": r.disease.id},
            )
            for r in ranked
        ]
        ddx = [RankedDiagnosis(name=r.disease.name, code=r.disease.id) for r in ranked]
        answer.result = StructuredResult(choice=ddx[0].name, ddx=ddx) if ddx else None
        answer.text = "; ".join(f"{r.disease.name} ({r.disease.id})" for r in ranked)
        return answer


SPEC = register(
    MethodSpec(
        name="phenomizer",
        description="no LLM: rare diseases ranked by the HPO similarity of their annotations to the case's "
        "HPO terms (Resnik, funSimAvg; the classic baseline)",
        config=PhenomizerConfig,
        factory=lambda context, config: Phenomizer(config),
        uses_llm=False,
    )
)
