"""The planner loop on the live DDXPlus graph, with plans served over real HTTP.

A loopback server scripted with plans stands in for a model server: the embedded model cannot be made to
plan an unknown action, repeat itself or write broken JSON on demand. What the graph returns is checked
against the DDXPlus JSON (the `ddx` fixture)."""

from __future__ import annotations

import asyncio
import json

import pytest

from clinrag.core.models import Trace
from clinrag.graph.actions import Action, Triple
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.planner import GraphPlanner, PlannerConfig
from clinrag.graph.schema import GraphCounts, Relation, counts
from tests.graph.conftest import DdxGraph
from tests.openai_server import LoopbackServer, chat_body, scripted_model

QUESTION = "A 30-year-old has a cough and fever. What is the diagnosis?"


class PlanServer(LoopbackServer):
    """Reply i is `plans[i]` (a dict dumped as JSON, or a raw string); the last one repeats."""

    def __init__(self, plans: list[dict | str]) -> None:
        self.plans = plans
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        plan = self.plans[min(len(self.requests) - 1, len(self.plans) - 1)]
        return 200, chat_body(plan if isinstance(plan, str) else json.dumps(plan)), 0.0

    def prompts(self) -> list[str]:
        return [r["messages"][-1]["content"] for r in self.requests]


@pytest.fixture
def plan_server():
    servers: list[PlanServer] = []

    def make(plans: list[dict | str]) -> PlanServer:
        servers.append(PlanServer(plans))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def _plan(server: PlanServer, store: FalkorDBStore, **config):
    model = scripted_model(server)
    planner = GraphPlanner(model, store, NodeMatcher(store), PlannerConfig(**config))
    trace = Trace()
    return asyncio.run(planner.run(QUESTION, trace)), trace


def _steps(trace: Trace, name: str):
    return [s for s in trace.steps if s.name == name]


def test_planner_runs_valid_actions_rejects_unknown_ones_and_stops_on_an_empty_plan(
    plan_server, ddx_store: FalkorDBStore, ddx: DdxGraph
) -> None:
    disease = sorted(ddx.descriptions)[0]
    symptoms = sorted(ddx.items(Relation.HAS_SYMPTOM, disease))[:2]
    before: GraphCounts = counts(ddx_store)
    server = plan_server(
        [
            {"actions": [{"action": "INFER_DISEASES_BY_SYMPTOMS", "keywords": symptoms}]},
            {
                "actions": [
                    {"action": "DROP_ALL_NODES", "keywords": [disease]},
                    {"action": "get_symptoms", "keywords": [disease]},
                ]
            },
            {"actions": []},
        ]
    )
    run, trace = _plan(server, ddx_store)

    assert (run.rounds, run.stop_reason, run.usage.calls) == (3, "empty plan", 3)
    ranking = ddx.expected_ranking(Relation.HAS_SYMPTOM, set(symptoms))
    ((action, ranked),) = run.state.rankings
    assert action is Action.INFER_DISEASES_BY_SYMPTOMS
    assert [(d.name, d.match_count, list(d.matched)) for d in ranked] == ranking
    own = {Triple(disease, Relation.HAS_SYMPTOM, s) for s in ddx.items(Relation.HAS_SYMPTOM, disease)}
    inferred = {Triple(name, Relation.HAS_SYMPTOM, s) for name, _, matched in ranking for s in matched}
    assert set(run.state.triples) == own | inferred
    assert run.state.descriptions[disease] == ddx.descriptions[disease]

    rejected = _steps(trace, "deepdoctor.validate")[1].output["rejected"]
    assert [r["action"] for r in rejected] == ["DROP_ALL_NODES"] and "action" in rejected[0]["error"]
    assert [s.input["action"] for s in _steps(trace, "deepdoctor.action")] == [
        "INFER_DISEASES_BY_SYMPTOMS",
        "GET_SYMPTOMS",
    ]
    # each round's planner sees what the earlier rounds found
    first, second, third = server.prompts()
    assert "(nothing yet)" in first and f"{ranking[0][0]} ({ranking[0][1]}:" in second
    assert f"({disease}) -[HAS_SYMPTOM]->" in third
    # the schema sent to the model allows only the 10 actions
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert len(schema["properties"]["actions"]["items"]["properties"]["action"]["enum"]) == 10
    assert counts(ddx_store) == before


def test_planner_stops_when_a_plan_repeats_what_was_run(plan_server, ddx_store, ddx) -> None:
    disease = sorted(ddx.descriptions)[1]
    server = plan_server([{"actions": [{"action": "GET_SYMPTOMS", "keywords": [disease]}]}])
    run, trace = _plan(server, ddx_store, max_rounds=5)

    assert (run.rounds, run.stop_reason) == (2, "nothing new to run")
    assert len(_steps(trace, "deepdoctor.action")) == 1
    assert _steps(trace, "deepdoctor.validate")[1].output["repeated"] == [
        {"action": "GET_SYMPTOMS", "keywords": [disease]}
    ]


def test_the_planner_samples_at_its_configured_temperature(plan_server, ddx_store) -> None:
    server = plan_server(["not a plan"])
    _plan(server, ddx_store)
    _plan(server, ddx_store, temperature=0.8)
    assert [request["temperature"] for request in server.requests] == [0.0, 0.8]


def test_planner_records_an_unparsable_plan_and_stops(plan_server, ddx_store) -> None:
    run, trace = _plan(plan_server(["I would look up the symptoms of pneumonia."]), ddx_store)

    assert (run.rounds, run.stop_reason, run.state.triples) == (1, "invalid plan", {})
    (step,) = _steps(trace, "deepdoctor.plan")
    assert step.output["raw"].startswith("I would look up") and step.output["error"]


def test_planner_stops_after_max_rounds_and_an_injection_keyword_matches_nothing(
    plan_server, ddx_store, ddx
) -> None:
    diseases = sorted(ddx.descriptions)
    before = counts(ddx_store)
    plans = [
        {"actions": [{"action": "GET_TESTS", "keywords": [name, '"}) DETACH DELETE n //']}]}
        for name in diseases[:3]
    ]
    run, trace = _plan(plan_server(plans), ddx_store, max_rounds=2)

    assert (run.rounds, run.stop_reason, run.usage.calls) == (2, "max rounds", 2)
    matches = [m for step in _steps(trace, "deepdoctor.action") for m in step.output["matches"]]
    assert [m["node"] for m in matches] == [diseases[0], None, diseases[1], None]
    assert counts(ddx_store) == before
