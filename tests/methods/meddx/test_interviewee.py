"""Free-text questions to a coded DDXPlus patient: matched to catalogue questions by the real MiniLM
embedder, answered exactly, and nothing revealed for a question that matches no evidence."""

from __future__ import annotations

import asyncio

import pytest

from clinrag.methods.meddx.interviewee import UNKNOWN, CodedInterviewee, QuestionMatcher
from clinrag.methods.meddx.structured_patient import StructuredPatient, evidence_catalogue


@pytest.fixture(scope="module")
def matcher(ddxplus_interactive, minilm_embedder) -> QuestionMatcher:
    path = ddxplus_interactive.cases[0].meta["evidence_catalogue"]
    return QuestionMatcher(evidence_catalogue(path), minilm_embedder)


@pytest.mark.parametrize(
    ("question", "asked_about"),
    [
        ("Are you coughing?", "Do you have a cough?"),
        ("Have you traveled out of the country recently?", "Have you traveled out of the country"),
        ("Any shortness of breath?", "shortness of breath"),
    ],
)
def test_paraphrases_match_the_catalogue_question(matcher, question, asked_about) -> None:
    evidence, score = matcher.match(question)
    assert evidence is not None and score >= matcher.threshold
    assert asked_about in matcher.catalogue.question(evidence)


@pytest.mark.parametrize("question", ["How old are you?", "What brings you in today?"])
def test_questions_outside_the_catalogue_match_nothing(matcher, question) -> None:
    evidence, score = matcher.match(question)
    assert evidence is None and score < matcher.threshold


def test_coded_patient_reveals_only_what_a_question_matched(ddxplus_interactive, matcher) -> None:
    case = next(c for c in ddxplus_interactive.cases if "E_201" in str(c.meta["hidden_evidence"]))
    patient = StructuredPatient(case, matcher.catalogue)
    interviewee = CodedInterviewee(patient, matcher)

    unmatched = asyncio.run(interviewee.reply("How old are you?"))
    assert unmatched.answer == UNKNOWN and unmatched.evidence is None
    assert patient.revealed == {} and interviewee.codes() == []

    cough = asyncio.run(interviewee.reply("Are you coughing?"))
    assert (cough.evidence, cough.answer) == ("E_201", "Yes.")
    assert list(patient.revealed) == ["E_201"] and interviewee.codes() == ["E_201"]
    assert set(interviewee.codes()) <= set(case.meta["hidden_evidence"])
