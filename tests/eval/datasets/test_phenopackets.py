"""`phenopackets`: real packets of phenopacket-store (two small cohorts, AAGAB and SC5D), read back against
their raw JSON and against values read by hand; zips, broken packets, cohort selection and splits; the gold
diagnosis matched by its OMIM id."""

from __future__ import annotations

import json
import re
import time
import zipfile
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.models import Answer, Case, RankedDiagnosis, StructuredResult
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.phenopackets import (
    BAD_AGE,
    NO_DIAGNOSIS,
    NO_FEATURE,
    NOT_JSON,
    NOT_PHENOPACKET,
    MalformedPacketError,
    PhenopacketCase,
    Term,
    cohort_names,
    iso_years,
    load_phenopackets,
    read_phenopacket,
    read_phenopackets,
    render_text,
    split_cohorts,
    to_case,
)
from clinrag.eval.metrics import score_case

COHORTS = ("AAGAB", "SC5D")
AAGAB_1 = "AAGAB/PMID_28239884_Family_1_proband.json"
SC5D_INFANT = "SC5D/PMID_12812989_atypical_SLOS_patient.json"
SC5D_NO_AGE = "SC5D/PMID_17853487_Patient_1.json"
SC5D_GIRL = "SC5D/PMID_17853487_Patient_2.json"


@pytest.fixture(scope="module")
def store(data_dir: Path) -> Path:
    return data_dir / "phenopackets"


@pytest.fixture(scope="module")
def packets(store: Path) -> dict[str, PhenopacketCase]:
    return {packet.id: packet for packet in read_phenopackets(store, COHORTS)}


def _raw(store: Path, relative: str) -> dict:
    return json.loads((store / relative).read_text(encoding="utf-8"))


def _words(text: str) -> str:
    return text.casefold()


# --- reading real packets -----------------------------------------------------------------------------------


def test_two_cohorts_read_back_as_their_raw_json(store, packets):
    files = sorted(file for cohort in COHORTS for file in (store / cohort).glob("*.json"))
    assert len(packets) == len(files) == 7
    for file in files:
        raw = json.loads(file.read_text(encoding="utf-8"))
        packet = packets[raw["id"]]
        features = raw["phenotypicFeatures"]
        assert packet.cohort == file.parent.name
        assert [t.id for t in packet.observed] == [f["type"]["id"] for f in features if not f.get("excluded")]
        assert [t.id for t in packet.excluded] == [f["type"]["id"] for f in features if f.get("excluded")]
        assert [t.label for t in packet.observed + packet.excluded] == [
            f["type"]["label"] for f in features if not f.get("excluded")
        ] + [f["type"]["label"] for f in features if f.get("excluded")]
        diagnosis = raw["interpretations"][0]["diagnosis"]["disease"]
        assert packet.diagnoses == (Term(diagnosis["id"], diagnosis["label"]),)
        assert packet.pmids == tuple(ref["id"] for ref in raw["metaData"]["externalReferences"])
        sex = raw["subject"].get("sex")
        assert packet.sex == {"FEMALE": "female", "MALE": "male"}.get(sex)


def test_values_read_by_hand_from_one_packet(store, packets):
    packet = packets["PMID_28239884_Family_1_proband"]
    assert packet == read_phenopacket(store / AAGAB_1)
    assert packet.cohort == "AAGAB" and packet.sex == "female" and packet.age == 43.0
    assert packet.observed == (Term("HP:0007530", "Punctate palmoplantar hyperkeratosis"),)
    assert [t.id for t in packet.excluded] == ["HP:0006482", "HP:0001595", "HP:0001597"]
    assert packet.diagnoses == (Term("OMIM:148600", "Keratoderma, palmoplantar, punctate type IA"),)
    assert packet.pmids == ("PMID:28239884",)
    assert packet.onset is None and packet.onset_age == 18.0  # the disease's onset, "P18Y"
    assert render_text(packet) == (
        "A 43-year-old woman presents with punctate palmoplantar hyperkeratosis. She does not have abnormal "
        "dental morphology, abnormal hair morphology or abnormal nail morphology. Onset at age 18."
    )


