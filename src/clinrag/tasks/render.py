"""How a case is shown to a model: what a non-interactive method may see of the patient, then the question."""

from __future__ import annotations

from clinrag.core.models import Case


def case_text(case: Case) -> str:
    """The patient's initial presentation (what is known up front; hidden findings are for simulators)
    followed by the question."""
    if case.patient is None:
        return case.question.strip()
    return f"Patient: {case.patient.initial_presentation.strip()}\n\n{case.question.strip()}"


def options_block(options: dict[str, str]) -> str:
    return "\n".join(f"{key}. {text}" for key, text in options.items())
