"""The patient base on real iCraft-MD vignettes: similar-patient retrieval, the leakage guard, persistence."""

import json

import pytest

from clinrag.core.errors import DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.patients.base import PatientBase, format_record
from clinrag.patients.record import PatientRecord


@pytest.fixture(scope="module")
def records(data_dir):
    rows = [json.loads(line) for line in (data_dir / "icraft_md" / "craft_md.jsonl").read_text().splitlines()]
    return [
        PatientRecord(
            id=f"icraft:{row['id']}",
            narrative=". ".join(fact.strip() for fact in row["context"]),
            structured={"diagnosis": row["answer"]},
            codes={"diagnosis": [row["answer"]]},
            source="icraft_md",
        )
        for row in rows
    ]


@pytest.fixture(scope="module")
def base(records, minilm_embedder):
    return PatientBase.create(records, minilm_embedder)


def test_a_patient_finds_itself_first_without_the_guard(base, records):
    target = records[7]
    (top, score), *_ = base.similar(target.narrative, 3, guard=1.01)
    assert top.id == target.id and score == pytest.approx(1.0, abs=1e-4)


def test_leakage_guard_excludes_the_case_and_a_planted_duplicate(records, minilm_embedder):
    target = records[3]
    planted = target.model_copy(update={"id": "planted-copy", "narrative": target.narrative + " "})
    base = PatientBase.create([*records, planted], minilm_embedder)
    ids = [record.id for record, _ in base.similar(target.narrative, 5, exclude=[target.id])]
    assert len(ids) == 5
    assert target.id not in ids and "planted-copy" not in ids
    assert all(score <= 0.99 for _, score in base.similar(target.narrative, 5, exclude=[target.id]))


def test_format_shows_presentation_and_structured_data(records):
    text = format_record(records[0])
    assert records[0].narrative in text and f"Diagnosis: {records[0].structured['diagnosis']}" in text


def test_round_trip_and_mismatch(base, records, tmp_path, minilm_embedder):
    base.save(tmp_path / "patients")
    again = PatientBase.load(tmp_path / "patients", minilm_embedder)
    query = records[10].narrative
    assert [(r.id, round(s, 5)) for r, s in again.similar(query, 4)] == [
        (r.id, round(s, 5)) for r, s in base.similar(query, 4)
    ]
    info = tmp_path / "patients" / "patients.json"
    info.write_text(info.read_text().replace('"dimension": 384', '"dimension": 768'))
    with pytest.raises(IndexMismatchError, match="768"):
        PatientBase.load(tmp_path / "patients", minilm_embedder)
    with pytest.raises(DataFormatError, match="patients build"):
        PatientBase.load(tmp_path / "absent", minilm_embedder)


def test_coded_ranking_and_bad_input(base, records, minilm_embedder):
    target = records[5]
    ranked = base.rank(target.codes, 3, {"diagnosis": 1.0}, exclude=[target.id])
    assert ranked and all(r.codes["diagnosis"] == target.codes["diagnosis"] for r, _ in ranked)
    with pytest.raises(InvalidInputError, match="empty"):
        base.similar("  ", 3)
    with pytest.raises(InvalidInputError, match="duplicate patient id"):
        PatientBase.create([records[0], records[0]], minilm_embedder)
