"""MEDDxAgent's diagnosis-strategy agent: a ranked differential of ten from the case's options (or, for a case
without, the candidates `propose` gives), from the patient as known so far and the latest knowledge
summary, by one of five strategies — zero-shot, chain of thought, fixed few-shot, dynamic few-shot (the
most similar past patients as the examples), and chain of thought with dynamic few-shot.

With `ranking="likelihood"` every option is scored by its per-token log-likelihood as the continuation of
the prompt (after the reasoning, for the chain-of-thought strategies), so the differential is a distribution
over all options and never a parse failure. With `ranking="generated"`, as in MEDDxAgent, the model writes
the ten most likely candidates, most likely first, as JSON constrained to the candidates' names: a ranking
without probabilities (an invalid reply is a `StructuredOutputError`, recorded by the driver)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, create_model

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import DDX_SIZE, Answer, Case, Evidence, RankedDiagnosis, TraceStep
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import complete, complete_structured, option_distribution, ranked_result
from clinrag.methods.meddx.consultation import Consultation
from clinrag.patients.record import PatientRecord
from clinrag.patients.similarity import Neighbours, SimilarPatients, patient_evidence

Strategy = Literal["zero_shot", "cot", "fixed_few_shot", "dynamic_few_shot", "cot_dynamic_few_shot"]
EXAMPLE_CHARS = 500

SYSTEM = "You are an expert physician making a differential diagnosis."
EXAMPLE = "Example patient: {text}\nDiagnosis: {label}"
BODY = """{examples}Patient: {profile}
{knowledge}{context}
Candidate diagnoses:
{options}"""
CONCLUDE = "\n\nThe most likely diagnosis is:"
GENERATE = """

List the {n} most likely of the candidate diagnoses for this patient, most likely first, each named as in \
the list. Reply in JSON with "diagnoses"."""
# with `with_context`, what MEDDxAgent's diagnosis prompt also holds: the differential so far and what the
# driver asked of this step
PREVIOUS = "\nThe differential so far: {ddx}"
INSTRUCTIONS = "\nInstructions for this step: {given}"
REASON = """{body}

Think step by step: which candidate diagnoses fit this patient's findings best, and which do not? \
Answer in at most five sentences."""


