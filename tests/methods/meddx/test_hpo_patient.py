"""The structured HPO patient on a real published case (phenopacket-store, SC5D): yes for what the case
shows and anything broader, no for what it excludes and anything narrower, "I don't know" for the rest; a
doctor's free-text question read for its HPO terms by the consultation's real finding extractor (on the
session's compiled packaged knowledge)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.methods.base import MethodContext
from clinrag.methods.consult import ConsultConfig, build_consultant
from clinrag.methods.meddx.hpo_patient import HpoInterviewee, HpoPatient, terms_named
from clinrag.methods.meddx.interviewee import UNKNOWN

RICH = "PMID_17853487_Patient_2"  # shows microcephaly, cataract, …; excludes a short nose, …


@pytest.fixture(scope="module")
def case(data_dir: Path) -> Case:
    dataset = load_dataset("phenopackets-interactive", data_dir / "phenopackets")
    return next(c for c in dataset.cases if c.id == RICH)


def test_answers_follow_the_ontology_from_the_whole_packet(case: Case) -> None:
    patient = HpoPatient(case)
    assert patient.ask("HP:0000518").present is True  # Cataract: shown, though not among the first terms
    assert patient.ask("HP:0000517").present is True  # Abnormality of the lens: broader than cataract
    assert patient.ask("HP:0003196").text == "No."  # Short nose: excluded
    assert patient.ask("HP:0001250").present is None  # Seizure: the case says nothing of it
    assert patient.ask("HP:0001250").text == UNKNOWN
    assert set(patient.revealed) == {"HP:0000518", "HP:0000517", "HP:0003196", "HP:0001250"}
    uncoded = case.model_copy(update={"meta": {}, "patient": case.patient.model_copy(update={"codes": {}})})
    with pytest.raises(InvalidInputError, match="no HPO terms"):
        HpoPatient(uncoded)


def test_free_text_questions_are_answered_through_the_terms_they_name(case: Case, consult_home: Path) -> None:
    consultant = build_consultant(MethodContext(settings=Settings(home=consult_home)), ConsultConfig())
    interviewee = HpoInterviewee(HpoPatient(case), terms_named(consultant))
    ptosis = asyncio.run(interviewee.reply("Have you ever been told you have ptosis?"))  # hidden at first
    assert (ptosis.answer, ptosis.evidence) == ("Yes.", "HP:0000508")
    seizure = asyncio.run(interviewee.reply("Have you had any seizures?"))
    assert (seizure.answer, seizure.evidence) == (UNKNOWN, "HP:0001250")
    nothing = asyncio.run(interviewee.reply("How are you today?"))
    assert (nothing.answer, nothing.evidence) == (UNKNOWN, None)
    # what the clinician heard first, then what was revealed present
    assert interviewee.codes() == [*case.patient.codes["hpo"], "HP:0000508"]
    assert interviewee.usage.calls == 0
