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

    def render_patients(self) -> str:
        return "\n\n".join(f"[{item.id}]\n{item.text}" for item in self.patients) or "(none)"

    def render(self) -> str:
        return (
            f"Medical knowledge:\n{self.render_statements()}\n\n"
            f"Similar past patients:\n{self.render_patients()}"
        )
