"""What the DDxDriver knows about one patient as the consultation goes on: the initial information, the
dialogue, the knowledge summaries and the differential after each diagnosis."""

from __future__ import annotations

from dataclasses import dataclass, field

from clinrag.core.models import Case, DdxSnapshot, Evidence, RankedDiagnosis
from clinrag.methods.meddx.interviewee import Exchange, Interviewee


@dataclass
class KnowledgeNote:
    """A knowledge-retrieval summary and the evidence its citations point to."""

    query: str
    summary: str
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Consultation:
    case: Case
    interviewee: Interviewee | None
    exchanges: list[Exchange] = field(default_factory=list)
    notes: list[KnowledgeNote] = field(default_factory=list)
    ddx: list[RankedDiagnosis] = field(default_factory=list)
    history: list[DdxSnapshot] = field(default_factory=list)

    @property
    def initial(self) -> str:
        return self.case.patient.initial_presentation.strip() if self.case.patient else ""

    def dialogue_text(self) -> str:
        return "\n".join(f"Doctor: {e.question}\nPatient: {e.answer}" for e in self.exchanges)

    def profile_text(self) -> str:
        """The patient as known now: initial information, then every answer so far."""
        dialogue = self.dialogue_text()
        return f"{self.initial}\n\nHistory taken so far:\n{dialogue}" if dialogue else self.initial

    def knowledge_text(self) -> str:
        """The latest knowledge summary (earlier ones are in the trace; a small context holds one)."""
        return self.notes[-1].summary if self.notes else ""

    def current_case(self) -> Case:
        """The case as a diagnosis or a similar-patient search should see it now: the profile so far as its
        presentation, and the coded findings revealed so far as its codes."""
        if self.case.patient is None:
            return self.case
        patient = self.case.patient.model_copy(update={"initial_presentation": self.profile_text()})
        codes = self.interviewee.codes() if self.interviewee else []
        if codes:
            patient.codes = {**patient.codes, self.interviewee.codes_field: list(dict.fromkeys(codes))}
        return self.case.model_copy(update={"patient": patient})

    def record_ddx(self, ddx: list[RankedDiagnosis]) -> DdxSnapshot:
        self.ddx = ddx
        snapshot = DdxSnapshot(iteration=len(self.history), questions_asked=len(self.exchanges), ddx=ddx)
        self.history.append(snapshot)
        return snapshot

    def top(self, k: int) -> list[str]:
        return [d.name for d in self.ddx[:k]]

    def ddx_text(self, k: int | None = None) -> str:
        """The differential as a line: each diagnosis with its probability where it has one (a generated
        list ranks without probabilities)."""
        return "; ".join(
            d.name if d.probability is None else f"{d.name} {d.probability:.0%}" for d in self.ddx[:k]
        )