def test_ages_sexes_and_onsets_of_the_sc5d_patients(packets):
    infant = packets["PMID_12812989_atypical_SLOS_patient"]  # "P4M", UNKNOWN_SEX, disease onset "P0D"
    assert infant.age == pytest.approx(4 / 12) and infant.sex is None and infant.onset_age == 0.0
    text = render_text(infant)
    assert text.startswith("A 4-month-old infant presents with microcephaly; cataract; short nose;")
    assert "ambiguous genitalia, male; 2-3 toe cutaneous syndactyly;" in text  # labels with commas: "; "
    assert "The infant does not have postaxial hand polydactyly, talipes equinovarus," in text
    assert text.endswith("Onset at birth.")

    unaged = packets["PMID_17853487_Patient_1"]  # no age, UNKNOWN_SEX, "Second trimester onset"
    assert unaged.age is None and unaged.sex is None and unaged.onset_age is None
    assert unaged.onset == Term("HP:0034198", "Second trimester onset")
    text = render_text(unaged)
    # Only an acronym-like first word keeps its capital ("EEG", "T-cell"); an eponym is lower-cased.
    assert text.startswith("A patient presents with microcephaly, postaxial hand polydactyly, chiari type II")
    assert "The patient does not have 2-3 toe cutaneous syndactyly" in text
    assert text.endswith("Onset in the second trimester of pregnancy.")

    girl = packets["PMID_17853487_Patient_2"]
    assert girl.age == 7.0 and girl.sex == "female"
    text = render_text(girl)
    assert text.startswith("A 7-year-old girl presents with microcephaly, cataract, micrognathia")
    assert "She does not have short nose" in text and text.endswith("Onset at birth.")


def test_text_names_findings_and_absences_but_never_the_diagnosis(packets):
    for packet in packets.values():
        text = render_text(packet)
        for term in packet.observed:
            assert _words(term.label) in _words(text)
        if packet.excluded:
            absent = text.split(" does not have ", 1)[1]
            assert all(_words(term.label) in _words(absent) for term in packet.excluded)
        for disease in packet.diagnoses:
            assert not re.search(rf"\b{re.escape(disease.label)}\b", text, re.IGNORECASE)
        assert packet.cohort not in text  # the cohort is the gene


def test_cases_carry_codes_gold_and_meta(store, packets):
    dataset = load_phenopackets(store, COHORTS)
    assert "phenopackets: 7 cases" in dataset.report and "2 cohorts" in dataset.report
    assert "skipped" not in dataset.report
    case = next(c for c in dataset.cases if c.id == "PMID_28239884_Family_1_proband")
    packet = packets[case.id]
    assert case.task == "ddx" and case.question == case.patient.initial_presentation == render_text(packet)
    assert case.patient.findings == ["Punctate palmoplantar hyperkeratosis"]
    assert case.patient.demographics.age == 43 and case.patient.demographics.sex == "female"
    assert case.patient.codes == {
        "hpo": ["HP:0007530"],
        "hpo_excluded": ["HP:0006482", "HP:0001595", "HP:0001597"],
        "hpo_onset": ["HP:0025708"],  # its onset at 18 years: early young adult onset
    }  # the diagnosis is the gold alone: nothing a method reads holds it
    assert case.gold.answer == "Keratoderma, palmoplantar, punctate type IA"
    assert case.gold.answers == ["OMIM:148600", "Keratoderma, palmoplantar, punctate type IA"]
    assert case.meta == {
        "cohort": "AAGAB",
        "pmids": ["PMID:28239884"],
        "onset": None,
        "onset_age": 18.0,
        "source": "phenopacket-store",
    }
    infant = next(c for c in dataset.cases if c.id == "PMID_12812989_atypical_SLOS_patient")
    assert infant.patient.demographics.age == 0 and infant.patient.demographics.sex is None
    unaged = next(c for c in dataset.cases if c.id == "PMID_17853487_Patient_1")
    assert unaged.meta["onset"] == {"id": "HP:0034198", "label": "Second trimester onset"}


def test_registered_with_the_store_as_its_default_path(store, tmp_path):
    spec = get_dataset("phenopackets")
    assert spec.default_path == "phenopackets" and not spec.generated
    root = tmp_path / "data" / "phenopackets" / "AAGAB"
    root.mkdir(parents=True)
    for file in (store / "AAGAB").glob("*.json"):
        (root / file.name).write_bytes(file.read_bytes())
    dataset = load_dataset("phenopackets", data_dir=tmp_path / "data")
    assert len(dataset.cases) == 4 and {c.meta["cohort"] for c in dataset.cases} == {"AAGAB"}


# --- zips, single files, broken packets ---------------------------------------------------------------------


def test_a_release_zip_loads_the_same_cases(store, tmp_path):
    archive = tmp_path / "all_phenopackets.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for relative in (AAGAB_1, SC5D_INFANT, SC5D_GIRL):
            zipped.write(store / relative, f"0.1.24/{relative}")
        zipped.writestr("0.1.24/README.txt", "not a packet")
    from_zip = load_phenopackets(archive)
    from_folder = {c.id: c for c in load_phenopackets(store, COHORTS).cases}
    assert len(from_zip.cases) == 3
    for case in from_zip.cases:
        assert case == from_folder[case.id]
    assert [c.meta["cohort"] for c in from_zip.cases] == ["AAGAB", "SC5D", "SC5D"]
    assert cohort_names(archive) == ["AAGAB", "SC5D"]
    only = load_phenopackets(archive, ["SC5D"])
    assert [c.id for c in only.cases] == ["PMID_12812989_atypical_SLOS_patient", "PMID_17853487_Patient_2"]


