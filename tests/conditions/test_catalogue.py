"""clinrag's clinical knowledge base as shipped: read whole, checked by its audit, and refused with the file
and line where a copy of it is broken."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clinrag.conditions.audit import KnowledgeAudit
from clinrag.conditions.catalogue import DATA, Catalogue, packaged_catalogue
from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.ddxplus import CONDITIONS, EVIDENCES, PACKAGED

SYSTEMS = {
    "cardiorespiratory",
    "digestive_renal",
    "ent_endocrine_blood",
    "infections_skin",
    "injury_poisoning",
    "msk_injury_poisoning",
    "neuro_mental_eye",
    "respiratory",
    "skin",
    "women_children",
}


@pytest.fixture(scope="module")
def audit() -> KnowledgeAudit:
    evidences = json.loads((PACKAGED / EVIDENCES).read_text(encoding="utf-8"))
    conditions = json.loads((PACKAGED / CONDITIONS).read_text(encoding="utf-8"))
    findings = {code for code, evidence in evidences.items() if evidence["data_type"] == "B"}
    return KnowledgeAudit(findings, set(conditions))


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(DATA, folder)
    return folder


def _rewrite(path: Path, line: int, change) -> None:
    rows = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(rows[line])
    change(record)
    rows[line] = json.dumps(record, ensure_ascii=False)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def test_the_packaged_knowledge_passes_its_audit(audit: KnowledgeAudit) -> None:
    catalogue = packaged_catalogue()
    report = audit.run(catalogue)
    assert report.passed, report.problems[:10]
    assert set(report.per_system) == SYSTEMS
    assert report.conditions >= 500
    # every DDXPlus condition is one of the knowledge base's, named as DDXPlus names it
    ddxplus = json.loads((PACKAGED / CONDITIONS).read_text(encoding="utf-8"))
    assert {c.ddxplus for c in catalogue.conditions if c.ddxplus} == set(ddxplus)
    # every source a reader can open; every fact cites at least one
    assert all(s.url.startswith(("https://", "http://")) for s in catalogue.sources.values())
    assert all(fact.source for c in catalogue.conditions for _, fact in c.cited())


def test_the_cant_miss_conditions_are_there_to_rank() -> None:
    """The emergencies the old table could not rank (#50): stroke, meningitis, ectopic pregnancy and the rest
    are conditions with features, an urgency and tests."""
    catalogue = packaged_catalogue()
    for code in ("I63", "G00", "O00", "I21", "K35", "N44", "T39.1", "E10.1"):
        found = [
            c for c in catalogue.conditions if c.icd10.replace(".", "").startswith(code.replace(".", ""))
        ]
        assert found, code
        assert any(c.urgency.cant_miss and c.urgency.level == "emergency" for c in found), code
        assert all(len(c.features) >= 3 and c.tests for c in found), code


def test_a_condition_is_found_by_its_names_in_three_languages_and_its_code() -> None:
    catalogue = packaged_catalogue()
    pneumonia = catalogue.find("pneumonia")
    assert pneumonia and all("J1" in c.icd10 for c in pneumonia)
    for name in (pneumonia[0].names["fr"][0], pneumonia[0].names["zh"][0], pneumonia[0].icd10):
        assert pneumonia[0] in catalogue.find(name)
    assert catalogue.find("   ") == []


def test_a_fact_citing_an_unregistered_source_is_refused_with_its_line(copy: Path) -> None:
    path = copy / "conditions" / "digestive_renal.jsonl"
    _rewrite(path, 2, lambda r: r["features"][0].update(source=["no-such-document"]))
    with pytest.raises(
        DataFormatError, match=r"digestive_renal.jsonl:3: cites sources not in .*no-such-document"
    ):
        Catalogue.read(copy)


def test_a_fact_without_a_source_or_a_source_without_a_url_is_refused(copy: Path) -> None:
    conditions = copy / "conditions" / "neuro_mental_eye.jsonl"
    _rewrite(conditions, 0, lambda r: r["tests"][0].update(source=[]))
    with pytest.raises(DataFormatError, match=r"neuro_mental_eye.jsonl:1: not a Condition record"):
        Catalogue.read(copy)
    shutil.copy(DATA / "conditions" / "neuro_mental_eye.jsonl", conditions)
    _rewrite(copy / "sources.jsonl", 0, lambda r: r.update(url=""))
    with pytest.raises(DataFormatError, match=r"sources.jsonl:1: not a Source record"):
        Catalogue.read(copy)


def test_a_duplicate_condition_is_refused(copy: Path) -> None:
    path = copy / "conditions" / "women_children.jsonl"
    first = path.read_text(encoding="utf-8").splitlines()[0]
    with path.open("a", encoding="utf-8") as out:
        out.write(first + "\n")
    with pytest.raises(DataFormatError, match="given twice"):
        Catalogue.read(copy)


def test_the_audit_fails_on_an_unresolved_code_or_an_uncited_source(
    copy: Path, audit: KnowledgeAudit
) -> None:
    path = copy / "conditions" / "cardiorespiratory.jsonl"
    _rewrite(path, 0, lambda r: r.update(icd10="X99.99"))
    _rewrite(path, 1, lambda r: r["features"][0].update(hpo="HP:9999999"))
    _rewrite(path, 2, lambda r: r["features"][0].update(label=r["features"][0]["label"] + " (renamed)"))
    with (copy / "sources.jsonl").open("a", encoding="utf-8") as out:
        source = {"id": "who-unused", "issuer": "WHO", "title": "Unused", "year": 2020,
                  "url": "https://www.who.int/", "kind": "fact_sheet", "checked": "test"}  # fmt: skip
        out.write(json.dumps(source) + "\n")
    report = audit.run(Catalogue.read(copy))
    assert not report.passed
    problems = "\n".join(report.problems)
    assert "ICD-10-CM code 'X99.99' does not resolve" in problems
    assert "HPO term HP:9999999 does not resolve" in problems
    assert "(renamed)" in problems and "source who-unused: cited by no fact" in problems
    assert len(report.problems) == 4
