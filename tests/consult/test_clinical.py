"""The clinical tables (course, can't-miss diagnoses, red flags) as the consultation uses them: read from the
packaged files with a typed error for a bad line, the course weighing a disease against how long the
complaint has lasted, and the answer stating first how urgently to act and what not to miss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clinrag.consult.clinical import TABLES, ClinicalTables, packaged_tables
from clinrag.consult.consultant import Consultant
from clinrag.consult.diseases import Disease, DiseaseModel
from clinrag.consult.reason.differential import Differential, LikelihoodSettings
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.core.errors import DataFormatError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.graph.importers import read_source
from clinrag.graph.importers.records import SourceTraits
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, ConsultMethod, build_consultant
from clinrag.terms.hpo import hpo_terms

TRAITS = SourceTraits(lay=True, askable=True)
README_EXAMPLE = (
    "I am 45 and have had a fever, a productive cough and pain on the right side of my chest when I breathe "
    "for three days. What could this be and what should I do?"
)


@pytest.fixture(scope="module")
def consultant(consult_home: Path) -> Consultant:
    return build_consultant(MethodContext(settings=Settings(home=consult_home)), ConsultConfig())


def _respiratory(settings: LikelihoodSettings | None = None) -> Differential:
    """Pneumonia and tuberculosis with the same findings, coded as the packaged disease table codes them."""
    symptoms = ["Fever", "Cough", "Chest Pain"]
    diseases = [
        Disease("Pneumonia", "table", "p", icd10="J18.9", symptoms=list(symptoms)),
        Disease("Tuberculosis", "table", "t", icd10="A15.0", symptoms=list(symptoms)),
    ]
    model = DiseaseModel(["table"], diseases, {"table": TRAITS})
    vocabulary = Vocabulary.from_names(symptoms, "table", TRAITS)
    return Differential(model, vocabulary, settings=settings or LikelihoodSettings())


def test_the_packaged_tables_cite_a_source_on_every_line() -> None:
    tables = packaged_tables()
    assert len(tables.courses) > 150 and len(tables.dangers) > 20 and len(tables.red_flags) > 20
    assert all(c.source for c in tables.courses.values()) and all(d.source for d in tables.dangers.values())
    assert all(flag.hpo.startswith("HP:") and flag.source for flag in tables.red_flags)
    assert tables.readings
    assert all(r.source and hpo_terms()[r.hpo].name == r.label for r in tables.readings)
    tuberculosis = tables.course_of(Disease("Tuberculosis", "t", "k", icd10="A15.0"))
    assert tuberculosis is not None and tuberculosis.presents_within_days[0] >= 7
    assert tables.course_of(Disease("Marfan syndrome", "hpo", "OMIM:154700")) is None  # no code: no course


def test_a_malformed_line_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    for name in ("course.jsonl", "cant_miss.jsonl", "red_flags.jsonl", "readings.jsonl"):
        (tmp_path / name).write_text((TABLES / name).read_text(encoding="utf-8"), encoding="utf-8")
    with (tmp_path / "course.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"icd10": "J00", "name": "Cold", "course": "acute", "presents_within_days": [5, 1]}\n')
    with pytest.raises(DataFormatError, match=r"course.jsonl:\d+"):
        ClinicalTables.read(tmp_path)


def test_a_reading_between_its_thresholds_says_nothing(tmp_path: Path) -> None:
    [fever] = packaged_tables().readings
    assert [fever.status(v) for v in (38.0, 39.4, 37.2, 36.5, 37.6)] == [
        "present",
        "present",
        "absent",
        "absent",
        None,
    ]
    (tmp_path / "readings.jsonl").write_text(
        fever.model_copy(update={"absent_at_most": 38.5}).model_dump_json() + "\n", encoding="utf-8"
    )
    for name in ("course.jsonl", "cant_miss.jsonl", "red_flags.jsonl"):
        (tmp_path / name).write_text((TABLES / name).read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"readings.jsonl:1"):
        ClinicalTables.read(tmp_path)


def test_how_long_the_complaint_has_lasted_weighs_each_disease_by_its_course() -> None:
    differential = _respiratory()
    known = {"symptom:fever": True, "symptom:cough": True}
    same = differential.posterior(known, unsaid=False)
    assert same[0] == pytest.approx(same[1])  # nothing said of how long: the course makes no difference
    three_days = differential.posterior(known, unsaid=False, duration_days=3)
    two_months = differential.posterior(known, unsaid=False, duration_days=60)
    assert three_days[0] / three_days[1] == pytest.approx(1 / LikelihoodSettings().course_mismatch)
    assert two_months[1] > two_months[0]
    switched_off = _respiratory(LikelihoodSettings(course_mismatch=1.0))
    assert np.allclose(switched_off.posterior(known, unsaid=False, duration_days=3), same)


def test_a_disease_named_in_two_sources_keeps_each_source_spectrum() -> None:
    """The packaged table lists 2 findings of X and another source 20: X's 2 keep a short list's share."""
    others = [f"Finding {k}" for k in range(20)]
    joined = Disease(
        "X", "table", "x", symptoms=["Fever", "Cough", *others], origins=["table", "table"] + ["other"] * 20
    )
    alone = Disease("Y", "table", "y", symptoms=["Fever", "Cough"])
    model = DiseaseModel(["table", "other"], [joined, alone], {"table": TRAITS, "other": TRAITS})
    vocabulary = Vocabulary.from_names(["Fever", "Cough", *others], "table", TRAITS)
    differential = Differential(model, vocabulary)
    fever = differential.likelihood("symptom:fever")
    assert fever[0] == pytest.approx(fever[1]) == pytest.approx(LikelihoodSettings().typical)
    assert differential.likelihood("symptom:finding 3")[0] == pytest.approx(4 / 20)


def test_the_answer_says_first_how_urgently_and_what_not_to_miss(consult_home: Path) -> None:
    method = ConsultMethod(
        build_consultant(MethodContext(settings=Settings(home=consult_home)), ConsultConfig())
    )
    answer = method.answer(Case(id="c", question=README_EXAMPLE))
    details = answer.details
    ranked = {d["name"]: d["probability"] for d in details["differential"]}
    assert details["differential"][0]["name"] == "Pneumonia"
    # three days of illness: tuberculosis (which presents after weeks) sits well below pneumonia
    assert ranked.get("Tuberculosis", 0.0) < ranked["Pneumonia"] / 3
    # pneumonia is to be seen the same day, not at home and not by ambulance on these findings
    triage = details["triage"]
    assert triage["disposition"] == "urgent" and triage["assessed"]
    assert "Pneumonia" in {d["name"] for d in details["dangers"]}
    first = details["sentences"][0]
    assert first["kind"] == "urgency" and first["text"].startswith("See a doctor today")
    # the safety net: the pneumonia's red flags the person does not have yet, in plain words
    watch = [item["name"] for item in triage["watch_for"]]
    assert "confusion" in watch and "fever" not in watch
    assert any(s["kind"] == "safety_net" and "confusion" in s["text"] for s in details["sentences"])
    cited = {e.id: e for e in answer.evidence}
    pneumonia = next(d for d in details["dangers"] if d["name"] == "Pneumonia")
    assert pneumonia["rule_out"] and all(cited[e].provenance.get("title") for e in pneumonia["evidence"])


def test_a_red_flag_escalates_at_once(consultant: Consultant) -> None:
    state = consultant.start("My 3-year-old son has had a barking cough since last night.")
    before, _ = consultant.report(state)
    assert not before.red_flags
    consultant.answer(state, "hpo:HP:0010307", "present")  # stridor, said yes to when asked
    after, evidence = consultant.report(state)
    assert after.triage.disposition == "emergency"
    assert [flag.finding for flag in after.red_flags] == ["stridor"]
    titles = {e.id: e.provenance.get("title") for e in evidence}
    assert all(titles.get(e) for e in after.red_flags[0].evidence if e.startswith("clinical:"))


def test_a_stiff_neck_with_fever_is_an_emergency(consultant: Consultant) -> None:
    """A stiff neck in a patient's words is HPO's Stiff neck, not Nuchal rigidity: with a fever it is the
    meningitis red flag all the same; without one it is not."""
    state = consultant.start("I have a high fever, a bad headache and my neck is stiff.")
    report, _ = consultant.report(state)
    assert report.triage.disposition == "emergency"
    assert [flag.finding for flag in report.red_flags] == ["stiff neck"]
    calm, _ = consultant.report(consultant.start("My neck is stiff after sleeping awkwardly."))
    assert not calm.red_flags


def test_a_childs_red_flag_holds_at_an_unknown_age_unless_the_patient_writes(consultant: Consultant) -> None:
    """Fever in an infant under 3 months is an emergency. An account of a baby of no stated age keeps the
    flag (the safe side); someone telling of their own fever is no infant; a stated age decides."""
    assert all(
        flag.ages[1] <= 16 for flag in packaged_tables().red_flags if flag.ages
    )  # children's flags (under 16s)

    def flagged(text: str) -> list[str]:
        report, _ = consultant.report(consultant.start(text))
        return [flag.finding for flag in report.red_flags]

    assert flagged("My baby has a fever and is feeding poorly.") == ["fever"]
    assert flagged("I have a cough and a fever.") == []
    assert flagged("My 2-month-old has a fever.") == ["fever"]
    assert flagged("My 4-year-old has a fever.") == []


def test_the_packaged_ddxplus_tables_rate_each_condition() -> None:
    records = read_source("packaged:ddxplus")
    assert len(records.records) == 49
    severity = {record.name: record.severity for record in records.records}
    assert severity["Anaphylaxis"] == 1 and severity["URTI"] == 5
