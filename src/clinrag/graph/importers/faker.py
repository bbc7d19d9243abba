"""The disease table of `faker-healthcare-provider`: 158 common diseases in English, French and Chinese,
aligned row by row, each with an ICD-10 code, symptoms, medications and a medical specialty.

It is a generator of TEST DATA, opt-in only and never in the defaults: its title says so in every
reference, and its medications are not imported (nobody should be told a drug on a test-data generator's
word).

Mapped: symptoms → HAS_SYMPTOM; medications are skipped and counted. The specialty (a department) fits no
label of the schema: it is counted as skipped and written into the description, with the ICD-10 title and the
disease's names in the other languages (the row's names, when the rows carry the same ICD-10 code).

The English table's symptom names that are not HPO's own names are linked to HPO where
`data/faker_symptoms_hpo.jsonl` says: the HPO finding a name is ("Coughing Blood" is Hemoptysis), or the one
it is a kind of ("Morning Headaches" of Headache), so a patient's words and the other sources' diseases reach
the same finding.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import srsly

from clinrag.core.errors import InvalidInputError
from clinrag.graph.importers.ddxplus import icd10_description
from clinrag.graph.importers.records import (
    DiseaseRecord,
    FindingTerm,
    SourceRecords,
    SourceTraits,
    clean_name,
)
from clinrag.graph.importers.registry import GraphSource, register
from clinrag.graph.matching import normalize
from clinrag.graph.schema import Relation

LANGUAGES = ("en", "fr", "zh")
SPECIALTY = "medical specialties (departments): no label in the schema; kept in the description"
NO_NAME = "diseases without a name"
NO_RELATION = "diseases without symptoms"
MEDICATIONS = "medications: a test-data table recommends no drug"
_LANGUAGE_NAMES = {"en": "English", "fr": "French", "zh": "Chinese"}
# an English symptom name → the HPO finding it is or is a kind of: {"symptom", "hpo", "label", "same"}
SYMPTOM_TERMS = Path(__file__).parent / "data" / "faker_symptoms_hpo.jsonl"


def source_name(language: str) -> str:
    return "faker-diseases" if language == "en" else f"faker-diseases-{language}"


def faker_table(language: str) -> dict[str, Any]:
    if language == "fr":
        from faker_healthcare.fr_FR.disease_correlations import DISEASE_CORRELATIONS
    elif language == "zh":
        from faker_healthcare.zh_CN.disease_correlations import DISEASE_CORRELATIONS
    elif language == "en":
        from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS
    else:
        raise InvalidInputError(f"the faker disease table has no language {language!r}: {LANGUAGES}")
    return DISEASE_CORRELATIONS


def read_faker_diseases(language: str = "en", *, limit: int | None = None) -> SourceRecords:
    """At most `limit` diseases of the table in `language` (names, symptoms and drugs in that language)."""
    table = faker_table(language)
    others = {lang: list(faker_table(lang).items()) for lang in LANGUAGES if lang != language}
    name = source_name(language)
    fingerprint = f"faker-healthcare-provider={version('faker-healthcare-provider')}:limit={limit}"
    result = SourceRecords(name, f"packaged:{name}", fingerprint)
    result.notes.append("specialty kept in Disease.description, not as a relation")
    for row, (disease, entry) in enumerate(table.items()):
        if limit is not None and result.read >= limit:
            break
        result.read += 1
        key = f"{row}:{entry.get('icd10', '')}"
        disease_name = clean_name(disease)
        if disease_name is None:
            result.skips.add(NO_NAME, key)
            continue
        record = DiseaseRecord(key, disease_name, _description(row, entry, others))
        for symptom in entry.get("symptoms") or []:
            record.add(Relation.HAS_SYMPTOM, symptom, result.skips)
        if entry.get("medications"):
            result.skips.add(MEDICATIONS, key, len(entry["medications"]))
        if entry.get("medical_specialty"):
            result.skips.add(SPECIALTY, key)
        result.keep(record, NO_RELATION)
    return result


def faker_names_in(language: str) -> dict[str, tuple[str, ...]]:
    """The English table's symptom names → their names in `language`: the tables are aligned row by row and
    symptom by symptom (a name may have two translations in different rows)."""
    names: dict[str, tuple[str, ...]] = {}
    for english, other in zip(faker_table("en").values(), faker_table(language).values(), strict=True):
        pairs = zip(english.get("symptoms") or [], other.get("symptoms") or [], strict=False)
        for symptom, translated in pairs:
            if translated not in names.get(symptom, ()):
                names[symptom] = (*names.get(symptom, ()), translated)
    return names


def symptom_terms(path: Path = SYMPTOM_TERMS) -> dict[str, dict[str, Any]]:
    """English symptom name → its HPO finding: {"hpo": "HP:0002105", "label": "Hemoptysis", "same": bool,
    "kinds": [{"hpo", "label"}, …]}; "hpo" is null for a name broader than any HPO finding ("Swelling"),
    whose kinds are HPO findings (Edema, Joint swelling)."""
    return {row["symptom"]: row for row in srsly.read_jsonl(path)}


def faker_findings(_: str = "") -> list[FindingTerm]:
    """The English table's symptoms that `data/faker_symptoms_hpo.jsonl` links to HPO, each with the id and
    name its plain symptom name has in the vocabulary: named by the HPO label too when it is that finding
    (the vocabulary then joins the two), else a kind of the HPO finding (named by its HPO id, which the
    vocabulary resolves), and with the HPO findings that are kinds of it. The table's other symptoms stay
    plain names."""
    return [
        FindingTerm(
            f"symptom:{normalize(symptom)}",
            symptom,
            synonyms=(link["label"],) if link["same"] else (),
            parents=(link["hpo"],) if link["hpo"] and not link["same"] else (),
            kinds=tuple(kind["hpo"] for kind in link["kinds"]),
        )
        for symptom, link in symptom_terms().items()
    ]


def _description(row: int, entry: dict[str, Any], others: dict[str, list[tuple[str, Any]]]) -> str | None:
    code = str(entry.get("icd10") or "")
    parts = [icd10_description(code)]
    if specialty := clean_name(entry.get("medical_specialty")):
        parts.append(f"Specialty: {specialty}")
    for language, rows in others.items():
        if row < len(rows) and rows[row][1].get("icd10") == code and (other := clean_name(rows[row][0])):
            parts.append(f"{_LANGUAGE_NAMES[language]}: {other}")
    text = ". ".join(p for p in parts if p)
    return f"{text}." if text else None


for _language in LANGUAGES:
    register(
        GraphSource(
            f"packaged:{source_name(_language)}",
            lambda _, limit, language=_language: read_faker_diseases(language, limit=limit),
            # a plain symptom list, each disease's cardinal symptom first (angina: chest pain; gout: joint
            # pain; croup: barking cough)
            SourceTraits(
                lay=True,
                askable=True,
                salience_ordered=True,
                title="TEST DATA, not medical knowledge: faker-healthcare-provider's generated disease table",
            ),
            findings=faker_findings if _language == "en" else None,
            names_in=faker_names_in if _language == "en" else None,
        )
    )
