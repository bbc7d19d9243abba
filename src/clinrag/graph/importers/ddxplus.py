"""DDXPlus pathologies (`release_conditions.json`) with their symptoms, named by `release_evidences.json`.

Choices, all deterministic:
- a Symptom is named by its evidence's English question (`question_en`, whitespace collapsed), e.g.
  "Do you have a cough?". Rule-based shortening ("cough") broke about a third of the 223 questions
  ("or have you recently taken anti-inflammatory drugs (NSAIDs)"), while the question text is exact, unique
  per evidence, and the wording clinrag uses for DDXPlus patients' findings ("<question> Yes"), so a
  patient's finding matches its node by name;
- only yes/no evidences become symptoms: categorical and multi-choice ones ("How intense is the pain?",
  "Where is the swelling located?") are attributes that mean nothing without the patient's value; skipped;
- antecedents (risk factors and history: smoking, travel, family history) are not graph edges, skipped and
  counted there: the schema has no risk-factor label, and calling them symptoms would let "Do you smoke
  cigarettes?" rank diseases as if it were a finding of the disease. The yes/no ones are the record's
  `risk_factors`, which the consultation weighs as risk factors, not as symptoms;
- where a condition's pain or swelling is: the release lists only "Where is the pain/swelling located?" for
  it, whatever the condition, so `data/ddxplus_condition_sites.jsonl` (clinical knowledge, a source on each
  line) names the sites where it typically is, each then a symptom of the condition ("ear pain" of acute
  otitis media), named as the site findings of `ddxplus_findings` are;
- Disease.description: the ICD-10 code DDXPlus gives with its ICD-10-CM title (`simple-icd-10-cm`), and the
  French name. The code is DDXPlus's own, including its errors (SLE is given M34, systemic sclerosis).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import simple_icd_10_cm as cm
import srsly

from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.ddxplus_findings import ddxplus_findings, site_findings
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, SourceTraits, clean_name
from clinrag.graph.importers.registry import PATH, GraphSource, register
from clinrag.graph.schema import Relation

NAME = "ddxplus"
PACKAGED = Path(__file__).parent / "data" / "ddxplus"  # the two tables, shipped with their notice (CC-BY 4.0)
CONDITIONS = "release_conditions.json"
# condition → the body sites of its pain or swelling: {"condition", "kind", "sites", "source"}
CONDITION_SITES = Path(__file__).parent / "data" / "ddxplus_condition_sites.jsonl"
EVIDENCES = "release_evidences.json"
_CODE = re.compile(r"[A-Z]\d{2}(?:\.[0-9A-Z]+)?")  # ICD-10-CM's seventh character may be a letter
ANTECEDENTS = "antecedents (risk factors, history): not graph edges, the schema has no risk-factor label"
ATTRIBUTES = "categorical / multi-choice evidences (attributes such as pain intensity): not findings"
UNKNOWN_EVIDENCE = "evidence codes missing from release_evidences.json"
NO_NAME = "pathologies without an English name"
NO_SYMPTOM = "pathologies without a yes/no symptom"


def _files(path: Path) -> tuple[Path, Path]:
    folder = path.parent if path.is_file() else path
    conditions, evidences = folder / CONDITIONS, folder / EVIDENCES
    for needed in (conditions, evidences):
        if not needed.is_file():
            raise DataFormatError(f"DDXPlus source {path}: {needed.name} not found in {folder}")
    return conditions, evidences


def _load(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"{path}: not UTF-8 JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise DataFormatError(f"{path}: expected a JSON object")
    return document


def icd10_description(field: str) -> str | None:
    """ "J93" → "ICD-10 J93: Pneumothorax and air leak"; several codes ("j17, j18") joined by "; "."""
    parts = []
    for code in _CODE.findall(field.upper()):
        title = cm.get_description(code) if cm.is_valid_item(code) else None
        parts.append(f"ICD-10 {code}: {title}" if title else f"ICD-10 {code}")
    return "; ".join(parts) or None


def read_ddxplus(path: str | Path, *, limit: int | None = None) -> SourceRecords:
    """The DDXPlus pathologies of a release folder (or of its `release_conditions.json`) as records."""
    conditions_path, evidences_path = _files(Path(path))
    digest = hashlib.sha256()
    for file in (conditions_path, evidences_path, CONDITION_SITES):
        digest.update(file.read_bytes())
    result = SourceRecords(NAME, f"{NAME}:{path}", f"{digest.hexdigest()[:16]}:limit={limit}")
    result.notes += [
        "Symptom names are the evidences' English questions",
        "antecedents skipped in the graph (no risk-factor label in the schema); yes/no ones are risk factors",
    ]
    conditions, evidences = _load(conditions_path), _load(evidences_path)
    sites = condition_sites()
    for key, condition in conditions.items():
        if limit is not None and result.read >= limit:
            break
        result.read += 1
        if not isinstance(condition, dict) or (name := clean_name(condition.get("cond-name-eng"))) is None:
            result.skips.add(NO_NAME, str(key))
            continue
        record = DiseaseRecord(key, name, _description(condition), severity=_severity(condition))
        for code in condition.get("antecedents") or {}:
            result.skips.add(ANTECEDENTS, f"{key}:{code}")
            evidence = evidences.get(code)
            yes_no = isinstance(evidence, dict) and evidence.get("data_type") == "B"
            if yes_no and (question := clean_name(evidence.get("question_en"))) is not None:
                record.risk_factors.append(question)
        for code in condition.get("symptoms") or {}:
            evidence = evidences.get(code)
            question = clean_name(evidence.get("question_en")) if isinstance(evidence, dict) else None
            if question is None:
                result.skips.add(UNKNOWN_EVIDENCE, f"{key}:{code}")
            elif evidence.get("data_type") != "B":
                result.skips.add(ATTRIBUTES, f"{key}:{code}")
            else:
                record.add(Relation.HAS_SYMPTOM, question, result.skips)
        for site_finding in sites.get(name, ()):
            record.add(Relation.HAS_SYMPTOM, site_finding, result.skips)
        result.keep(record, NO_SYMPTOM)
    return result


def condition_sites(path: Path = CONDITION_SITES) -> dict[str, list[str]]:
    """Condition name → the site findings of its pain and swelling ("ear pain"), as `ddxplus_findings` names
    a site finding ("{site} pain")."""
    templates = {kind: template for _, template, kind in site_findings().values()}
    found: dict[str, list[str]] = {}
    for row in srsly.read_jsonl(path):
        template = templates[row["kind"]]
        found.setdefault(row["condition"], []).extend(template.format(site=site) for site in row["sites"])
    return found


def _severity(condition: dict[str, Any]) -> int | None:
    """DDXPlus's severity: 1 (most severe, e.g. anaphylaxis) to 5 (least, e.g. URTI)."""
    value = condition.get("severity")
    return value if isinstance(value, int) and 1 <= value <= 5 else None


