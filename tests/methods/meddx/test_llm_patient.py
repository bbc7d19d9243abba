"""The LLM patient on real iCraft-MD vignettes: the embedded model end to end, and a scripted loopback server
where the exact prompts or an invalid reply must be controlled."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError, StructuredOutputError
from clinrag.eval.datasets import load_dataset
from clinrag.methods.meddx.llm_patient import LLMPatient
from tests.openai_server import chat_body, scripted_model


@pytest.fixture(scope="module")
def icraft_case(data_dir: Path):
    return load_dataset("icraft-md", data_dir=data_dir).cases[0]


def test_embedded_patient_answers_with_a_typed_reply(embedded, icraft_case) -> None:
    patient = LLMPatient.for_case(embedded, icraft_case)
    for question in ("What brings you in today?", "Do you have a fever?"):
        turn = asyncio.run(patient.ask(question))
        assert turn.answer.answer in ("yes", "no", "I don't know")
        assert turn.text().startswith(("Yes.", "No.", "I don't know."))
    assert [t.question for t in patient.dialogue] == ["What brings you in today?", "Do you have a fever?"]
    assert patient.usage.calls == 2 and patient.usage.completion_tokens > 0


def test_prompts_hold_the_profile_and_the_dialogue_so_far(server, icraft_case) -> None:
    # The loopback server stands in for a model server, so the requests the patient sends can be read.
    server.replies = [
        (200, chat_body(json.dumps({"answer": "yes", "details": "The spots started on my belly."})), 0.0),
        (200, chat_body(json.dumps({"answer": "I don't know", "details": ""})), 0.0),
    ]
    model = scripted_model(server)
    patient = LLMPatient.for_case(model, icraft_case)
    first = asyncio.run(patient.ask("Do you have spots on your skin?"))
    second = asyncio.run(patient.ask("Have you travelled abroad recently?"))
    assert first.text() == "Yes. The spots started on my belly."
    assert second.text() == "I don't know."
    system, user = server.requests[1]["messages"]
    assert all(fact in system["content"] for fact in icraft_case.patient.findings)
    assert icraft_case.patient.initial_presentation in user["content"]
    assert (
        "Doctor: Do you have spots on your skin?\nPatient: Yes. The spots started on my belly."
        in user["content"]
    )
    assert user["content"].endswith("Doctor: Have you travelled abroad recently?")
    assert "Have you travelled" not in server.requests[0]["messages"][1]["content"]


def test_a_patient_that_does_not_volunteer_is_told_to_answer_only_what_is_asked(server, icraft_case) -> None:
    # The loopback server stands in for a model server, so the instructions the patient gets can be read.
    reply = (200, chat_body(json.dumps({"answer": "I don't know", "details": ""})), 0.0)
    server.replies = [reply, reply]
    for volunteers in (True, False):
        patient = LLMPatient.for_case(scripted_model(server), icraft_case, volunteers=volunteers)
        asyncio.run(patient.ask("Have you travelled abroad recently?"))
    offered, only_asked = (request["messages"][0]["content"] for request in server.requests)
    assert "closely related to the question" in offered and "Add nothing else." not in offered
    assert "closely related" not in only_asked and "Add nothing else." in only_asked


def test_invalid_reply_is_a_typed_error_and_not_a_turn(server, icraft_case) -> None:
    server.replies = [(200, chat_body('{"answer": "maybe", "details": "hard to say"}'), 0.0)]
    model = scripted_model(server)
    patient = LLMPatient.for_case(model, icraft_case)
    with pytest.raises(StructuredOutputError):
        asyncio.run(patient.ask("Do you have a fever?"))
    assert patient.dialogue == []


def test_empty_or_huge_question_is_refused(server, icraft_case) -> None:
    model = scripted_model(server)
    patient = LLMPatient.for_case(model, icraft_case)
    for question in ("  ", "why? " * 400):
        with pytest.raises(InvalidInputError):
            asyncio.run(patient.ask(question))
    assert server.requests == []
    with pytest.raises(InvalidInputError, match="no patient findings"):
        LLMPatient.for_case(model, icraft_case.model_copy(update={"patient": None}))
