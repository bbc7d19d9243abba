"""Structured record sources — the knowledge shipped in installed packages and DDXPlus's condition table —
read for real, and built into knowledge bases in their declarative and raw forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import simple_icd_10_cm as cm
from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.readers.packaged import SOURCES, read_packaged
from clinrag.knowledge.sources import detect_format, read_source
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.terms.icd10 import chapter_of


def test_icd10cm_records_cover_every_category_once_with_its_chapter() -> None:
    items = list(read_source("packaged:icd10cm"))
    categories = {code for code in cm.get_all_codes(False) if cm.is_category(code)}
    assert {item.provenance["code"] for item in items} == categories
    assert len(items) == len(categories)  # the package lists some categories twice (B10, Z68, …)
    asthma = next(item for item in items if item.id == "icd10cm:J45")
    assert asthma.tags == (10,) and asthma.kind == "record"
    assert asthma.statements[0].startswith("Asthma (ICD-10-CM J45) is classified under")
    assert any("detergent asthma" in s for s in asthma.statements)  # an exclusion, from the package
    assert "Asthma" in asthma.text and "Excludes:" in asthma.text


def test_the_test_data_table_in_three_languages_says_what_it_is_and_names_no_drug() -> None:
    english = {item.provenance["icd10"]: item for item in read_source("packaged:faker-diseases")}
    assert len(english) == len({entry["icd10"] for entry in DISEASE_CORRELATIONS.values()})
    diabetes = english["E11.9"]
    assert diabetes.tags == (chapter_of("E11.9").number,)
    assert "Frequent Urination" in diabetes.statements[0] and diabetes.text.startswith("TEST DATA")
    assert all("test-data table (not medical knowledge)" in s for s in diabetes.statements)
    assert not any("Metformin" in s for s in diabetes.statements) and "Metformin" not in diabetes.text
    chinese = next(i for i in read_source("packaged:faker-diseases-zh") if i.provenance["icd10"] == "E11.9")
    assert not any("二甲双胍" in s for s in chinese.statements) and chinese.statements[0].startswith(
        "测试数据表"
    )
    french = next(i for i in read_source("packaged:faker-diseases-fr") if i.provenance["icd10"] == "E11.9")
    assert "Diabète sucré de type 2 (CIM-10 E11.9)" in french.statements[0]


def test_the_knowledge_base_statements_cite_their_documents() -> None:
    items = list(read_source("packaged:conditions"))
    catalogue = packaged_catalogue()
    assert len(items) == len(catalogue.conditions)
    for item, condition in zip(items, catalogue.conditions, strict=True):
        assert item.provenance["icd10"] == condition.icd10
        assert all("https://" in s or "http://" in s for s in item.statements)
        assert len(item.statements) == 2 + len(condition.tests) + len(condition.management)


def test_hpo_definitions_drop_their_references_and_skip_terms_without_one() -> None:
    reading = read_packaged("packaged:hpo")
    fever = next(item for item in reading if item.id == "hpo:HP:0001945")
    assert fever.statements == (
        "Fever (HP:0001945; also called Hyperthermia; Pyrexia) is defined as: Body temperature elevated "
        "above the normal range.",
    )
    assert fever.tags == ()  # no code: the build's tagger decides
    assert reading.report.skipped["terms without a definition"]
    assert reading.report.items + reading.report.skipped_count == reading.report.records


def test_unknown_packaged_source_lists_the_valid_ones() -> None:
    with pytest.raises(InvalidInputError, match="packaged:hpo-diseases"):
        read_source("packaged:snomed")
    assert set(SOURCES) >= {"icd10cm", "conditions", "faker-diseases", "hpo", "hpo-diseases"}


def test_ddxplus_conditions_are_recognised_and_grouped(data_dir: Path) -> None:
    path = data_dir / "ddxplus" / "release_conditions.json"
    assert detect_format(path) == "ddxplus-conditions"
    items = {item.provenance["condition"]: item for item in read_source(path)}
    conditions = json.loads(path.read_text(encoding="utf-8"))
    assert len(items) == len(conditions) == 49
    pneumonia = items["Pneumonia"]
    assert pneumonia.tags == (10,)  # "j17, j18": lower case and a list in the file
    evidences = json.loads((data_dir / "ddxplus" / "release_evidences.json").read_text(encoding="utf-8"))
    fever = evidences["E_91"]["question_en"]
    assert "E_91" in conditions["Pneumonia"]["symptoms"]
    assert any(
        f"“{fever}”" in s and s.startswith("Typical symptoms of Pneumonia") for s in pneumonia.statements
    )
    listed = sum(s.count("“") for s in pneumonia.statements)
    assert listed == len(conditions["Pneumonia"]["symptoms"]) + len(conditions["Pneumonia"]["antecedents"])


def test_ddxplus_conditions_need_the_evidence_file(data_dir: Path, tmp_path: Path) -> None:
    lonely = tmp_path / "release_conditions.json"
    lonely.write_text((data_dir / "ddxplus" / "release_conditions.json").read_text(encoding="utf-8"))
    with pytest.raises(DataFormatError, match=r"release_evidences\.json"):
        read_source(lonely)


def test_records_build_declarative_or_raw_and_keep_their_chapters(
    data_dir: Path, minilm_embedder, tmp_path: Path
) -> None:
    path = data_dir / "ddxplus" / "release_conditions.json"

    def build(raw: bool) -> KnowledgeBase:
        builder = KnowledgeBaseBuilder(
            embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None, raw_records=raw
        )
        report = builder.build([path], tmp_path / f"kb-{raw}", progress=False)
        assert report.items == 49
        return KnowledgeBase.load(tmp_path / f"kb-{raw}", minilm_embedder)

    declarative, raw = build(False), build(True)
    assert len(raw.statements) == 49 < len(declarative.statements)
    pneumonia = [s for s in declarative.statements.values() if "Pneumonia (ICD-10" in s.text]
    assert pneumonia and all(s.tags == [10] for s in pneumonia)
    hit = declarative.search(
        "Do you have a fever? Do you have a cough that produces colored sputum?", tags=[10]
    )
    assert hit.hits and all(10 in statement.tags for statement, _ in hit.hits)


def test_duplicate_item_ids_are_refused_before_any_work(
    data_dir: Path, minilm_embedder, tmp_path: Path
) -> None:
    path = data_dir / "ddxplus" / "release_conditions.json"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    with pytest.raises(InvalidInputError, match="duplicate item ids"):
        builder.build([path, path], tmp_path / "kb", progress=False)
    assert not (tmp_path / ".kb.checkpoint.jsonl").exists()
