"""The patient side of an LLM doctor's free-text questions.

A coded patient (DDXPlus) is asked through question matching: the doctor's question is embedded and
compared with the catalogue's questions (cosine); the closest one above `threshold` is answered exactly by
the structured patient, anything else gets "I don't know." with no finding revealed. A patient without
codes (iCraft-MD) is the LLM patient. Both record each exchange; the coded one also what was revealed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np

from clinrag.core.usage import Usage
from clinrag.embed.base import Embedder
from clinrag.methods.meddx.llm_patient import LLMPatient
from clinrag.methods.meddx.structured_patient import Reply, StructuredPatient
from clinrag.patients.loaders import VALUE_SEPARATOR, EvidenceDecoder

# Chosen on paraphrases of catalogue questions ("Are you coughing?" → "Do you have a cough?" 0.79) against
# questions outside it ("How old are you?" best 0.33, "What brings you in today?" 0.31).
MATCH_THRESHOLD = 0.6
UNKNOWN = "I don't know."


@dataclass(frozen=True)
class Exchange:
    """One question and its answer; `evidence` and `match_score` say which coded question it was taken
    for (coded patients only)."""

    question: str
    answer: str
    evidence: str | None = None
    match_score: float | None = None


class Interviewee(Protocol):
    usage: Usage  # what answering cost (LLM patients); not the doctor's cost
    codes_field: str  # the `PatientProfile.codes` field its codes are in

    async def reply(self, question: str) -> Exchange: ...

    def codes(self) -> list[str]: ...


class QuestionMatcher:
    """The catalogue question closest in meaning to a free-text question, by embedding cosine."""

    def __init__(
        self,
        catalogue: EvidenceDecoder,
        embedder: Embedder,
        threshold: float = MATCH_THRESHOLD,
        *,
        names: Sequence[str] | None = None,  # the evidences to match among (default: all with a question)
    ):
        self.catalogue = catalogue
        self.embedder = embedder
        self.threshold = threshold
        self._names = [n for n in (names or catalogue.evidences) if catalogue.question(n)]

    @cached_property
    def _index(self) -> tuple[list[str], np.ndarray]:
        return self._names, self.embedder.encode([self.catalogue.question(n) or "" for n in self._names])

    def match(self, question: str) -> tuple[str | None, float]:
        """(the evidence asked about or None, the best cosine)."""
        names, vectors = self._index
        scores = vectors @ self.embedder.encode([question])[0]
        best = int(np.argmax(scores))
        score = float(scores[best])
        return (names[best] if score >= self.threshold else None), score


@dataclass
class CodedInterviewee:
    """A structured patient answering free-text questions through a `QuestionMatcher`."""

    patient: StructuredPatient
    matcher: QuestionMatcher
    usage: Usage = field(default_factory=Usage)
    codes_field: str = "evidence"
    replies: list[Reply] = field(default_factory=list)  # coded answers, in order (for experience updates)

    async def reply(self, question: str) -> Exchange:
        evidence, score = self.matcher.match(question)
        if evidence is None:
            return Exchange(question, UNKNOWN, None, round(score, 4))
        reply = self.patient.ask(evidence)
        self.replies.append(reply)
        return Exchange(question, reply.text, evidence, round(score, 4))

    def codes(self) -> list[str]:
        """The coded findings known so far (initial one included), as the patient base codes them."""
        return [
            code
            for reply in self.patient.revealed.values()
            if reply.present
            for code in (
                [f"{reply.evidence}{VALUE_SEPARATOR}{v}" for v in sorted(reply.values)] or [reply.evidence]
            )
        ]


@dataclass
class SimulatedInterviewee:
    """The LLM patient; its model calls are counted in `usage`."""

    patient: LLMPatient
    codes_field: str = "evidence"  # (it reveals no codes)

    @property
    def usage(self) -> Usage:
        return self.patient.usage

    async def reply(self, question: str) -> Exchange:
        return Exchange(question, (await self.patient.ask(question)).text())

    def codes(self) -> list[str]:
        return []
