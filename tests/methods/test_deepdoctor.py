"""DeepDoctor-RAG over the DDXPlus disease graph imported into a live FalkorDB server, on real DDXPlus
patients.

Where the test must decide what the planner plans and what the model answers, a loopback server scripted by
role stands in for a model server (the embedded model cannot be made to plan given actions or to abstain);
the embedded model then runs the method once end to end."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.literature.http import HttpPolicy
from clinrag.literature.offline import PubMedQAIndex
from clinrag.literature.pubmed import PubMedSource
from clinrag.literature.search import LiteratureSearch
from clinrag.methods.base import MethodContext
from clinrag.methods.deepdoctor import DeepDoctorConfig, DeepDoctorMethod
from clinrag.methods.registry import get_method
from clinrag.terms.mesh import MeshIndex, build_mesh_index
from clinrag.terms.mesh_mapper import MeshMapper
from tests.literature.literature_server import Fault, LiteratureServer
from tests.methods.conftest import ddx_symptoms
from tests.openai_server import LoopbackServer, chat_body, scripted_model

PLAN_PROMPT_START = "You look things up in a medical knowledge graph"


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> MeshMapper:
    path = tmp_path_factory.mktemp("mesh") / "mesh.sqlite"
    build_mesh_index([data_dir / "mesh" / "terms.tsv", data_dir / "mesh" / "tree-numbers.tsv"], path)
    return MeshMapper(MeshIndex(path))


class ScriptServer(LoopbackServer):
    """Plans `plans[i]` in planning round i (the last repeats); answers every other request with `reply`."""

    def __init__(self, plans: list[dict], reply: str) -> None:
        self.plans, self.reply = plans, reply
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        if body["messages"][-1]["content"].startswith(PLAN_PROMPT_START):
            rounds = len(self.plan_requests()) - 1
            return 200, chat_body(json.dumps(self.plans[min(rounds, len(self.plans) - 1)])), 0.0
        return 200, chat_body(self.reply), 0.0

    def plan_requests(self) -> list[dict]:
        return [r for r in self.requests if r["messages"][-1]["content"].startswith(PLAN_PROMPT_START)]

    def answer_requests(self) -> list[dict]:
        return [r for r in self.requests if not r["messages"][-1]["content"].startswith(PLAN_PROMPT_START)]


@pytest.fixture
def script():
    servers: list[ScriptServer] = []

    def make(plans: list[dict], reply: str) -> ScriptServer:
        servers.append(ScriptServer(plans, reply))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def _method(
    server: ScriptServer,
    store: FalkorDBStore,
    mesh: MeshMapper | None = None,
    literature: LiteratureSearch | None = None,
    **config,
):
    model = scripted_model(server)
    config = {"answer": "generate", **config}
    return DeepDoctorMethod(model, store, DeepDoctorConfig(**config), mesh=mesh, literature=literature)


def test_the_answer_cites_a_pack_of_graph_facts_descriptions_and_mesh_terms(
    script, store: FalkorDBStore, mesh: MeshMapper, cases: list[Case], ddx_json
) -> None:
    case = cases[0]
    gold = case.gold.answer
    symptoms = ddx_symptoms(ddx_json, gold)
    server = script(
        [
            {"actions": [{"action": "INFER_DISEASES_BY_SYMPTOMS", "keywords": symptoms}]},
            {"actions": [{"action": "GET_SYMPTOMS", "keywords": [gold]}]},
            {"actions": []},
        ],
        reply=gold,
    )
    answer = _method(server, store, mesh).answer(case)

    assert answer.error is None and answer.result.choice == gold and answer.text == gold
    assert len(server.plan_requests()) == 3 and len(server.answer_requests()) == 1
    facts = [e for e in answer.evidence if e.kind == "graph_fact" and "|" in e.id]
    # every fact resolves to an edge of the live graph, and the gold disease's own symptoms are all there
    for fact in facts:
        p = fact.provenance
        rows = store.query(
            f"MATCH (d:Disease {{name: $h}})-[:{p['relation']}]->(x {{name: $t}}) RETURN count(*) AS n",
            {"h": p["head"], "t": p["tail"]},
        )
        assert rows[0]["n"] == 1, fact.id
    stored = store.query("MATCH (:Disease {name: $d})-[:HAS_SYMPTOM]->(s) RETURN s.name AS s", {"d": gold})
    assert {r["s"] for r in stored} <= {f.provenance["tail"] for f in facts if f.provenance["head"] == gold}
    descriptions = {e.provenance["disease"] for e in answer.evidence if e.provenance.get("field")}
    assert gold in descriptions
    terms = [e for e in answer.evidence if e.kind == "term"]
    assert terms  # DDXPlus names such as Pneumonia or Bronchitis are MeSH descriptor names
    for term in terms:
        assert term.provenance["descriptor"]["ui"] == term.id.removeprefix("mesh:")
        assert term.provenance["input"] in descriptions
    # the answer prompt numbers the pack and carries the strict instruction
    (final,) = server.answer_requests()
    assert "[E1] " in final["messages"][-1]["content"]
    assert "Insufficient evidence" in final["messages"][0]["content"]


def test_strict_prompt_abstains_without_evidence_and_unstrict_answers(
    script, store: FalkorDBStore, cases: list[Case]
) -> None:
    case = cases[1]
    nothing = [{"actions": [{"action": "INFER_DISEASES_BY_SYMPTOMS", "keywords": ["zqxv wplkj"]}]}]
    server = script(nothing, reply="Insufficient evidence.")
    strict = _method(server, store).answer(case)
    assert strict.evidence == [] and strict.result.choice is None
    assert strict.error.startswith("AnswerParseError: abstained")

    scored = _method(server, store, answer="score").answer(case)
    assert scored.error == "AnswerParseError: abstained: the graph returned no evidence"

    gold = case.gold.answer
    unstrict = _method(script(nothing, reply=gold), store, prompt="unstrict").answer(case)
    assert unstrict.error is None and unstrict.result.choice == gold


def test_the_non_retrieval_baseline_asks_with_the_same_unstrict_prompt_and_no_graph(
    script, store: FalkorDBStore, cases: list[Case]
) -> None:
    """The paper's baseline: the same (unstrict) instructions, no planning, no graph, no evidence."""
    case = cases[1]
    gold = case.gold.answer
    nothing = [{"actions": [{"action": "INFER_DISEASES_BY_SYMPTOMS", "keywords": ["zqxv wplkj"]}]}]
    with_graph = script(nothing, reply=gold)
    _method(with_graph, store, prompt="unstrict").answer(case)
    server = script(nothing, reply=gold)
    context = MethodContext(
        settings=Settings(),
        params={"prompt": "unstrict", "retrieval": False, "answer": "generate"},
        chat_model_factory=lambda _: scripted_model(server),
    )
    baseline = get_method("deepdoctor").build(context)
    assert baseline.store is None
    answer = baseline.answer(case)
    assert answer.error is None and answer.result.choice == gold and answer.evidence == []
    assert server.plan_requests() == [] and len(server.answer_requests()) == 1
    (asked,) = server.answer_requests()
    (retrieved,) = with_graph.answer_requests()
    assert asked["messages"][0] == retrieved["messages"][0]  # the same system prompt, the unstrict one
    with pytest.raises(InvalidInputError, match="unstrict prompt's baseline"):
        DeepDoctorConfig.from_params({"retrieval": False})


