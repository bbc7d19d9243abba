"""The LLM triple extractor through a real `ChatModel`.

The exact-count test talks to a loopback OpenAI-compatible server that answers each chunk of text with a
scripted reply: the rejection paths (wrong direction, wrong type pair, unknown relation and type, duplicates,
invalid JSON) need replies with those specific mistakes, and the embedded 135M model cannot be relied on to
produce any particular triple. The request, the HTTP round trip, the structured-output parsing and the
schema checks all run for real. The embedded model runs the extractor once, checked only for a well-formed
result whose accepted triples fit the schema."""

from __future__ import annotations

import json
import uuid

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.importers import load_sources
from clinrag.graph.schema import Relation, valid_triple
from clinrag.graph.triples import (
    DUPLICATE,
    EMPTY_NAME,
    INVALID_JSON,
    MALFORMED,
    REASONS,
    SELF_RELATION,
    UNKNOWN_RELATION,
    UNKNOWN_TYPE,
    WRONG_DIRECTION,
    WRONG_TYPE_PAIR,
    KnowledgeTriple,
    TripleExtractor,
    normalise_name,
)
from tests.openai_server import LoopbackServer, chat_body, scripted_model

PNEUMONIA = (
    "Pneumonia presents with cough and fever; a chest X-ray is recommended. Sepsis may complicate it, "
    "and amoxicillin is commonly given."
)
SEPSIS = "Sepsis is a life-threatening organ dysfunction caused by a dysregulated host response to infection."


def triple(head: str, head_type: str, relation: str, tail: str, tail_type: str) -> dict[str, str]:
    return {"head": head, "head_type": head_type, "relation": relation, "tail": tail, "tail_type": tail_type}


PNEUMONIA_REPLY = json.dumps(
    {
        "triples": [
            triple("Pneumonia", "Disease", "HAS_SYMPTOM", "Cough", "Symptom"),  # accepted
            triple("Pneumonia", "Disease", "HAS_SYMPTOM", ' "fever." ', "Symptom"),  # accepted as "fever"
            triple("Pneumonia", "disease", "recommend test", "Chest X-ray", "test"),  # accepted, normalised
            triple("Pneumonia", "Disease", "HAS_COMORBIDITY", "Sepsis", "Disease"),  # accepted
            triple("Cough", "Symptom", "HAS_SYMPTOM", "Pneumonia", "Disease"),  # wrong direction
            triple("Pneumonia", "Disease", "RECOMMEND_DRUG", "Cough", "Symptom"),  # wrong type pair
            triple("Pneumonia", "Disease", "TREATED_BY", "Amoxicillin", "Drug"),  # unknown relation
            triple("Pneumonia", "Disease", "RECOMMEND_DRUG", "Amoxicillin", "Medication"),  # unknown type
            triple("pneumonia", "Disease", "HAS_SYMPTOM", "COUGH", "Symptom"),  # duplicate
            triple("Sepsis", "Disease", "HAS_COMORBIDITY", "Pneumonia", "Disease"),  # duplicate (symmetric)
            triple("Pneumonia", "Disease", "HAS_COMORBIDITY", "PNEUMONIA", "Disease"),  # self relation
            triple("  ", "Disease", "HAS_SYMPTOM", "Cough", "Symptom"),  # empty name
            {"head": "Pneumonia", "relation": "HAS_SYMPTOM"},  # malformed
            "Pneumonia HAS_SYMPTOM Dyspnea",  # malformed
        ]
    }
)
SEPSIS_REPLY = "Sepsis is caused by infection, so the triples are: sepsis -> infection"  # not JSON


class ChunkServer(LoopbackServer):
    """Answers each request by the chunk of text in its prompt, so concurrent chunks get their own reply."""

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        prompt = body["messages"][-1]["content"]
        [reply] = [text for chunk, text in self.replies.items() if chunk in prompt]
        return 200, chat_body(reply), 0.0


@pytest.fixture
def chunk_server():
    served = ChunkServer({PNEUMONIA: PNEUMONIA_REPLY, SEPSIS: SEPSIS_REPLY})
    yield served
    served.close()


