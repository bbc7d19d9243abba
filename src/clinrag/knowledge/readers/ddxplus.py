"""DDXPlus condition knowledge as a record source: each pathology of `release_conditions.json` with the
evidences (symptoms and antecedents) it is defined by, worded through the English questions of
`release_evidences.json` found beside it. This is disease knowledge (what a textbook says each condition
presents with), not patient data.

Declarative form: the condition's typical symptoms, then its risk factors, a few evidences per statement;
raw form (`--no-rewrite`): the whole condition record as one text. Tags are the chapters of the condition's
ICD-10 codes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import INVALID_RECORDS, Reading, ReadReport, existing_file, read_json
from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.formats import Sample, SourceFormat, register
from clinrag.knowledge.items import SourceItem
from clinrag.terms.icd10 import chapter_of

SOURCE = "ddxplus-conditions"
EVIDENCES_PER_STATEMENT = 5
_CODE = re.compile(r"[A-Z]\d{2}(?:\.\d+)?")
UNKNOWN_EVIDENCES = "evidences missing from release_evidences.json"


def read_ddxplus_conditions(path: str | Path) -> Reading[SourceItem]:
    """Record items of `release_conditions.json`; `release_evidences.json` must be in the same folder."""
    path = existing_file(path)
    evidences_path = path.parent / "release_evidences.json"
    if not evidences_path.is_file():
        raise DataFormatError(f"{path}: release_evidences.json must be beside it to word the evidences")

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        conditions = read_json(path)
        evidences = read_json(evidences_path)
        if not isinstance(conditions, dict) or not isinstance(evidences, dict):
            raise DataFormatError(f"{path}: expected JSON objects of conditions and evidences")
        file = fingerprint(path)
        for key, condition in conditions.items():
            report.records += 1
            item = _condition_item(key, condition, evidences, Origin(file, key), report)
            if item is None:
                report.skip(INVALID_RECORDS, key)
            else:
                yield item

    return Reading(path, produce)


def _question(evidences: dict[str, Any], name: str) -> str | None:
    entry = evidences.get(name)
    text = entry.get("question_en") if isinstance(entry, dict) else None
    return " ".join(text.split()) if isinstance(text, str) and text.strip() else None


def _chapters(code: str) -> tuple[int, ...]:
    """Chapters of the codes in an `icd10-id` field, which may be lower-case or a list ("j17, j18")."""
    found = set()
    for part in _CODE.findall(code.upper()):
        try:
            found.add(chapter_of(part).number)
        except InvalidInputError:
            continue
    return tuple(sorted(found))


def _condition_item(
    key: str, condition: Any, evidences: dict[str, Any], origin: Origin, report: ReadReport
) -> SourceItem | None:
    if not isinstance(condition, dict):
        return None
    name = condition.get("cond-name-eng") or condition.get("condition_name")
    code = str(condition.get("icd10-id") or "").strip().upper()
    if not isinstance(name, str) or not name.strip():
        return None
    coded = f"{name} (ICD-10 {code})" if code else name
    listed: dict[str, list[str]] = {}
    for kind in ("symptoms", "antecedents"):
        listed[kind] = []
        for evidence in condition.get(kind) or {}:
            question = _question(evidences, evidence)
            if question is None:
                report.skip(UNKNOWN_EVIDENCES, f"{key}:{evidence}")
            else:
                listed[kind].append(f"“{question}”")
    statements = []
    for kind, role in (("symptoms", "symptoms"), ("antecedents", "risk factors and history")):
        # A few evidences per statement: one evidence alone ("Do you feel pain somewhere?") is shared by
        # many conditions and would not tell them apart.
        for start in range(0, len(listed[kind]), EVIDENCES_PER_STATEMENT):
            group = "; ".join(listed[kind][start : start + EVIDENCES_PER_STATEMENT])
            statements.append(f"Typical {role} of {coded} are positive answers to: {group}")
    raw = f"{name}. ICD-10: {code or 'none'}. Symptoms: {' '.join(listed['symptoms'])} " + (
        f"Antecedents: {' '.join(listed['antecedents'])}"
    )
    return SourceItem(
        f"{SOURCE}:{key}",
        "record",
        raw,
        SOURCE,
        {"condition": name, "icd10": code},
        statements=tuple(statements),
        tags=_chapters(code),
        origin=origin,
    )


def _read(path: Path, *, max_size: int, overlap: int) -> Reading[SourceItem]:
    return read_ddxplus_conditions(path)


def _recognise(sample: Sample) -> bool:
    return sample.head.lstrip().startswith("{") and '"cond-name-eng"' in sample.head


register(SourceFormat(SOURCE, _read, _recognise, rank=50))