def test_a_single_file_is_a_dataset(store):
    dataset = load_phenopackets(store / SC5D_NO_AGE)
    assert [c.id for c in dataset.cases] == ["PMID_17853487_Patient_1"]
    assert dataset.cases[0].meta["cohort"] == "SC5D"


def test_broken_packets_are_reported_by_path_and_the_good_ones_load(store, tmp_path):
    good = _raw(store, AAGAB_1)
    (tmp_path / "AAGAB").mkdir()
    (tmp_path / "AAGAB" / "good.json").write_text(json.dumps(good), encoding="utf-8")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "truncated.json").write_text(json.dumps(good)[:200], encoding="utf-8")
    (broken / "latin1.json").write_bytes(
        json.dumps({**good, "id": "é"}, ensure_ascii=False).encode("latin-1")
    )
    (broken / "unknown_field.json").write_text(json.dumps({**good, "id": "x1", "gene": "AAGAB"}))
    (broken / "bad_sex.json").write_text(json.dumps({**good, "id": "x2", "subject": {"sex": "F"}}))
    (broken / "a_list.json").write_text("[]")
    no_diagnosis = {**good, "id": "x3", "interpretations": [], "diseases": []}
    (broken / "no_diagnosis.json").write_text(json.dumps(no_diagnosis))
    all_excluded = [{**feature, "excluded": True} for feature in good["phenotypicFeatures"]]
    (broken / "all_excluded.json").write_text(
        json.dumps({**good, "id": "x4", "phenotypicFeatures": all_excluded})
    )
    bad_age = {**good, "id": "x5", "subject": {"timeAtLastEncounter": {"age": {"iso8601duration": "43Y"}}}}
    (broken / "bad_age.json").write_text(json.dumps(bad_age))
    bad_age["subject"]["timeAtLastEncounter"]["age"]["iso8601duration"] = "P143Y"
    (broken / "too_old.json").write_text(json.dumps({**bad_age, "id": "x6"}))
    (broken / "twice.json").write_text(json.dumps(good), encoding="utf-8")  # the good packet's id again

    reading = read_phenopackets(tmp_path)
    assert [packet.id for packet in reading] == ["PMID_28239884_Family_1_proband"]
    report = reading.report
    assert report.records == 11 and report.items == 1 and report.complete
    assert report.skipped == {
        NOT_PHENOPACKET: ["broken/a_list.json", "broken/bad_sex.json", "broken/unknown_field.json"],
        BAD_AGE: ["broken/bad_age.json", "broken/too_old.json"],
        NO_DIAGNOSIS: ["broken/no_diagnosis.json"],
        NO_FEATURE: ["broken/all_excluded.json"],
        NOT_JSON: ["broken/latin1.json", "broken/truncated.json"],
        "records with a duplicate id": ["broken/twice.json"],
    }
    dataset = load_phenopackets(tmp_path)
    assert "broken/truncated.json" in dataset.report and "broken/no_diagnosis.json" in dataset.report


def test_reading_one_bad_file_is_a_typed_error_naming_it(store, tmp_path):
    real = store / "NRXN1" / "PMID_23495017_Patient_23.json"  # the store's packet with no observed feature
    with pytest.raises(MalformedPacketError, match=re.escape(str(real))) as error:
        read_phenopacket(real)
    assert error.value.reason == NO_FEATURE and isinstance(error.value, DataFormatError)
    broken = tmp_path / "SC5D" / "broken.json"
    broken.parent.mkdir()
    broken.write_text("{", encoding="utf-8")
    with pytest.raises(DataFormatError, match=re.escape(str(broken))):
        read_phenopacket(broken)
    with pytest.raises(DataFormatError, match="no such file"):
        read_phenopacket(tmp_path / "missing.json")
    with pytest.raises(DataFormatError, match="empty corpus"):
        load_phenopackets(broken.parent)
    (tmp_path / "packets.zip").write_bytes(b"not a zip")
    with pytest.raises(DataFormatError, match="not a zip archive"):
        load_phenopackets(tmp_path / "packets.zip")


def test_unknown_cohorts_are_an_error(store):
    with pytest.raises(InvalidInputError, match="NOT_A_GENE"):
        load_phenopackets(store / "AAGAB", ["AAGAB", "NOT_A_GENE"])