def _description(condition: dict[str, Any]) -> str | None:
    parts = [icd10_description(str(condition.get("icd10-id") or ""))]
    if french := clean_name(condition.get("cond-name-fr")):
        parts.append(f"French: {french}")
    text = ". ".join(p for p in parts if p)
    return f"{text}." if text else None


# 49 common and urgent conditions with their symptoms, antecedents and a severity; its findings are its
# evidences, named by the questions that ask about them. The release states no probabilities (every
# symptom's entry is empty), so a condition's findings are a plain list; but its patients show about the same
# share of their condition's listed yes/no symptoms however long the list (0.68; 0.63–0.81 for lists of 3 to
# 14, on the 1,721 DDXPlus patients outside the evaluation samples: benchmarks/measure_ddxplus_share.py).
TRAITS = SourceTraits(
    lay=True,
    askable=True,
    severity=True,
    risk_factors=True,
    listed_share=0.68,
    title="the DDXPlus condition table (Fansi Tchango et al., NeurIPS 2022; CC-BY 4.0)",
)
register(
    GraphSource(
        f"{NAME}:{PATH}",
        lambda path, limit: read_ddxplus(path, limit=limit),
        TRAITS,
        findings=ddxplus_findings,
    )
)
# the same tables as shipped inside clinrag (`PACKAGED`)
register(
    GraphSource(
        f"packaged:{NAME}",
        lambda _, limit: read_ddxplus(PACKAGED, limit=limit),
        TRAITS,
        findings=lambda _: ddxplus_findings(PACKAGED),
    )
)
