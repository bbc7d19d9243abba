"""`rarebench`: a small subset file in RareBench's format (tests/data/rarebench/sample.jsonl: real HPO, OMIM,
Orphanet and CCRD ids, a broken line, an invalid record, unmapped ids) named through RareBench's real
mappings; checked against the mapping files read here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.core.models import Answer, RankedDiagnosis, StructuredResult
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.rarebench import (
    NO_KNOWN_PHENOTYPE,
    RareBenchMappings,
    load_rarebench,
    name_variants,
)
from clinrag.eval.metrics import score_case

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "rarebench" / "sample.jsonl"


@pytest.fixture(scope="module")
def mappings_dir(data_dir: Path) -> Path:
    return data_dir / "rarebench"


@pytest.fixture(scope="module")
def names(mappings_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    phenotypes, diseases = (
        json.loads((mappings_dir / name).read_text(encoding="utf-8"))
        for name in ("phenotype_mapping.json", "disease_mapping.json")
    )
    return phenotypes, diseases


def test_the_sample_loads_with_its_broken_lines_reported(mappings_dir):
    dataset = load_rarebench(SAMPLE, mappings_dir)
    assert [case.id for case in dataset.cases] == ["sample-1", "sample-2", "sample-3", "sample-8"]
    report = dataset.report
    assert f"{SAMPLE}: 6 records read" in report
    assert "skipped 1 broken lines: 4" in report
    assert "skipped 1 records with missing or invalid fields: 6" in report
    assert f"skipped 1 {NO_KNOWN_PHENOTYPE}: 7" in report
    assert "2 phenotype ids not in the mapping, left out of the text: HP:9999998, HP:9999999" in report
    assert "1 disease ids not in the mapping, kept as answer ids only: OMIM:999999" in report


def test_cases_are_named_through_the_real_mappings(mappings_dir, names):
    phenotypes, diseases = names
    raw = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:3]]
    dataset = load_rarebench(SAMPLE, mappings_dir)
    for case, line in zip(dataset.cases, raw, strict=False):
        known = [hpo for hpo in line["Phenotype"] if hpo in phenotypes]
        assert case.patient.codes["hpo"] == known and case.patient.codes["hpo_excluded"] == []
        assert case.patient.findings == [phenotypes[hpo] for hpo in known]
        assert "diagnosis" not in case.patient.codes  # the gold never reaches a method
        assert set(line["RareDisease"]) <= set(case.gold.answers)
        assert all(diseases[code] in case.gold.answers for code in line["RareDisease"] if code in diseases)
        assert case.meta["source"] == "rarebench" and case.meta["cohort"] == "sample"
        assert case.meta["department"] == line.get("Department")
        assert case.question == case.patient.initial_presentation and case.task == "ddx"

    marfan, duchenne, rett, cmt = dataset.cases
    assert marfan.question == (
        "A patient presents with arachnodactyly, ectopia lentis, aortic root aneurysm and disproportionate "
        "tall stature."
    )
    assert marfan.gold.answer == "Marfan syndrome" == diseases["OMIM:154700"]
    assert "MFS" in marfan.gold.answers  # ORPHA:558 "马方综合征/Marfan syndrome; MFS/Marfan syndrome"
    assert "EMG: myopathic abnormalities" in duchenne.question  # an acronym keeps its case
    assert duchenne.gold.answer == "Duchenne muscular dystrophy"  # the name ORPHA:98896 joins twice
    assert rett.question.endswith("seizure, autistic behavior and microcephaly.")
    assert "OMIM:999999" in rett.gold.answers and rett.gold.answer == "Rett syndrome"
    assert cmt.gold.answer == "Charcot-Marie-Tooth disease" and cmt.meta["department"] == "Neurology"
    assert {"CCRD:17", "CMT", "腓骨肌萎缩症"} <= set(cmt.gold.answers)
    for case in dataset.cases:
        for answer in case.gold.answers:
            assert answer.casefold() not in case.question.casefold()


def test_folder_and_registry_loading(mappings_dir, tmp_path):
    spec = get_dataset("rarebench")
    assert spec.default_path == "rarebench" and not spec.generated
    folder = load_rarebench(SAMPLE.parent, mappings_dir)
    assert [c.id for c in folder.cases] == [c.id for c in load_rarebench(SAMPLE, mappings_dir).cases]
    # By default the mappings lie beside the subsets: a copy of the shared folder with a subset in it.
    beside = tmp_path / "rarebench"
    beside.mkdir()
    for name in ("phenotype_mapping.json", "disease_mapping.json"):
        (beside / name).write_bytes((mappings_dir / name).read_bytes())
    (beside / "MME.jsonl").write_bytes(SAMPLE.read_bytes())
    dataset = load_dataset("rarebench", data_dir=tmp_path)
    assert [c.id for c in dataset.cases] == ["MME-1", "MME-2", "MME-3", "MME-8"]
    assert {c.meta["cohort"] for c in dataset.cases} == {"MME"}


def test_missing_subsets_or_mappings_are_errors(mappings_dir, tmp_path):
    with pytest.raises(DataFormatError, match="no RareBench subset"):
        load_rarebench(mappings_dir)  # the shared folder holds the mappings only
    with pytest.raises(DataFormatError, match=r"phenotype_mapping\.json"):
        load_rarebench(SAMPLE)  # no mappings beside the sample
    (tmp_path / "phenotype_mapping.json").write_text('["HP:0001250"]', encoding="utf-8")
    (tmp_path / "disease_mapping.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DataFormatError, match="expected a JSON object"):
        RareBenchMappings.from_folder(tmp_path)


def test_name_variants_split_joined_names_only(names):
    _, diseases = names
    assert name_variants(diseases["OMIM:608220"]) == [
        "Autosomal recessive spastic paraplegia type 25/Spastic paraplegia 25, autosomal recessive",
        "Autosomal recessive spastic paraplegia type 25",
        "Spastic paraplegia 25, autosomal recessive",
    ]
    assert name_variants(diseases["CCRD:17"])[1:] == ["腓骨肌萎缩症", "Charcot-Marie-Tooth disease", "CMT"]
    for inside in (
        "Ectodermal dysplasia 10B, hypohidrotic/hair/tooth type, autosomal recessive",
        "Split-Hand/foot malformation 6",
        "Deafness, autosomal recessive 8/10",
        "Polyradiculoneuropathy associated with IgG/IgA/IgM monoclonal gammopathy without known antibodies",
    ):
        assert inside in diseases.values() and name_variants(inside) == [inside]


def test_a_ranked_orphanet_or_omim_id_is_a_hit(mappings_dir):
    marfan = load_rarebench(SAMPLE, mappings_dir).cases[0]

    def rank(*ddx: RankedDiagnosis) -> float:
        answer = Answer(case_id=marfan.id, method="m", result=StructuredResult(ddx=list(ddx)))
        return score_case(marfan, answer)[0]["rank"]

    loeys = RankedDiagnosis(name="Loeys-Dietz syndrome", code="OMIM:609192")
    assert rank(loeys, RankedDiagnosis(name="MFS1", code="ORPHA:558")) == 2.0
    assert rank(loeys, RankedDiagnosis(name="marfan SYNDROME")) == 2.0
    assert rank(loeys, RankedDiagnosis(name="Homocystinuria", code="OMIM:236200")) == 11.0
