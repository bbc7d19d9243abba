"""The consultation's optional prose layer (`prose=llm`): a capable chat model writes the answer's sentences
from the consultation's structure, Med-TextGrad refines them, and an evidence check gates every sentence.

Only `report.sentences` changes; the findings, differential, questions and next steps are never touched. The
model replies in JSON, one object per sentence with the ids of the evidence it rests on (schema-constrained
where the backend supports it). A reply that is not valid even after one repair is a typed error in the trace
and the template sentences stand (a model server that cannot be reached is an error, as for any method).
Med-TextGrad (`refine_iterations`, 0 = off) then refines the draft against the same evidence; a refined reply
that cannot be parsed leaves the draft.

The evidence check, sentence by sentence. A sentence cites at least one id, and every id it cites is evidence
of this consultation. Its support is the text of the evidence it cites, the parts of the report resting on
that evidence (a finding; a diagnosis with its probability and findings; a question; a next step), the
template sentences citing it, and the patient's age, sex, duration and onset. Against that support:
- a dose (a number with a unit: "500 mg") must be in the text of the cited evidence itself;
- every number must be in the support;
- every name the disease knowledge knows (disease, symptom, test, drug, care) must be in the support;
- most of its content words must be in the support (Med-TextGrad's term check);
- its meaning must be close to its support (MiniLM cosine ≥ SIMILARITY_MIN): a second signal, which catches a
  sentence about something else.
A sentence failing any of these is dropped, or with `unsupported=flag` kept and marked with the reasons; a
missing or invented citation and a dose not in the evidence always drop it. The sentences resting on no
evidence (the note on similar patients, the advice to see a doctor) and the triage (where to go and how soon,
with its safety net) stay the templates'. When none of the
model's sentences is left, the template sentences are used.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Literal

import spacy
from pydantic import BaseModel, Field, StringConstraints
from spacy.matcher import PhraseMatcher

from clinrag.consult.answer.report import (
    ConsultationReport,
    DiagnosisOut,
    FindingOut,
    NextStep,
    QuestionOut,
    Sentence,
    Unsupported,
)
from clinrag.consult.diseases import Disease
from clinrag.core.errors import ClinragError, StructuredOutputError
from clinrag.core.models import Answer, Evidence, Language
from clinrag.embed.base import Embedder
from clinrag.graph.matching import normalize
from clinrag.index.tokenize import Tokenizer
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import parse_structured
from clinrag.methods.answering import complete_structured
from clinrag.methods.context import ClinicalContext
from clinrag.methods.medtextgrad import LANGUAGE_NAMES, MedTextGrad, MedTextGradConfig, sentence_support

SIMILARITY_MIN = 0.4  # faithful paraphrases score 0.65–0.85 against their support, unrelated sentences < 0.1
MAX_SENTENCES = 12
SHOWN_DIAGNOSES = 5
PROSE_TOKENS = 1024  # a dozen sentences with their evidence ids, as JSON
MIN_NAME_CHARS = 3

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_DOSE = re.compile(
    r"(\d+(?:[.,]\d+)?)\s*(mg|mcg|µg|μg|ug|g|ml|l|iu|units?|tablets?|capsules?|puffs?|drops?)\b",
    re.IGNORECASE,
)
_MICROGRAMS = {"µg", "μg", "ug"}
_WORD = re.compile(r"[a-z0-9]+")

SYSTEM = """You are a careful physician who explains a consultation to the patient in plain words. You say \
only what the consultation and its evidence state, and you never give a dose."""

WRITE = """Write the answer to the patient below from the consultation: what was understood, the most likely \
diagnoses, the questions that would tell them apart, and the next steps.
Rules:
- Use only what the consultation states: add no diagnosis, finding, medicine, test, number or dose of \
your own.
- Give each probability exactly as written.
- Each sentence lists the ids of the evidence it rests on, copied exactly from the evidence list; every \
sentence cites at least one.
- Name medicines only as options a doctor may consider, never with a dose.
- Do not add advice to see a doctor: it follows your sentences.
- At most {max_sentences} short sentences, in {language}.

Patient:
{patient}

Consultation:
{consultation}

Evidence:
{evidence}

Reply in JSON: {{"sentences": [{{"text": "...", "evidence": ["id", ...], "kind": "finding" or \
"differential" or "question" or "step" or "abstention"}}]}}."""

REVISE = """{task}

A first draft of the answer:
{draft}

