"""The patient's findings as the report lists them, each cited as evidence in the patient's words (or as
answered to a question, or as both stated and denied)."""

from __future__ import annotations

from clinrag.consult.answer.report import ConsultationReport, FindingOut
from clinrag.consult.understand.finding_names import display_name
from clinrag.consult.understand.finding_types import Contradiction, Findings, FindingStatus
from clinrag.consult.understand.vocabulary import Concept
from clinrag.core.models import Evidence
from clinrag.terms.hpo import ONSET_CLASSES


def findings_report(
    concepts: dict[str, Concept],
    extracted: Findings,
    said: dict[str, tuple[FindingStatus, str]],
    contradicted: dict[str, Contradiction],
    patients: int | None,
    evidence: dict[str, Evidence],
) -> ConsultationReport:
    """The report of what is known of the patient (`said`: concept id → status and words), before any
    reasoning; `patients`: the past patients the probabilities draw on."""
    findings = [
        finding_out(concepts[concept], status, text, contradicted.get(concept), evidence)
        for concept, (status, text) in said.items()
    ]
    return ConsultationReport(
        findings=findings,
        age=extracted.age,
        sex=extracted.sex,
        duration_days=extracted.duration.days if extracted.duration else None,
        duration_written=extracted.duration.text if extracted.duration else None,
        onset=extracted.onset.text if extracted.onset else None,
        onset_class=", ".join(ONSET_CLASSES[code].label for code in extracted.onset_classes) or None,
        subject=extracted.subject,
        not_understood=list(extracted.not_understood),
        patients=patients,
    )


def finding_out(
    concept: Concept,
    status: FindingStatus,
    text: str,
    contradiction: Contradiction | None,
    evidence: dict[str, Evidence],
) -> FindingOut:
    """One finding of the report, its evidence (`finding:<concept id>`) added to `evidence`."""
    said = f" (“{text}”)" if text else " (answered)"
    if contradiction is not None:
        said = f" (stated: {_quoted(contradiction.stated)}; denied: {_quoted(contradiction.denied)})"
    item = Evidence(
        id=f"finding:{concept.id}",
        kind="term",
        text=f"{display_name(concept)}: {status}{said}",
        source="patient",
        provenance={
            "concept": concept.id,
            "status": status,
            "text": text,
            "ids": list(concept.ids),
            **({"contradiction": contradiction.model_dump()} if contradiction is not None else {}),
        },
    )
    evidence[item.id] = item
    return FindingOut(
        concept=concept.id,
        name=display_name(concept),
        status=status,
        text=text,
        evidence=item.id,
        contradiction=contradiction,
    )


def _quoted(sentences: list[str]) -> str:
    return ", ".join(f"“{sentence}”" for sentence in sentences)
