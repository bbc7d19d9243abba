import pytest
from pydantic import BaseModel, Field

from clinrag.core.errors import StructuredOutputError
from clinrag.llm.base import ChatRequest
from clinrag.llm.server_scoring import parsed_ranking, ranking_request
from clinrag.llm.structured import complete_structured, parse_structured


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


def test_ranking_on_the_embedded_model_names_only_options(embedded):
    """The ranking schema's grammar keeps a small model to the options: the rank rule has a list to read."""
    options = ["Myocardial infarction", "Migraine", "Appendicitis"]
    request = ranking_request(ChatRequest.of("Crushing chest pain with sweating. Diagnosis?"), options)
    ranked = parsed_ranking(embedded.complete(request).text, options)
    assert ranked and set(ranked) <= {0, 1, 2}