Revise the draft so that every sentence is supported by the evidence it cites and answers the patient. Reply \
in the same JSON format."""

TRIAGE_KINDS = ("urgency", "safety_net")  # never rewritten by the model


class DraftSentence(BaseModel):
    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    evidence: list[str] = Field(default_factory=list)
    kind: Literal["finding", "differential", "question", "step", "abstention"]


class Draft(BaseModel):
    """The model's answer: its sentences, each with the evidence ids it cites."""

    sentences: list[DraftSentence] = Field(min_length=1)


@dataclass
class Verdict:
    """The evidence check's verdict on one sentence."""

    reasons: list[str] = field(default_factory=list)  # empty: supported
    always_drop: bool = False  # a missing or invented citation, or a dose not in the evidence


class Names:
    """The names the disease knowledge knows, found in a text as whole words (case, accents and punctuation
    ignored): a spaCy PhraseMatcher over the names' normalised words."""

    def __init__(self, names: Iterable[str]) -> None:
        keys = {_key(name) for name in names}
        self._nlp = spacy.blank("xx")
        self._matcher = PhraseMatcher(self._nlp.vocab)
        kept = sorted(k for k in keys if len(k) >= MIN_NAME_CHARS and re.search("[a-z]", k))
        self._matcher.add("NAME", list(self._nlp.tokenizer.pipe(kept)))

    @classmethod
    def of(cls, diseases: Iterable[Disease]) -> Names:
        return cls(n for d in diseases for n in (d.name, *d.symptoms, *d.tests, *d.drugs, *d.cures))

    def found(self, text: str) -> list[str]:
        doc = self._nlp.make_doc(_key(text))
        return list(dict.fromkeys(doc[start:end].text for _, start, end in self._matcher(doc)))


class EvidenceCheck:
    """Checks the model's sentences against the evidence they cite and the report resting on it."""

    def __init__(
        self,
        report: ConsultationReport,
        evidence: list[Evidence],
        names: Names,
        embedder: Embedder,
        language: Language,
    ) -> None:
        self.evidence = {item.id: item.text for item in evidence}
        self.names = names
        self.embedder = embedder
        self.tokenizer = Tokenizer(language)
        self.resting: dict[str, list[str]] = defaultdict(list)  # evidence id → report parts resting on it
        for _, parts in sections(report):
            for text, ids in parts:
                for evidence_id in ids:
                    self.resting[evidence_id].append(text)
        for sentence in report.sentences:
            for evidence_id in sentence.evidence:
                self.resting[evidence_id].append(sentence.text)
        self.patient = patient_line(report)

    def support(self, cited: list[str]) -> list[str]:
        """What a sentence citing `cited` (ids of this consultation's evidence) may rest on."""
        if not cited:
            return []
        texts = [self.evidence[i] for i in cited] + [t for i in cited for t in self.resting[i]]
        return list(dict.fromkeys([*texts, self.patient] if self.patient else texts))

    def verdicts(self, sentences: list[DraftSentence]) -> list[Verdict]:
        supports = [self.support([i for i in s.evidence if i in self.evidence]) for s in sentences]
        similarities = self._similarities([s.text for s in sentences], supports)
        return [
            self._verdict(sentence, support, similarity)
            for sentence, support, similarity in zip(sentences, supports, similarities, strict=True)
        ]

    def _verdict(self, sentence: DraftSentence, support: list[str], similarity: float) -> Verdict:
        text = sentence.text
        verdict = Verdict()
        invented = [i for i in sentence.evidence if i not in self.evidence]
        cited = [self.evidence[i] for i in sentence.evidence if i in self.evidence]
        if not sentence.evidence:
            verdict.reasons.append("cites no evidence")
        if invented:
            verdict.reasons.append(f"cites {', '.join(invented)}, not evidence of this consultation")
        invented_doses = [dose for dose in doses(text) if not any(dose in doses(t) for t in cited)]
        if invented_doses:
            verdict.reasons.append(f"gives a dose its evidence does not: {', '.join(invented_doses)}")
        verdict.always_drop = bool(verdict.reasons)
        if not cited:
            return verdict
        joined = "\n".join(support)
        numbers = {_number(n) for n in _NUMBER.findall(joined)}
        unknown = [n for n in _NUMBER.findall(text) if _number(n) not in numbers]
        if unknown:
            verdict.reasons.append(f"gives numbers its evidence does not: {', '.join(unknown)}")
        words = f" {' '.join(_WORD.findall(normalize(joined)))} "
        unnamed = [name for name in self.names.found(text) if f" {name} " not in words]
        if unnamed:
            verdict.reasons.append(f"names what its evidence does not: {', '.join(unnamed)}")
        terms = set(self.tokenizer(joined))
        if not all(ok for _, ok in sentence_support(text, terms, self.tokenizer)):
            verdict.reasons.append("most of its words are not in its evidence")
        if similarity < SIMILARITY_MIN:
            verdict.reasons.append(f"reads unlike its evidence (similarity {similarity:.2f})")
        return verdict

    def _similarities(self, texts: list[str], supports: list[list[str]]) -> list[float]:
        """Each sentence's highest cosine similarity to a text of its support (0 without support)."""
        pool = list(dict.fromkeys(t for support in supports for t in support))
        if not pool:
            return [0.0] * len(texts)
        vectors = self.embedder.encode([*texts, *pool])
        sentences, supported = vectors[: len(texts)], vectors[len(texts) :]
        row = {text: index for index, text in enumerate(pool)}
        return [
            float(max(supported[[row[t] for t in support]] @ vector)) if support else 0.0
            for vector, support in zip(sentences, supports, strict=True)
        ]