@dataclass
class DiagnosisAgent:
    model: ChatModel
    strategy: Strategy = "zero_shot"
    records: Sequence[PatientRecord] = ()
    labels: dict[str, list[str]] | None = None
    shots: int = 3
    ranking: Literal["likelihood", "generated"] = "likelihood"
    reasoning_tokens: int = 192
    with_context: bool = False  # show the differential so far and the driver's instructions
    # a case without options: what proposes its candidates (`candidates.knowledge_candidates`)
    propose: Callable[[Case], dict[str, str]] | None = None
    # dynamic few-shot: the similar-patient search (by default over `records`, by their codes alone; narrative
    # cases need one that can embed them, as `MethodContext.similar_patients` gives)
    similar: SimilarPatients | None = None

    def __post_init__(self) -> None:
        if self.strategy.endswith("few_shot") and not any(
            (self.labels or {}).get(r.id) for r in self.records
        ):
            raise InvalidInputError(
                f"the {self.strategy} strategy needs a patient base with labelled patients"
            )
        if "dynamic" not in self.strategy:
            self.similar = None
        elif self.similar is None:
            self.similar = SimilarPatients(self.records)

    async def diagnose(
        self, consultation: Consultation, answer: Answer, instructions: str = ""
    ) -> tuple[list[RankedDiagnosis], list[Evidence]]:
        """The differential, and the example patients shown (as evidence); `instructions`: what the driver
        asked of this step (shown with `with_context`)."""
        case = consultation.case
        if not case.options and self.propose is not None:
            case = case.model_copy(update={"options": self.propose(consultation.current_case())})
        texts = list(case.options.values())
        if not texts:
            raise InvalidInputError(f"case {case.id} has no options to rank a differential from")
        knowledge = consultation.knowledge_text()
        examples = self._examples(consultation)
        body = BODY.format(
            examples="".join(f"{_example(r, self.labels)}\n\n" for r, _ in examples),
            profile=consultation.profile_text(),
            knowledge=f"\nRelevant medical knowledge: {knowledge}\n" if knowledge else "",
            context=self._context(consultation, instructions),
            options="\n".join(f"- {t}" for t in texts),
        )
        prompt = body + CONCLUDE
        with answer.trace.step("meddx.diagnosis", strategy=self.strategy, options=len(texts)) as step:
            if self.strategy.startswith("cot"):
                request = ChatRequest.of(
                    REASON.format(body=body), system=SYSTEM, max_tokens=self.reasoning_tokens
                )
                completion = await complete(self.model, request, answer, step)
                step.output["reasoning"] = completion.text
                prompt = f"{body}\n\nReasoning: {completion.text.strip()}{CONCLUDE}"
            if self.ranking == "generated":
                reasoned = prompt.removesuffix(CONCLUDE)
                ddx = await self._generated(case, reasoned, answer, step)
            else:
                request = ChatRequest.of(prompt, system=SYSTEM)
                distribution = await option_distribution(self.model, request, case, answer, continuation=True)
                ddx = ranked_result(case, distribution).ddx
            step.output["ddx"] = [
                [d.name, None if d.probability is None else round(d.probability, 4)] for d in ddx
            ]
            step.output["examples"] = [r.id for r, _ in examples]
        return ddx, patient_evidence(examples, self.labels)

    async def _generated(
        self, case: Case, body: str, answer: Answer, step: TraceStep
    ) -> list[RankedDiagnosis]:
        """The model's own ranked list of candidates (at most `DDX_SIZE`, each once, in its order)."""
        names = tuple(dict.fromkeys(case.options.values()))
        schema = create_model(
            "GeneratedDifferential",
            diagnoses=(list[Literal[names]], Field(min_length=1, max_length=DDX_SIZE)),  # type: ignore[valid-type]
        )
        request = ChatRequest.of(body + GENERATE.format(n=min(DDX_SIZE, len(names))), system=SYSTEM)
        reply, _ = await complete_structured(self.model, request, schema, answer, step)
        return [RankedDiagnosis(name=name) for name in dict.fromkeys(reply.diagnoses)]

    def _context(self, consultation: Consultation, instructions: str) -> str:
        if not self.with_context:
            return ""
        shown = consultation.ddx_text(5)
        previous = PREVIOUS.format(ddx=shown) if shown else ""
        given = INSTRUCTIONS.format(given=instructions.strip()) if instructions.strip() else ""
        return f"{previous}{given}\n" if previous or given else ""

    def _examples(self, consultation: Consultation) -> Neighbours:
        """The labelled example patients of a few-shot strategy (with their similarity when dynamic)."""
        if not self.strategy.endswith("few_shot"):
            return []
        if self.similar is not None:
            _, found = self.similar.find(consultation.current_case(), self.shots)
            return [(r, s) for r, s in found if (self.labels or {}).get(r.id)]
        return [(r, 1.0) for r in self._fixed(consultation.case)]

    def _fixed(self, case: Case) -> list[PatientRecord]:
        """The first labelled patient of each diagnosis in the base's order, never the case itself."""
        chosen: dict[str, PatientRecord] = {}
        for record in self.records:
            label = (self.labels or {}).get(record.id)
            if label and record.id != case.id and label[0] not in chosen:
                chosen[label[0]] = record
                if len(chosen) == self.shots:
                    break
        return list(chosen.values())


def _example(record: PatientRecord, labels: dict[str, list[str]] | None) -> str:
    return EXAMPLE.format(text=_clip(record.narrative), label="; ".join((labels or {})[record.id]))


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS].rsplit(" ", 1)[0] + " …"
