"""The GraphStore contract on FalkorDB: rows, write statistics, read-only reads, typed errors, parameters."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from clinrag.core.errors import GraphUnavailableError, InvalidInputError
from clinrag.graph.factory import open_graph
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.store import WriteStats, redact

ODD_NAMES = [
    '"}) DETACH DELETE n //',
    "'}) MATCH (m) DETACH DELETE m RETURN 1 //",
    'back\\slash \\" and quote"',
    "line\nbreak\ttab",
    "Guillain-Barré · 格林-巴利综合征 ☃",
    "$names",
]


@pytest.fixture
def graph(store: FalkorDBStore) -> Iterator[FalkorDBStore]:
    assert store.server is not None and store.server.url is not None
    with open_graph(store.server.url, graph=f"store_{uuid.uuid4().hex[:8]}") as opened:
        assert isinstance(opened, FalkorDBStore) and opened.server is None
        yield opened
        opened.write("MATCH (n) DETACH DELETE n")


def test_rows_and_write_stats(graph: FalkorDBStore) -> None:
    stats = graph.write(
        "UNWIND $rows AS r MERGE (d:Disease {name: r.d}) MERGE (s:Symptom {name: r.s}) "
        "MERGE (d)-[:HAS_SYMPTOM]->(s)",
        {"rows": [{"d": "Croup", "s": "stridor"}, {"d": "Croup", "s": "fever"}, {"d": "Flu", "s": "fever"}]},
    )
    assert stats == WriteStats(nodes_created=4, relationships_created=3, properties_set=4)
    rows = graph.query(
        "MATCH (d:Disease)-[r]->(s:Symptom) RETURN d.name AS disease, type(r) AS rel, collect(s.name) AS s "
        "ORDER BY disease"
    )
    assert [(r["disease"], r["rel"], sorted(r["s"])) for r in rows] == [
        ("Croup", "HAS_SYMPTOM", ["fever", "stridor"]),
        ("Flu", "HAS_SYMPTOM", ["fever"]),
    ]
    assert graph.query("MATCH (d:Disease {name: $n}) RETURN d.name AS n", {"n": "Measles"}) == []
    deleted = graph.write("MATCH (d:Disease {name: $n}) DETACH DELETE d", {"n": "Flu"})
    assert deleted.nodes_deleted == 1 and deleted.relationships_deleted == 1


def test_reads_cannot_write(graph: FalkorDBStore) -> None:
    with pytest.raises(InvalidInputError, match="read-only"):
        graph.query("CREATE (:Disease {name: $n})", {"n": "Croup"})
    assert graph.query("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


def test_rejected_queries_are_typed_errors(graph: FalkorDBStore) -> None:
    with pytest.raises(InvalidInputError, match="rejected"):
        graph.query("MATCH (n RETURN n")
    with pytest.raises(InvalidInputError, match="rejected"):
        graph.write("MERGE (n:Disease {name: $missing})")
    with pytest.raises(TypeError):
        graph.query("RETURN 1", [("x", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_parameters_are_values_never_cypher(graph: FalkorDBStore, name: str) -> None:
    graph.write("MERGE (:Symptom {name: $keep})", {"keep": "cough"})
    assert graph.write("MERGE (:Symptom {name: $name})", {"name": name}).nodes_created == 1
    rows = graph.query("MATCH (s:Symptom) WHERE s.name = $name RETURN s.name AS name", {"name": name})
    assert rows == [{"name": name}]
    everything = graph.query("MATCH (s:Symptom) RETURN s.name AS name ORDER BY name")
    assert sorted(r["name"] for r in everything) == sorted(["cough", name])


def test_ensure_unique_is_idempotent_and_reports_existing_duplicates(graph: FalkorDBStore) -> None:
    graph.write("CREATE (:Drug {name: $n}), (:Drug {name: $n})", {"n": "aspirin"})
    with pytest.raises(InvalidInputError, match="sharing a name"):
        graph.ensure_unique("Drug", "name")
    graph.write("MATCH (d:Drug) WITH d LIMIT 1 DELETE d")
    graph.ensure_unique("Drug", "name")  # the failed constraint was dropped, so it builds now
    graph.ensure_unique("Drug", "name")
    with pytest.raises(InvalidInputError, match="unique constraint"):
        graph.write("CREATE (:Drug {name: $n})", {"n": "aspirin"})
    with pytest.raises(ValueError, match="identifier"):
        graph.ensure_unique("Drug) DETACH DELETE (n", "name")


def test_unreachable_urls_and_redaction() -> None:
    with pytest.raises(GraphUnavailableError, match=r"redis://:\*\*\*@127\.0\.0\.1:1"):
        open_graph("redis://:secret@127.0.0.1:1")
    with pytest.raises(GraphUnavailableError, match="not reachable"):
        open_graph("falkor://127.0.0.1:1")
    assert redact("bolt://neo4j:pw@host:7687") == "bolt://neo4j:***@host:7687"
    assert redact("redis://127.0.0.1:6379") == "redis://127.0.0.1:6379"