def test_the_embedded_model_runs_deepdoctor_end_to_end(graph_home: Path, cases: list[Case]) -> None:
    context = MethodContext(
        settings=Settings(home=graph_home), params={"prompt": "unstrict", "max_rounds": "2"}
    )
    method = get_method("deepdoctor").build(context)
    case = cases[2]
    answer = method.answer(case)

    assert answer.error is None and answer.result.choice in case.options
    plans = [s for s in answer.trace.steps if s.name == "deepdoctor.plan"]
    assert 1 <= len(plans) <= 2 and all("actions" in s.output or "raw" in s.output for s in plans)
    # a round that found nothing new repeats the last prompt, served from the response cache
    assert answer.usage.calls + answer.usage.cache_hits == len(plans) + 1
    method.store.close()


def _infer_then_stop(ddx_json, gold: str) -> list[dict]:
    return [
        {"actions": [{"action": "INFER_DISEASES_BY_SYMPTOMS", "keywords": ddx_symptoms(ddx_json, gold)}]},
        {"actions": []},
    ]


def test_citations_about_the_leading_diseases_join_the_pack(
    script, store: FalkorDBStore, cases: list[Case], ddx_json, data_dir: Path
) -> None:
    case = cases[0]
    gold = case.gold.answer
    offline = PubMedQAIndex.from_file(data_dir / "pubmedqa" / "test_set.json")
    server = script(_infer_then_stop(ddx_json, gold), reply=gold)
    method = _method(server, store, literature=LiteratureSearch([offline]), citations=2, cited_diseases=2)
    answer = method.answer(case)

    assert answer.error is None and answer.result.choice == gold
    (step,) = [s for s in answer.trace.steps if s.name == "deepdoctor.literature"]
    ranked = next(s for s in answer.trace.steps if s.name == "deepdoctor.action").output["ranked"]
    leaders = [row["disease"] for row in ranked[:2]]
    assert step.input["queries"] == leaders  # the inference ranking's top two, in rank order
    citations = [e for e in answer.evidence if e.kind == "citation"]
    expected = {e.id for name in leaders for e in asyncio.run(offline.search(name, 2))}
    assert citations and {e.id for e in citations} == expected
    assert all(e.id.startswith("pubmed:") and e.provenance.get("pmid") for e in citations)
    (final,) = server.answer_requests()
    assert all(e.text[:60] in final["messages"][-1]["content"] for e in citations)


def test_a_literature_outage_is_recorded_and_the_answer_still_comes(
    script, store: FalkorDBStore, cases: list[Case], ddx_json, data_dir: Path
) -> None:
    case = cases[1]
    gold = case.gold.answer
    records = json.loads((data_dir / "pubmedqa" / "test_set.json").read_text(encoding="utf-8"))
    pubmed_double = LiteratureServer(records)  # NCBI cannot be reached from CI: a loopback double
    pubmed_double.faults["esearch"] = Fault(delay_s=3.0)
    try:
        policy = HttpPolicy(timeout_s=5.0, max_retries=0, backoff_s=0.0)
        slow = PubMedSource(email="dev@example.org", base_url=pubmed_double.eutils_url, policy=policy)
        server = script(_infer_then_stop(ddx_json, gold), reply=gold)
        method = _method(server, store, literature=LiteratureSearch([slow], deadline_s=0.5))
        started = time.perf_counter()
        answer = method.answer(case)
        elapsed = time.perf_counter() - started
    finally:
        pubmed_double.close()

    assert answer.error is None and answer.result.choice == gold
    assert not [e for e in answer.evidence if e.kind == "citation"]
    (step,) = [s for s in answer.trace.steps if s.name == "deepdoctor.literature"]
    failures = [f for outcome in step.output.values() for f in outcome["failures"]]
    assert failures and {f["kind"] for f in failures} == {"deadline"}
    assert elapsed < 2.5  # the 3 s outage did not hold the answer past the 0.5 s literature deadline