class ProseWriter:
    """Writes the consultation's cited sentences with `model`, refines them with Med-TextGrad and keeps those
    the evidence check supports (see the module docstring)."""

    def __init__(
        self,
        model: ChatModel,
        embedder: Embedder,
        names: Names,
        *,
        refine_iterations: int = 1,
        unsupported: Unsupported = "drop",
    ) -> None:
        self.model = model
        self.embedder = embedder
        self.names = names
        self.unsupported = unsupported
        self.refiner = (
            MedTextGrad(model, MedTextGradConfig(iterations=refine_iterations, max_tokens=PROSE_TOKENS))
            if refine_iterations
            else None
        )

    async def awrite(
        self,
        report: ConsultationReport,
        evidence: list[Evidence],
        patient: str,
        language: Language,
        answer: Answer,
    ) -> ConsultationReport:
        """The report with its cited sentences written by the model and checked; usage and steps go to
        `answer`."""
        if not any(sentence.evidence for sentence in report.sentences):
            with answer.trace.step("consult.prose") as step:
                step.output = {"prose": "template", "reason": "no sentence rests on evidence"}
            return report
        task = WRITE.format(
            max_sentences=MAX_SENTENCES,
            language=LANGUAGE_NAMES[language],
            patient=patient,
            consultation=consultation_text(report),
            evidence="\n".join(f"[{item.id}] {item.text}" for item in evidence),
        )
        request = ChatRequest.of(task, system=SYSTEM, max_tokens=PROSE_TOKENS, temperature=0.0)
        try:
            with answer.trace.step("consult.prose.draft") as step:
                draft, _ = await complete_structured(self.model, request, Draft, answer, step)
                step.output = draft.model_dump()
        except StructuredOutputError as exc:
            with answer.trace.step("consult.prose.fallback") as step:
                step.output = {"prose": "template", "reason": f"{type(exc).__name__}: {exc}"}
            return report
        if self.refiner is not None:
            draft = await self._refine(draft, task, evidence, patient, language, answer)
        return self._checked(report, draft, evidence, language, answer)

    async def _refine(
        self,
        draft: Draft,
        task: str,
        evidence: list[Evidence],
        patient: str,
        language: Language,
        answer: Answer,
    ) -> Draft:
        """Med-TextGrad on the draft (its generator rewrites the draft under the optimised system prompt);
        a refinement that fails or replies no valid answer leaves the draft."""
        assert self.refiner is not None
        try:
            refinement = await self.refiner.arefine(
                system=SYSTEM,
                user=REVISE.format(task=task, draft=draft.model_dump_json()),
                patient=patient,
                context=ClinicalContext(statements=evidence),
                language=language,
                trace=answer.trace,
            )
            answer.usage += refinement.usage  # the refinement's own ledger: its calls, once
            refined = parse_structured(refinement.answer, Draft)
        except ClinragError as exc:  # the first generation failed, or the kept reply is no valid answer
            with answer.trace.step("consult.prose.refined") as step:
                step.output = {"kept": "draft"}
                step.error, step.error_type = str(exc), type(exc).__name__
            return draft
        with answer.trace.step("consult.prose.refined") as step:
            step.output = {"kept": "refined", "sentences": len(refined.sentences)}
        return refined

    def _checked(
        self,
        report: ConsultationReport,
        draft: Draft,
        evidence: list[Evidence],
        language: Language,
        answer: Answer,
    ) -> ConsultationReport:
        check = EvidenceCheck(report, evidence, self.names, self.embedder, language)
        kept: list[Sentence] = []
        dropped: list[Sentence] = []
        for sentence, verdict in zip(draft.sentences, check.verdicts(draft.sentences), strict=True):
            written = Sentence(
                text=sentence.text,
                evidence=list(dict.fromkeys(sentence.evidence)),
                kind=sentence.kind,
                by="llm",
                unsupported=verdict.reasons,
            )
            keep = not verdict.reasons or (self.unsupported == "flag" and not verdict.always_drop)
            (kept if keep else dropped).append(written)
        prose = "llm" if kept else "template"
        with answer.trace.step("consult.prose.check", unsupported=self.unsupported) as step:
            step.output = {
                "prose": prose,
                "written": len(draft.sentences),
                "kept": len(kept),
                "flagged": sum(bool(s.unsupported) for s in kept),
                "dropped": [{"text": s.text, "reasons": s.unsupported} for s in dropped],
            }
        # Kept sentences replace the cited template sentences; where to go and how soon stays the templates'
        # and comes first, and the sentences resting on no evidence stay.
        triage = [s for s in report.sentences if s.kind in TRIAGE_KINDS]
        rest = [s for s in report.sentences if not s.evidence and s.kind not in TRIAGE_KINDS]
        sentences = [*triage, *kept, *rest] if kept else report.sentences
        return report.model_copy(update={"sentences": sentences, "prose": prose, "dropped": dropped})


