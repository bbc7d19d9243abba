"""Schema, valid triples, batched upserts and counts on a live FalkorDB server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.schema import (
    TRIPLE_TYPES,
    Label,
    Relation,
    counts,
    describe_schema,
    ensure_schema,
    merge_nodes,
    merge_relations,
    remove_isolated_nodes,
    valid_triple,
)
from tests.graph.conftest import DdxGraph, load_ddx_graph


@pytest.fixture
def scratch(store: FalkorDBStore) -> Iterator[FalkorDBStore]:
    """A throwaway graph on the module's server, with the schema."""
    assert store.server is not None and store.server.url is not None
    graph = FalkorDBStore(store.server.url, f"scratch_{uuid.uuid4().hex[:8]}")
    ensure_schema(graph)
    yield graph
    graph.write("MATCH (n) DETACH DELETE n")
    graph.close()


def test_valid_triples() -> None:
    assert valid_triple("Disease", "HAS_SYMPTOM", "Symptom")
    assert valid_triple(Label.DISEASE, Relation.HAS_COMORBIDITY, Label.DISEASE)
    assert valid_triple("Disease", "RECOMMEND_CURE", "Cure")
    assert not valid_triple("Symptom", "HAS_SYMPTOM", "Disease")  # wrong direction
    assert not valid_triple("Disease", "RECOMMEND_DRUG", "Test")  # wrong target
    assert not valid_triple("Disease", "TREATS", "Drug")  # unknown relation
    assert not valid_triple("disease", "HAS_SYMPTOM", "Symptom")  # labels are case-sensitive, as in Cypher
    allowed = {(s, r, t) for s in Label for r in Relation for t in Label if valid_triple(s, r, t)}
    assert allowed == {(t.source, t.relation, t.target) for t in TRIPLE_TYPES} and len(allowed) == 5
    assert "(Disease)-[:HAS_SYMPTOM]->(Symptom)" in describe_schema()


def test_ddxplus_graph_counts_match_the_json(ddx_store: FalkorDBStore, ddx: DdxGraph) -> None:
    found = counts(ddx_store)
    assert found.nodes == {label: len(ddx.node_names(label)) for label in Label}
    assert found.relations == {r: len(edges) for r, edges in ddx.stored_edges.items()}
    assert found.nodes[Label.DISEASE] == 49 and found.relations[Relation.HAS_SYMPTOM] > 500


def test_merging_twice_does_not_duplicate(ddx_store: FalkorDBStore, ddx: DdxGraph) -> None:
    before = counts(ddx_store)
    load_ddx_graph(ddx_store, ddx, batch_size=37)
    assert counts(ddx_store) == before
    assert (
        merge_nodes(
            ddx_store, Label.SYMPTOM, [" Do you have a fever (either felt or measured with a thermometer)?"]
        )
        == 0
    )
    assert (
        merge_relations(ddx_store, Relation.HAS_COMORBIDITY, [ddx.stored_edges[Relation.HAS_COMORBIDITY][0]])
        == 0
    )
    assert counts(ddx_store) == before


def test_uniqueness_is_enforced_by_the_server(ddx_store: FalkorDBStore) -> None:
    with pytest.raises(InvalidInputError, match="unique constraint"):
        ddx_store.write("CREATE (:Disease {name: $name})", {"name": "Pneumonia"})
    rows = ddx_store.query("CALL db.constraints() YIELD type, label, properties, status RETURN *")
    assert {(r["label"], r["status"]) for r in rows if r["type"] == "UNIQUE"} == {
        (label.value, "OPERATIONAL") for label in Label
    }
    ensure_schema(ddx_store)  # idempotent


def test_merge_nodes_descriptions_and_names(scratch: FalkorDBStore) -> None:
    assert (
        merge_nodes(scratch, "Disease", [{"name": "  Croup ", "description": "viral laryngotracheitis"}]) == 1
    )
    assert merge_nodes(scratch, Label.DISEASE, ["Croup", {"name": "Croup", "description": None}]) == 0
    rows = scratch.query("MATCH (d:Disease) RETURN d.name AS name, d.description AS description")
    assert rows == [{"name": "Croup", "description": "viral laryngotracheitis"}]  # kept, name cleaned
    merge_nodes(scratch, Label.DISEASE, [{"name": "Croup", "description": "barking cough"}])
    assert scratch.query("MATCH (d:Disease) RETURN d.description AS d") == [{"d": "barking cough"}]
    for bad in ["", "   ", {"name": "X", "severity": 2}, {"name": "X", "description": 3}, 7]:
        with pytest.raises(InvalidInputError):
            merge_nodes(scratch, Label.DISEASE, [bad])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="no properties"):
        merge_nodes(scratch, Label.DRUG, [{"name": "aspirin", "description": "x"}])
    with pytest.raises(ValueError):
        merge_nodes(scratch, "Pathogen", ["x"])


def test_merge_relations_creates_end_nodes_and_refuses_self_comorbidity(scratch: FalkorDBStore) -> None:
    pairs = [("Croup", "stridor"), ("Croup", "barking cough"), ("Bronchiolitis", "stridor")]
    assert merge_relations(scratch, Relation.HAS_SYMPTOM, pairs, batch_size=2) == 3
    assert merge_relations(scratch, "HAS_SYMPTOM", pairs) == 0
    found = counts(scratch)
    assert found.nodes[Label.DISEASE] == 2 and found.nodes[Label.SYMPTOM] == 2
    assert found.relations[Relation.HAS_SYMPTOM] == 3 and found.total_relations == 3
    with pytest.raises(InvalidInputError, match="itself"):
        merge_relations(scratch, Relation.HAS_COMORBIDITY, [("Croup", " Croup")])
    with pytest.raises(ValueError):
        merge_relations(scratch, "CAUSES", [("a", "b")])


def test_remove_isolated_nodes(scratch: FalkorDBStore) -> None:
    merge_relations(scratch, Relation.RECOMMEND_TEST, [("Pulmonary embolism", "CT pulmonary angiography")])
    merge_nodes(scratch, Label.TEST, ["D-dimer", "Spirometry"])
    merge_nodes(scratch, Label.DISEASE, ["Ebola"])
    assert remove_isolated_nodes(scratch, [Label.TEST]) == 2
    assert counts(scratch).nodes[Label.DISEASE] == 2
    assert remove_isolated_nodes(scratch) == 1
    found = counts(scratch)
    assert found.nodes == {**dict.fromkeys(Label, 0), Label.DISEASE: 1, Label.TEST: 1}
    assert found.relations[Relation.RECOMMEND_TEST] == 1