def test_scripted_replies_are_accepted_or_rejected_by_the_schema(chunk_server, store, tmp_path) -> None:
    model = scripted_model(chunk_server)
    extractor = TripleExtractor(model, max_chars=len(PNEUMONIA) + 10)
    result = extractor.extract(f"{PNEUMONIA}\n\n{SEPSIS}")

    assert result.chunks == 2 and len(chunk_server.requests) == 2 and result.usage.calls == 2
    for request in chunk_server.requests:
        schema = request["response_format"]["json_schema"]["schema"]
        item = schema["properties"]["triples"]["items"]["properties"]
        assert item["relation"]["enum"] == [str(r) for r in Relation]
        assert "(Disease)-[:RECOMMEND_DRUG]->(Drug)" in request["messages"][-1]["content"]
    assert result.accepted == [
        KnowledgeTriple("Pneumonia", Relation.HAS_SYMPTOM, "Cough"),
        KnowledgeTriple("Pneumonia", Relation.HAS_SYMPTOM, "fever"),
        KnowledgeTriple("Pneumonia", Relation.RECOMMEND_TEST, "Chest X-ray"),
        KnowledgeTriple("Pneumonia", Relation.HAS_COMORBIDITY, "Sepsis"),
    ]
    assert result.counts() == {
        "accepted": 4,
        WRONG_DIRECTION: 1,
        WRONG_TYPE_PAIR: 1,
        UNKNOWN_RELATION: 1,
        UNKNOWN_TYPE: 1,
        DUPLICATE: 2,
        SELF_RELATION: 1,
        EMPTY_NAME: 1,
        MALFORMED: 2,
        INVALID_JSON: 1,
    }
    [failure] = result.failures
    assert failure.chunk == 1 and failure.raw == SEPSIS_REPLY
    assert {r.chunk for r in result.rejected} == {0}
    assert [r.proposed["relation"] for r in result.rejected if r.reason == WRONG_DIRECTION] == ["HAS_SYMPTOM"]

    # the accepted triples go into the graph through the importers' loader
    graph = FalkorDBStore(store.server.url, f"triples-{uuid.uuid4().hex[:8]}")
    try:
        report = load_sources(graph, [result.to_source()], tmp_path / "c.json", graph_id="t", progress=False)
    finally:
        graph.close()
    assert report.nodes == {"Disease": 2, "Symptom": 2, "Test": 1, "Drug": 0, "Cure": 0}
    assert report.relations == {
        "HAS_SYMPTOM": 2,
        "RECOMMEND_TEST": 1,
        "RECOMMEND_DRUG": 0,
        "RECOMMEND_CURE": 0,
        "HAS_COMORBIDITY": 1,
    }


def test_names_are_normalised_and_empty_text_is_refused(chunk_server) -> None:
    assert normalise_name("  “Chest\n X-ray.”  ") == "Chest X-ray"
    assert normalise_name("ＣＯＰＤ") == "COPD"  # NFKC: full-width letters
    model = scripted_model(chunk_server)
    with pytest.raises(InvalidInputError, match="empty"):
        TripleExtractor(model).extract("  \n ")
    assert chunk_server.requests == []


def test_the_embedded_model_gives_a_well_formed_schema_valid_result(embedded) -> None:
    result = TripleExtractor(embedded, max_tokens=200).extract(
        "Influenza causes fever, cough and muscle aches. Oseltamivir is used to treat influenza."
    )
    assert result.chunks == 1 and result.usage.calls == 1
    counts = result.counts()
    assert sum(counts.values()) == len(result.accepted) + len(result.rejected) + len(result.failures)
    assert set(counts) <= {"accepted", *REASONS}
    for accepted in result.accepted:
        assert valid_triple(accepted.head_label, accepted.relation, accepted.tail_label)
        assert accepted.head == normalise_name(accepted.head) != ""
        assert accepted.tail == normalise_name(accepted.tail) != ""
    for failure in result.failures:
        assert failure.reason == INVALID_JSON and failure.error