# --- the report as text: the model's prompt and the check's support ---------------------------------------


def finding_text(finding: FindingOut) -> str:
    said = f" (“{finding.text}”)" if finding.text else " (answered)"
    return f"{finding.name}: {finding.status}{said}"


def diagnosis_text(diagnosis: DiagnosisOut) -> str:
    code = f", ICD-10 {diagnosis.icd10}" if diagnosis.icd10 else ""
    return (
        f"{diagnosis.name}: {diagnosis.probability:.0%}{code}; reported findings that fit: "
        f"{', '.join(diagnosis.supporting) or 'none'}; denied: {', '.join(diagnosis.against) or 'none'}; "
        f"typical but not reported: {', '.join(diagnosis.not_reported) or 'none'}"
    )


def question_text(question: QuestionOut) -> str:
    return f"{question.text} (finding: {question.finding})"


def step_text(step: NextStep) -> str:
    return f"{step.diagnosis}: {step.kind} {step.name}"


Parts = list[tuple[str, list[str]]]  # each part of a report as text, with the evidence ids it rests on


def sections(report: ConsultationReport, diagnoses: int | None = None) -> list[tuple[str, Parts]]:
    """The report's findings, differential (its first `diagnoses`), questions and next steps as text."""
    return [
        ("Findings", [(finding_text(f), [f.evidence]) for f in report.findings]),
        (
            "Differential, most likely first",
            [(diagnosis_text(d), d.evidence) for d in report.differential[:diagnoses]],
        ),
        ("Questions that would tell them apart", [(question_text(q), q.evidence) for q in report.questions]),
        ("Next steps for the leading diagnoses", [(step_text(s), [s.evidence]) for s in report.next_steps]),
    ]


def patient_line(report: ConsultationReport) -> str:
    facts = [
        f"age {report.age}" if report.age is not None else "",
        f"sex {report.sex}" if report.sex else "",
        report.duration or "",
        f"onset {report.onset}" if report.onset else "",
    ]
    return ", ".join(fact for fact in facts if fact)


def consultation_text(report: ConsultationReport) -> str:
    """The report as the model reads it: each part followed by the ids of its evidence."""
    blocks = [f"Patient: {patient_line(report) or 'no age, sex or duration given'}"]
    for title, parts in sections(report, SHOWN_DIAGNOSES):
        lines = [f"- {text} [{', '.join(ids)}]" for text, ids in parts] or ["- none"]
        blocks.append("\n".join([f"{title}:", *lines]))
    blocks.append(f"Similar past patients: {report.experience}")
    if report.abstained:
        blocks.append(f"No diagnosis is given with confidence: {report.abstention_reason}")
    return "\n\n".join(blocks)


def doses(text: str) -> list[str]:
    """The doses in `text`, normalised ("500mg" and "500 MG" → "500 mg")."""
    found = []
    for number, unit in _DOSE.findall(text):
        unit = unit.lower()
        found.append(f"{_number(number)} {'mcg' if unit in _MICROGRAMS else unit}")
    return list(dict.fromkeys(found))


def _number(text: str) -> str:
    return text.replace(",", ".")


def _key(name: str) -> str:
    return " ".join(_WORD.findall(normalize(name)))
