"""The retrieved context a knowledge-and-experience method answers from (DoctorRAG's C = expertise +
experience), each item an `Evidence` whose id resolves in its store."""

from __future__ import annotations

from dataclasses import dataclass, field

from clinrag.core.models import Evidence


@dataclass
class ClinicalContext:
    statements: list[Evidence] = field(default_factory=list)  # expertise: knowledge-base statements
    patients: list[Evidence] = field(default_factory=list)  # experience: similar past patients

    @property
    def evidence(self) -> list[Evidence]:
        return [*self.statements, *self.patients]

    def render_statements(self) -> str:
        return "\n".join(f"[{item.id}] {item.text}" for item in self.statements) or "(none)"

    def render_patients(self, max_chars: int | None = None) -> str:
        """Each patient under its id; a patient's labels (provenance "labels", e.g. the diagnosis) come
        first, so shortening a long record never cuts them off."""
        blocks = []
        for item in self.patients:
            labels = item.provenance.get("labels")
            head = f"[{item.id}]" + (f"\nOutcome: {'; '.join(labels)}" if labels else "")
            blocks.append(f"{head}\n{_clip(item.text, max_chars)}")
        return "\n\n".join(blocks) or "(none)"

    def render(self, *, max_patient_chars: int | None = None) -> str:
        """The context block of a prompt; `max_patient_chars` shortens long patient records (their full text
        stays in the evidence) so a small model's context window is not filled by one patient."""
        return (
            f"Medical knowledge:\n{self.render_statements()}\n\n"
            f"Similar past patients:\n{self.render_patients(max_patient_chars)}"
        )


def _clip(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    return text[:max_chars].rsplit(" ", 1)[0] + " …"
