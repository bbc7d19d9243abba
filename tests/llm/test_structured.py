import pytest
from pydantic import BaseModel, Field

from clinrag.core.errors import StructuredOutputError
from clinrag.llm.base import ChatRequest, Completion
from clinrag.llm.structured import choice_request, complete_structured, parse_structured, scores_from_choice


class Diagnosis(BaseModel):
    diagnosis: str
    confidence: float = Field(ge=0, le=1)


def test_valid_json_parses():
    assert parse_structured('{"diagnosis": "gout", "confidence": 0.8}', Diagnosis).diagnosis == "gout"


@pytest.mark.parametrize(
    "text",
    [
        '{"diagnosis": "gout", "confidence": 0.8',  # unclosed
        'Sure! Here it is: {"diagnosis": "gout", "confidence": 0.8} Hope it helps.',  # prose around it
        "{'diagnosis': 'gout', 'confidence': 0.8,}",  # single quotes, trailing comma
    ],
)
def test_broken_json_is_repaired_once(text):
    assert parse_structured(text, Diagnosis) == Diagnosis(diagnosis="gout", confidence=0.8)


@pytest.mark.parametrize(
    "text",
    [
        '{"diagnosis": "gout", "confidence": 7}',  # valid JSON, invalid value
        '{"confidence": 0.5}',  # missing field
        "I think it is gout.",  # no JSON at all
        "",
    ],
)
def test_unrepairable_output_raises_a_typed_error_with_the_raw_text(text):
    with pytest.raises(StructuredOutputError) as caught:
        parse_structured(text, Diagnosis)
    assert caught.value.raw == text
    assert "Diagnosis" in str(caught.value)


def test_embedded_model_produces_a_valid_instance(embedded):
    request = ChatRequest.of(
        "Patient: fever, productive cough and crackles on auscultation. Most likely diagnosis and your "
        "confidence between 0 and 1, as JSON.",
        max_tokens=60,
    )
    result, completion = complete_structured(embedded, request, Diagnosis)
    assert result.diagnosis.strip()
    assert 0 <= result.confidence <= 1
    assert completion.usage.completion_tokens > 0


def test_choice_by_generation_on_the_embedded_model(embedded):
    options = ["Myocardial infarction", "Migraine", "Appendicitis"]
    request = choice_request(
        ChatRequest.of("Crushing chest pain with sweating. Diagnosis?", max_tokens=30), options
    )
    scores = scores_from_choice(embedded.complete(request), options)
    assert scores.method == "generation"
    assert scores.logprobs.count(0.0) == 1 and scores.logprobs.count(None) == 2


def test_choice_outside_options_is_rejected():
    completion = Completion(text='{"answer": "Gout"}', model="m")
    with pytest.raises(StructuredOutputError, match="not one of the options"):
        scores_from_choice(completion, ["Asthma", "Pneumonia"])
