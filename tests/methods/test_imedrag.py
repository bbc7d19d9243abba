"""i-MedRAG and its baselines (`rag`, `cot`) over a real corpus built from MedMCQA explanations and PubMedQA
abstracts, on real MedQA questions.

Where the flow must be controlled — which follow-up queries are written, how long an answer takes — a loopback
server that answers by role stands in for a model server: the embedded model cannot be made to repeat a query
or to wait. The embedded model runs every method once end to end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.methods.base import MethodContext
from clinrag.methods.cot import CoTConfig, CoTMethod
from clinrag.methods.imedrag import IMedRAGConfig, IMedRAGMethod
from clinrag.methods.rag import NOTHING_FOUND, DocumentRetriever, RAGConfig, RAGMethod
from clinrag.methods.registry import get_method
from tests.openai_server import LoopbackServer, chat_body, scripted_model

UNKNOWN_TERMS = "zqxv wplkj"  # shares no term with the corpus: BM25 finds nothing


@pytest.fixture(scope="module")
def corpus(data_dir: Path, minilm_embedder, tmp_path_factory) -> KnowledgeBase:
    """A document corpus as `clinrag kb build --no-rewrite` builds it, from the first records of two
    sources."""
    out = tmp_path_factory.mktemp("corpus") / "kb"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    sources = [data_dir / "medmcqa" / "dev.json", data_dir / "pubmedqa" / "test_set.json"]
    builder.build(sources, out, limit=120, progress=False)
    return KnowledgeBase.load(out, minilm_embedder)


@pytest.fixture(scope="module")
def medqa(data_dir: Path) -> list[Case]:
    return load_dataset("medqa", data_dir / "medqa" / "us_4options_test.jsonl").cases[:3]


def _role(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    if prompt.startswith("You are a medical expert answering"):
        return "queries"
    if prompt.startswith("Here are documents"):
        return "query_answer"
    if prompt.startswith("Analyse the medical question"):
        return "analysis"
    return "final"


class QueryPlanServer(LoopbackServer):
    """Iteration i's reply proposes `plan[i]` (the last repeats); a follow-up query is answered
    "Found: <query>" after `delay` seconds; the final answer is the letter A. `enough_from` (an iteration)
    makes the model say it has enough information from then on."""

    def __init__(self, plan: list[list[str]], delay: float = 0.0, enough_from: int | None = None) -> None:
        self.plan = plan
        self.delay = delay
        self.enough_from = enough_from
        self.iteration = 0
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        role = _role(body)
        if role == "queries":
            iteration, self.iteration = self.iteration, self.iteration + 1
            reply = {"analysis": f"Iteration {iteration}: more facts are needed."}
            if "enough_information" in json.dumps(body.get("response_format")):
                reply["enough_information"] = self.enough_from is not None and iteration >= self.enough_from
            reply["queries"] = self.plan[min(iteration, len(self.plan) - 1)]
            return 200, chat_body(json.dumps(reply)), 0.0
        if role == "query_answer":
            query = body["messages"][-1]["content"].rsplit("Question: ", 1)[1]
            return 200, chat_body(f"Found: {query}"), self.delay
        if role == "analysis":
            return 200, chat_body("The answers found point to option A."), 0.0
        return 200, chat_body("A"), 0.0

    def prompts(self, role: str) -> list[str]:
        return [r["messages"][-1]["content"] for r in self.requests if _role(r) == role]


@pytest.fixture
def plan_server():
    servers: list[QueryPlanServer] = []

    def make(plan: list[list[str]], **options) -> QueryPlanServer:
        servers.append(QueryPlanServer(plan, **options))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def _imedrag(
    server: QueryPlanServer, corpus: KnowledgeBase, retriever: str = "rrf", **config
) -> IMedRAGMethod:
    model = scripted_model(server, concurrency=4)
    documents = DocumentRetriever(corpus, k=3, retriever=retriever, tagger=None)
    return IMedRAGMethod(model, documents, IMedRAGConfig(answer="generate", **config))


def test_the_history_grows_by_each_iteration_and_repeated_queries_are_not_asked(
    plan_server, corpus, medqa
) -> None:
    server = plan_server(
        [
            ["iron deficiency anemia treatment", "causes of microcytic anemia"],
            ["ferritin in iron deficiency", "Iron deficiency anemia treatment?"],  # the second is a repeat
            ["thalassemia trait blood smear", "ferritin in iron deficiency"],  # so is the second here
        ]
    )
    answer = asyncio.run(_imedrag(server, corpus, iterations=3, queries=2).aanswer(medqa[0]))

    assert answer.error is None and answer.result.choice == "A"
    first, second, third = server.prompts("queries")
    assert "Q1:" not in first and medqa[0].question.strip()[:80] in first
    assert "Q1: iron deficiency anemia treatment\nA1: Found: iron deficiency anemia treatment" in second
    assert "Q2: causes of microcytic anemia" in second and "Q3:" not in second
    assert "Q3: ferritin in iron deficiency" in third and "Q4:" not in third
    (final,) = server.prompts("final")
    assert "Q4: thalassemia trait blood smear\nA4: Found: thalassemia trait blood smear" in final

    (history_step,) = [s for s in answer.trace.steps if s.name == "imedrag.history"]
    history = history_step.output["history"]
    assert [(h["iteration"], h["query"]) for h in history] == [
        (0, "iron deficiency anemia treatment"),
        (0, "causes of microcytic anemia"),
        (1, "ferritin in iron deficiency"),
        (2, "thalassemia trait blood smear"),
    ]
    repeats = [s.output["repeated"] for s in answer.trace.steps if s.name == "imedrag.dedupe"]
    assert repeats == [[], ["Iron deficiency anemia treatment?"], ["ferritin in iron deficiency"]]
    assert len(server.prompts("query_answer")) == 4
    assert answer.usage.calls == 3 + 4 + 1
    corpus_ids = {f"kb:{statement_id}" for statement_id in corpus.statements}
    cited = {doc for h in history for doc in h["documents"]}
    assert cited and cited <= corpus_ids and {e.id for e in answer.evidence} == cited


def test_the_final_analysis_reads_the_history_and_the_answer_reads_the_analysis(
    plan_server, corpus, medqa
) -> None:
    """`final_analysis` (i-MedRAG's last step): an analysis of the question and the history, written before
    the answer and shown to it; off, the answer sees the history alone and no analysis is asked for."""
    plain = plan_server([["What causes fever?"]])
    asyncio.run(_imedrag(plain, corpus, iterations=1, queries=1).aanswer(medqa[0]))
    assert plain.prompts("analysis") == [] and "Analysis:" not in plain.prompts("final")[0]
    server = plan_server([["What causes fever?"]])
    answer = asyncio.run(
        _imedrag(server, corpus, iterations=1, queries=1, final_analysis=True).aanswer(medqa[0])
    )
    (analysis,) = server.prompts("analysis")
    assert "Found: What causes fever?" in analysis and medqa[0].question.strip()[:80] in analysis
    (final,) = server.prompts("final")
    assert "Analysis: The answers found point to option A." in final
    step = next(s for s in answer.trace.steps if s.name == "imedrag.analysis")
    assert step.output == {"analysis": "The answers found point to option A."}


def test_the_queries_of_one_iteration_are_answered_concurrently(plan_server, corpus, medqa) -> None:
    queries = ["anemia in pregnancy", "vitamin B12 deficiency signs", "hemolysis laboratory findings"]
    server = plan_server([queries], delay=0.6)
    answer = asyncio.run(_imedrag(server, corpus, iterations=1, queries=3).aanswer(medqa[0]))

    assert answer.error is None
    assert server.max_in_flight == 3  # all three answers were being written at the same time
    query_steps = [s for s in answer.trace.steps if s.name == "query"]
    assert len(query_steps) == 3 and all(s.duration_s >= 0.6 for s in query_steps)
    assert max(s.duration_s for s in query_steps) < 3 * 0.6


def test_a_query_that_retrieves_nothing_is_answered_as_not_found_without_a_model_call(
    plan_server, corpus, medqa
) -> None:
    server = plan_server([[UNKNOWN_TERMS, "anemia treatment"]])
    method = _imedrag(server, corpus, retriever="lexical", iterations=1, queries=2)
    answer = asyncio.run(method.aanswer(medqa[0]))

    assert answer.error is None and answer.result.choice == "A"
    assert server.prompts("query_answer") and all(
        UNKNOWN_TERMS not in p for p in server.prompts("query_answer")
    )
    (empty,) = [s for s in answer.trace.steps if s.name == "query" and s.input["query"] == UNKNOWN_TERMS]
    assert empty.output["documents"] == [] and empty.output["answer"] == NOTHING_FOUND
    (final,) = server.prompts("final")
    assert f"Q1: {UNKNOWN_TERMS}\nA1: {NOTHING_FOUND}" in final


def test_adaptive_stop_ends_the_iterations_when_the_model_has_enough(plan_server, corpus, medqa) -> None:
    server = plan_server([["anemia causes"], ["ferritin levels"], ["iron studies"]], enough_from=1)
    answer = asyncio.run(
        _imedrag(server, corpus, iterations=3, queries=1, adaptive_stop=True).aanswer(medqa[0])
    )

    assert answer.error is None
    assert len(server.prompts("queries")) == 2 and len(server.prompts("query_answer")) == 1
    steps = [s for s in answer.trace.steps if s.name == "imedrag.queries"]
    # the first iteration has no history to judge, so it is not asked
    assert [s.output.get("enough_information") for s in steps] == [None, True]


def test_a_reply_that_is_not_the_query_json_ends_the_iterations_and_is_recorded(
    server, corpus, medqa
) -> None:
    server.replies = [
        (200, chat_body("I would look up the causes of anemia."), 0.0),
        (200, chat_body("B"), 0.0),
    ]
    model = scripted_model(server)
    method = IMedRAGMethod(
        model, DocumentRetriever(corpus, k=3, retriever="rrf", tagger=None), IMedRAGConfig(answer="generate")
    )
    answer = asyncio.run(method.aanswer(medqa[0]))

    (queries,) = [s for s in answer.trace.steps if s.name == "imedrag.queries"]
    assert "not a valid FollowUp" in queries.output["error"]
    assert queries.output["raw"] == "I would look up the causes of anemia."
    assert len(server.requests) == 2 and answer.result.choice == "B"


def test_the_embedded_model_runs_imedrag_rag_and_cot_end_to_end(embedded, corpus, medqa) -> None:
    case = medqa[1]
    documents = DocumentRetriever(corpus, k=2, retriever="rrf", tagger=None)
    imedrag = IMedRAGMethod(embedded, documents, IMedRAGConfig(iterations=1, queries=1, query_tokens=96))
    answer = imedrag.answer(case)
    assert answer.error is None and answer.result.choice in case.options
    (history,) = [s.output["history"] for s in answer.trace.steps if s.name == "imedrag.history"]
    assert len(history) == 1 and history[0]["query"].strip() and history[0]["answer"].strip()
    corpus_ids = {f"kb:{statement_id}" for statement_id in corpus.statements}
    assert {e.id for e in answer.evidence} == set(history[0]["documents"]) <= corpus_ids

    rag = RAGMethod(embedded, documents, RAGConfig(k=2)).answer(case)
    assert rag.error is None and rag.result.choice in case.options and len(rag.evidence) == 2
    probabilities = next(s for s in rag.trace.steps if s.name == "score_options").output["probabilities"]
    assert set(probabilities) == set(case.options)

    cot = CoTMethod(embedded, CoTConfig(reasoning_tokens=64)).answer(case)
    assert cot.usage.calls == 2
    reasoning = next(s for s in cot.trace.steps if s.name == "reason").output["text"]
    assert cot.text.startswith(reasoning.strip())
    if cot.error is None:
        assert cot.result.choice in case.options
    else:  # an unparseable conclusion is a recorded failure, not a default option
        assert cot.result.choice is None and cot.error.startswith("AnswerParseError")


def test_rag_with_nothing_retrieved_answers_without_documents(embedded, corpus, medqa) -> None:
    case = medqa[0].model_copy(update={"question": f"{UNKNOWN_TERMS}?", "patient": None})
    case = case.model_copy(update={"options": {"A": "zqxv", "B": "wplkj"}})
    lexical = DocumentRetriever(corpus, k=3, retriever="lexical", tagger=None)
    answer = RAGMethod(embedded, lexical, RAGConfig()).answer(case)

    (retrieve,) = [s for s in answer.trace.steps if s.name == "retrieve"]
    assert retrieve.output["documents"] == [] and retrieve.output["note"] == NOTHING_FOUND
    assert answer.evidence == [] and answer.error is None and answer.result.choice in case.options


def test_a_missing_corpus_or_a_bad_parameter_is_a_clear_error(tmp_path: Path) -> None:
    for name in ("rag", "imedrag"):
        missing = MethodContext(settings=Settings(), params={"corpus": str(tmp_path / "none")})
        with pytest.raises(InvalidInputError, match=r"no knowledge base at .*--param corpus=PATH"):
            get_method(name).build(missing)
        bad = MethodContext(settings=Settings(), params={"k": "0", "retriever": "bm25"})
        with pytest.raises(InvalidInputError, match=f"invalid {name} parameters: k: .*retriever: "):
            get_method(name).build(bad)
