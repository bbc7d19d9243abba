"""clinrag's clinical knowledge base (`clinrag.conditions`): common and can't-miss conditions written from
guidelines and reviews, each fact citing a registered document.

Mapped: each feature → HAS_SYMPTOM, named by its HPO term's name (or, for a DDXPlus evidence, by its question,
as the DDXPlus importer names it), with its frequency (an HPO class's middle, or the share the source
states) and the ids of the documents that state it as the edge's references; a risk factor, exposure or
history given as a DDXPlus antecedent is the record's `risk_factors` (weighed as DDXPlus's are); findings
that argue against the condition are the record's `excluded`; tests → RECOMMEND_TEST, management in words →
RECOMMEND_CURE, each citing its documents. The condition's ICD-10-CM code and title and its French and
Chinese names make the description; a condition that is one of DDXPlus's is named as DDXPlus names it, so
the two sources' facts join. Its ages of onset, its severity (from its urgency: a can't-miss emergency 1,
another can't-miss 2, an emergency 2, urgent 3, soon 4, self-care 5, DDXPlus's scale) and how common it is
in primary care (consultations per 1,000, the middle of its class) are the record's attributes."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.conditions.records import PREVALENCE_PER_1000, Condition
from clinrag.graph.importers.ddxplus import EVIDENCES, PACKAGED, icd10_description
from clinrag.graph.importers.faker import faker_findings
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, SourceTraits, clean_name
from clinrag.graph.importers.registry import GraphSource, register
from clinrag.graph.schema import Relation
from clinrag.terms.hpo import hpo_terms

NAME = "conditions"
NO_FEATURE = "conditions without a usable feature"
_SEVERITY = {"emergency": 2, "urgent": 3, "soon": 4, "self_care": 5}


def read_conditions(*, limit: int | None = None) -> SourceRecords:
    catalogue = packaged_catalogue()
    fingerprint = f"{_digest(catalogue.folder)}:limit={limit}"
    result = SourceRecords(NAME, f"packaged:{NAME}", fingerprint)
    result.notes.append("features with their frequency and documents; DDXPlus antecedents as risk factors")
    for condition in catalogue.conditions:
        if limit is not None and result.read >= limit:
            break
        result.read += 1
        result.keep(condition_record(condition, result), NO_FEATURE)
    return result


def condition_record(condition: Condition, result: SourceRecords) -> DiseaseRecord:
    record = DiseaseRecord(
        condition.id,
        condition.ddxplus or condition.name,
        _description(condition),
        onset=condition.onset.ages,
        severity=severity(condition),
        prevalence=PREVALENCE_PER_1000[condition.prevalence.primary_care],
        synonyms=list(dict.fromkeys((condition.name, *condition.names.get("en", ())))),
    )
    antecedents = _ddxplus_antecedents()
    for feature in condition.features:
        name = _finding_name(feature.hpo, feature.ddxplus)
        if name is None:
            result.skips.add("features naming an unknown DDXPlus evidence", condition.id)
        elif feature.ddxplus in antecedents:
            record.risk_factors.append(name)
        else:
            record.add(Relation.HAS_SYMPTOM, name, result.skips)
            edge = (Relation.HAS_SYMPTOM, name)
            record.frequencies.setdefault(edge, feature.share)
            record.references.setdefault(edge, list(feature.source))
    record.excluded += [n for f in condition.against if (n := _finding_name(f.hpo, f.ddxplus))]
    for relation, items in (
        (Relation.RECOMMEND_TEST, [(t.name, t.source) for t in condition.tests]),
        (Relation.RECOMMEND_CURE, [(m.text, m.source) for m in condition.management]),
    ):
        for text, cited in items:
            record.add(relation, text, result.skips)
            record.references.setdefault((relation, clean_name(text) or text), list(cited))
    return record


def severity(condition: Condition) -> int:
    urgency = condition.urgency
    if urgency.cant_miss:
        return 1 if urgency.level == "emergency" else 2
    return _SEVERITY[urgency.level]


def _description(condition: Condition) -> str:
    parts = [icd10_description(condition.icd10) or f"ICD-10 {condition.icd10}"]
    if condition.ddxplus and condition.ddxplus != condition.name:
        parts.append(condition.name)
    for language, label in (("fr", "French"), ("zh", "Chinese")):
        if names := condition.names.get(language):
            parts.append(f"{label}: {names[0]}")
    return ". ".join(parts) + "."


def _finding_name(hpo: str | None, ddxplus: str | None) -> str | None:
    if hpo is not None:
        term = hpo_terms().get(hpo)
        return term.name if term is not None else None
    return _ddxplus_questions().get(ddxplus or "")


@cache
def _ddxplus_evidences() -> dict[str, dict]:
    return json.loads((PACKAGED / EVIDENCES).read_text(encoding="utf-8"))


@cache
def _ddxplus_questions() -> dict[str, str]:
    """Yes/no evidence code → its question, as the DDXPlus importer names the finding."""
    return {
        code: question
        for code, evidence in _ddxplus_evidences().items()
        if evidence.get("data_type") == "B" and (question := clean_name(evidence.get("question_en")))
    }


@cache
def _ddxplus_antecedents() -> frozenset[str]:
    return frozenset(code for code, e in _ddxplus_evidences().items() if e.get("is_antecedent"))


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.jsonl")):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


TRAITS = SourceTraits(
    lay=True,
    askable=True,
    salience_ordered=True,
    frequencies=True,
    typical_findings=True,
    severity=True,
    risk_factors=True,
    title="clinrag's clinical knowledge base (conditions written from guidelines and reviews)",
)
register(
    GraphSource(
        f"packaged:{NAME}",
        lambda _, limit: read_conditions(limit=limit),
        TRAITS,
        # everyday English names of findings ("Runny Nose", "Increased Thirst") as
        # `data/faker_symptoms_hpo.jsonl` links them to HPO: words for the vocabulary only, no fact of the
        # test-data table they were listed in
        findings=faker_findings,
        names_in=lambda language: packaged_catalogue().names_in(language),
    )
)