# --- ages, words and splits ---------------------------------------------------------------------------------


def test_iso_durations_in_years():
    assert iso_years("P6Y3M") == 6.25
    assert iso_years("P0Y0M3D") == pytest.approx(3 / 365.25)
    assert iso_years("P2W") == pytest.approx(14 / 365.25)
    assert iso_years("P43Y") == 43.0
    assert iso_years("PT12H") == pytest.approx(0.5 / 365.25)
    assert iso_years("43Y") is None and iso_years("P") is None and iso_years("P1.5X") is None


def test_words_for_age_sex_and_stage():
    seizure, ataxia = Term("HP:0001250", "Seizure"), Term("HP:0002353", "EEG abnormality")
    base = PhenopacketCase(id="p", cohort="c", observed=(seizure, ataxia), diagnoses=(Term("OMIM:1", "D"),))

    def opening(**changes) -> str:
        return render_text(PhenopacketCase(**{**base.__dict__, **changes})).split(" presents with ")[0]

    assert opening(age=8.5, sex="male") == "An 8-year-old boy"
    assert opening(age=18.0) == "An 18-year-old person"
    assert opening(age=11 / 12, sex="female") == "An 11-month-old girl"
    assert opening(age=5 / 365.25) == "A newborn"
    assert opening(age_class=Term("HP:0003581", "Adult onset"), sex="female") == "An adult woman"
    assert opening(age_class=Term("HP:0003623", "Neonatal onset"), sex="male") == "A newborn boy"
    assert opening(age_class=Term("HP:0011463", "Childhood onset")) == "A child"
    assert opening(onset=Term("HP:0003596", "Middle age onset"), sex="male") == "An adult man"
    assert opening(gestational_age=22.4, sex="female") == "A female fetus at 22 weeks of gestation"
    assert opening(sex="male") == "A male patient" and opening() == "A patient"
    text = render_text(base)
    assert text == "A patient presents with seizure and EEG abnormality."  # an acronym keeps its case
    odd_onset = render_text(
        PhenopacketCase(**{**base.__dict__, "onset": Term("HP:0003587", "Insidious onset")})
    )
    assert odd_onset.endswith("Onset described as insidious onset.")


def test_split_cohorts_is_deterministic_and_disjoint(store):
    names = cohort_names(store)
    assert len(names) == 476 and "AAGAB" in names and "LICENSE" not in names
    development, held_out = split_cohorts(names, 0.7, seed=7)
    assert (development, held_out) == split_cohorts(reversed(names), 0.7, seed=7)
    assert not set(development) & set(held_out) and set(development) | set(held_out) == set(names)
    assert len(development) == round(0.7 * 476) and development == sorted(development)
    assert split_cohorts(names, 0.7, seed=8)[0] != development
    assert split_cohorts(names, 0.0, seed=7) == ([], names)
    with pytest.raises(InvalidInputError):
        split_cohorts(names, 1.5)


# --- gold matching ------------------------------------------------------------------------------------------


def _rank(case: Case, *ddx: RankedDiagnosis) -> float:
    answer = Answer(case_id=case.id, method="m", result=StructuredResult(ddx=list(ddx)))
    return score_case(case, answer)[0]["rank"]


def test_a_ranked_diagnosis_matches_the_gold_by_omim_id_or_name(packets):
    case = to_case(packets["PMID_28239884_Family_1_proband"])
    other = RankedDiagnosis(name="Keratosis pilaris", code="OMIM:604093")
    assert _rank(case, other, RankedDiagnosis(name="Punctate PPK", code="OMIM:148600")) == 2.0
    assert _rank(case, RankedDiagnosis(name="keratoderma,  PALMOPLANTAR, punctate type ia")) == 1.0
    assert _rank(case, other, RankedDiagnosis(name="Punctate keratoderma", code="OMIM:148700")) == 11.0
    assert _rank(case, RankedDiagnosis(name="Keratoderma", code="OMIM:14860")) == 11.0  # no prefix match


@pytest.mark.slow
def test_the_whole_store_loads_with_its_one_broken_packet(store):
    started = time.perf_counter()
    dataset = load_phenopackets(store)
    seconds = time.perf_counter() - started
    assert len(dataset.cases) == 7575, dataset.report
    assert (
        "skipped 1 packets with no observed HPO feature: NRXN1/PMID_23495017_Patient_23.json"
        in dataset.report
    )
    assert "476 cohorts" in dataset.report and seconds < 60
    for case in dataset.cases:
        assert case.gold.answer and case.patient.codes["hpo"] and case.meta["pmids"]
        assert not re.search(rf"\b{re.escape(case.gold.answer)}\b", case.question, re.IGNORECASE), case.id
