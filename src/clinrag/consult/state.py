"""One patient's consultation: the findings understood from the text (and given as codes), and the answers to
questions given since; the interactive session extends it."""

from __future__ import annotations

from dataclasses import dataclass, field

from clinrag.consult.understand.finding_types import Contradiction, Findings, FindingStatus
from clinrag.core.provenance import Origin


@dataclass
class ConsultState:
    """What is known of one patient: the findings understood from the text and the answers given since."""

    findings: Findings
    answered: list[tuple[str, FindingStatus]] = field(default_factory=list)  # (concept id, answer)
    exclude: frozenset[Origin] = frozenset()  # the records a statement must not come from (the case's own)
    # The patient gave an account in words: what it leaves unsaid counts a little (see `differential`); a
    # record of codes says nothing of what it leaves out.
    spoken: bool = True

    def statuses(self) -> dict[str, tuple[FindingStatus, str]]:
        """Concept id → (status, the words it was said in); the latest word on a concept wins."""
        said = {f.concept_id: (f.status, f.text) for f in self.findings.findings}
        return said | {concept: (status, "") for concept, status in self.answered}

    def contradictions(self) -> dict[str, Contradiction]:
        """Concept id → how the text both states and denies it, while no answer has settled it."""
        answered = {concept for concept, _ in self.answered}
        return {
            f.concept_id: f.contradiction
            for f in self.findings.findings
            if f.contradiction is not None and f.concept_id not in answered
        }

    def known(self) -> dict[str, bool]:
        """Concept id → present / absent (uncertain findings are left out)."""
        return {c: status == "present" for c, (status, _) in self.statuses().items() if status != "uncertain"}
