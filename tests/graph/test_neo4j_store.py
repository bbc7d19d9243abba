"""The Neo4j backend: same contract, same Cypher templates.

Live tests need a Neo4j server: set CLINRAG_GRAPH_URI=bolt://user:password@host:7687 (and optionally
CLINRAG_GRAPH_DATABASE). They create unique constraints and DELETE every Disease, Symptom, Test, Drug and
Cure node of that database, so point them at a throwaway one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from clinrag.core.errors import ConfigError, GraphUnavailableError, InvalidInputError
from clinrag.graph.actions import SPECS, Action, ActionRequest, Triple, run_action
from clinrag.graph.factory import open_graph
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.neo4j_store import Neo4jStore
from clinrag.graph.schema import Label, Relation, counts, ensure_schema, merge_nodes, merge_relations
from tests.graph.conftest import DdxGraph

# Read at import: the autouse isolated_home fixture clears CLINRAG_* variables before each test.
NEO4J_URI = os.environ.get("CLINRAG_GRAPH_URI", "")
NEO4J_DATABASE = os.environ.get("CLINRAG_GRAPH_DATABASE") or None
live = pytest.mark.skipif(
    not NEO4J_URI.startswith(("bolt", "neo4j")), reason="no Neo4j server (set CLINRAG_GRAPH_URI=bolt://…)"
)
DISEASES = 12
WIPE = "MATCH (n) WHERE n:Disease OR n:Symptom OR n:Test OR n:Drug OR n:Cure DETACH DELETE n"


def test_unreachable_server_is_a_typed_error() -> None:
    with pytest.raises(GraphUnavailableError, match=r"bolt://127\.0\.0\.1:1 is not reachable"):
        open_graph("bolt://neo4j:secret@127.0.0.1:1")
    with pytest.raises(ConfigError):
        open_graph("neo4j://127.0.0.1:notaport")


@pytest.fixture(scope="module")
def neo4j_store(ddx: DdxGraph) -> Iterator[Neo4jStore]:
    store = open_graph(NEO4J_URI, database=NEO4J_DATABASE)
    assert isinstance(store, Neo4jStore)
    store.write(WIPE)
    ensure_schema(store)
    chosen = set(sorted(ddx.descriptions)[:DISEASES])
    merge_nodes(store, Label.DISEASE, [{"name": n, "description": ddx.descriptions[n]} for n in chosen])
    for relation, edges in ddx.stored_edges.items():
        merge_relations(store, relation, [(h, t) for h, t in edges if h in chosen])
    yield store
    store.write(WIPE)
    store.close()


def _subset(ddx: DdxGraph) -> DdxGraph:
    """The expected graph for the loaded subset: edges whose stored head is one of the chosen diseases."""
    chosen = set(sorted(ddx.descriptions)[:DISEASES])
    neighbours: dict[Relation, dict[str, set[str]]] = {r: {} for r in Relation}
    descriptions = {n: ddx.descriptions[n] for n in chosen}
    for relation, edges in ddx.stored_edges.items():
        for head, tail in edges:
            if head in chosen:
                neighbours[relation].setdefault(head, set()).add(tail)
                if relation is Relation.HAS_COMORBIDITY:
                    neighbours[relation].setdefault(tail, set()).add(head)
                    descriptions.setdefault(tail, ddx.descriptions[tail])
    return DdxGraph(descriptions, neighbours)


@live
def test_contract_and_uniqueness(neo4j_store: Neo4jStore, ddx: DdxGraph) -> None:
    sub = _subset(ddx)
    found = counts(neo4j_store)
    assert found.nodes[Label.SYMPTOM] == len(sub.node_names(Label.SYMPTOM))
    with pytest.raises(InvalidInputError):
        neo4j_store.write("CREATE (:Disease {name: $n})", {"n": sorted(sub.descriptions)[0]})
    with pytest.raises(InvalidInputError):
        neo4j_store.query("CREATE (:Disease {name: $n})", {"n": "read-only"})
    ensure_schema(neo4j_store)
    assert counts(neo4j_store) == found


@live
@pytest.mark.parametrize("action", list(Action))
def test_actions_match_the_json(action: Action, neo4j_store: Neo4jStore, ddx: DdxGraph) -> None:
    sub = _subset(ddx)
    spec = SPECS[action]
    matcher = NodeMatcher(neo4j_store)
    chosen = sorted(ddx.descriptions)[:DISEASES]
    if not spec.inverse:
        for disease in chosen:
            result = run_action(
                neo4j_store, ActionRequest(action=action, keywords=[disease], top_k_items=50), matcher
            )
            expected = sorted(sub.items(spec.relation, disease))
            assert result.triples == tuple(Triple(disease, spec.relation, x) for x in expected)
        return
    with_items = sorted(d for d in sub.descriptions if sub.items(spec.relation, d))
    keywords = set(sorted(sub.items(spec.relation, with_items[0]))[:3])
    keywords |= set(sorted(sub.items(spec.relation, with_items[-1]))[:2])
    result = run_action(neo4j_store, ActionRequest(action=action, keywords=sorted(keywords)), matcher)
    assert [(r.name, r.match_count, list(r.matched)) for r in result.ranked] == sub.expected_ranking(
        spec.relation, keywords
    )
