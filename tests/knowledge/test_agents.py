"""The declarative rewrite and concept tagging agents, on the embedded model and on a real HTTP server."""

import json

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.knowledge.rewrite import DeclarativeRewriter
from clinrag.knowledge.tagging import EmbeddingTagger, LLMTagger, validate_chapters
from tests.openai_server import chat_body, scripted_model


@pytest.fixture(scope="module")
def medqa_rows(data_dir):
    lines = (data_dir / "medqa" / "us_4options_test.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[:4]]


def test_mcq_rewrite_states_the_answer_without_wrong_options(embedded, medqa_rows):
    rewriter = DeclarativeRewriter(embedded)
    kept = 0
    for row in medqa_rows:
        result = rewriter.rewrite_mcq(row["question"], row["answer"])
        if result.error:
            assert "rejected twice" in result.error and result.statements == []
            continue
        kept += 1
        (statement,) = result.statements
        assert not statement.endswith("?")
        wrong = [text for key, text in row["options"].items() if key != row["answer_idx"]]
        assert not any(option.lower() in statement.lower() for option in wrong if len(option) > 3)
    assert kept >= 2  # the tiny model manages some; every failure is reported, none is silently kept


def test_chunk_rewrite_returns_statements(embedded, data_dir):
    abstract = next(iter(json.loads((data_dir / "pubmedqa" / "test_set.json").read_text()).values()))
    result = DeclarativeRewriter(embedded).rewrite_chunk(abstract["CONTEXTS"][0])
    assert result.error is None
    assert 1 <= len(result.statements) <= 8 and all(s.strip() for s in result.statements)


def test_validation_rejects_non_chapters():
    valid, invalid = validate_chapters([9, "IX", "Cardiology", 23, "I00-I99", "0"])
    assert valid == [9]
    assert invalid == ["Cardiology", "23", "0"]


def test_llm_tagger_on_the_embedded_model_returns_only_chapters(embedded):
    tagging = LLMTagger(embedded).tag("Acute myocardial infarction is treated with aspirin and reperfusion.")
    assert 1 <= len(tagging.tags) <= 3
    assert all(1 <= t <= 22 for t in tagging.tags)


def test_llm_tagger_retries_once_then_records_untagged(server):
    model = scripted_model(server)
    server.replies = [
        (200, chat_body('{"chapters": ["Cardiology", 31]}'), 0),
        (200, chat_body('{"chapters": [9]}'), 0),
    ]
    tagging = LLMTagger(model).tag("Heart failure with reduced ejection fraction.")
    assert tagging.tags == [9] and tagging.rejected == ["Cardiology", "31"]
    assert "Cardiology" in server.requests[1]["messages"][-1]["content"]  # the retry names what was rejected

    server.requests.clear()
    server.replies = [(200, chat_body('{"chapters": ["Cardiology"]}'), 0)]
    tagging = LLMTagger(model).tag("Heart failure.")
    assert tagging.tags == [] and tagging.untagged_reason and len(server.requests) == 2


def test_an_llm_tagger_of_one_category_asks_for_one_and_keeps_one(server):
    """DoctorRAG's agent picks one first-level category: the prompt asks for one, and a reply that lists
    more has the rest rejected."""
    model = scripted_model(server)
    server.replies = [(200, chat_body('{"chapters": [10, 9]}'), 0)]
    tagging = LLMTagger(model, max_tags=1).tag("Heart failure with reduced ejection fraction.")
    assert tagging.tags == [9] and tagging.rejected == ["10"]
    request = server.requests[0]
    assert "Choose one chapter number" in request["messages"][-1]["content"]
    with pytest.raises(InvalidInputError, match="max_tags"):
        LLMTagger(model, max_tags=4)


def test_embedding_tagger_picks_the_organ_system(minilm_embedder):
    tagger = EmbeddingTagger(minilm_embedder)
    circulatory, respiratory = tagger.tag_many(
        ["Diseases of the heart: coronary artery disease and hypertension.", "Asthma and chronic bronchitis."]
    )
    assert 9 in circulatory.tags
    assert 10 in respiratory.tags
