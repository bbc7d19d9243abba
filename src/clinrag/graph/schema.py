"""The disease-centred graph schema, which triples are valid, and batched upserts (UNWIND + MERGE)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice
from typing import Any

from clinrag.core.errors import InvalidInputError
from clinrag.graph.store import GraphStore


class Label(StrEnum):
    DISEASE = "Disease"
    SYMPTOM = "Symptom"
    TEST = "Test"
    DRUG = "Drug"
    CURE = "Cure"


class Relation(StrEnum):
    HAS_SYMPTOM = "HAS_SYMPTOM"
    RECOMMEND_TEST = "RECOMMEND_TEST"
    RECOMMEND_DRUG = "RECOMMEND_DRUG"
    RECOMMEND_CURE = "RECOMMEND_CURE"
    HAS_COMORBIDITY = "HAS_COMORBIDITY"


@dataclass(frozen=True)
class TripleType:
    source: Label
    relation: Relation
    target: Label

    def __str__(self) -> str:
        return f"({self.source})-[:{self.relation}]->({self.target})"


TRIPLE_TYPES: tuple[TripleType, ...] = (
    TripleType(Label.DISEASE, Relation.HAS_SYMPTOM, Label.SYMPTOM),
    TripleType(Label.DISEASE, Relation.RECOMMEND_TEST, Label.TEST),
    TripleType(Label.DISEASE, Relation.RECOMMEND_DRUG, Label.DRUG),
    TripleType(Label.DISEASE, Relation.RECOMMEND_CURE, Label.CURE),
    TripleType(Label.DISEASE, Relation.HAS_COMORBIDITY, Label.DISEASE),
)
TRIPLE_TYPE: dict[Relation, TripleType] = {t.relation: t for t in TRIPLE_TYPES}
# Comorbidity holds both ways: it is stored in whichever direction it was imported and read undirected.
SYMMETRIC: frozenset[Relation] = frozenset({Relation.HAS_COMORBIDITY})
NODE_PROPERTIES: dict[Label, tuple[str, ...]] = {
    label: ("name", "description") if label is Label.DISEASE else ("name",) for label in Label
}
MAX_NAME_CHARS = 1000


def valid_triple(source: str, relation: str, target: str) -> bool:
    """True if `(source)-[:relation]->(target)` is allowed by the schema (labels and types as strings)."""
    try:
        triple = TripleType(Label(source), Relation(relation), Label(target))
    except ValueError:
        return False
    return triple in TRIPLE_TYPES


def describe_schema() -> str:
    """The schema in a few lines, e.g. for a prompt."""
    lines = [f"{label}({', '.join(NODE_PROPERTIES[label])})" for label in Label]
    return "\n".join(lines + [str(t) for t in TRIPLE_TYPES])


def ensure_schema(store: GraphStore) -> None:
    """Unique, indexed `name` on every label (idempotent)."""
    for label in Label:
        store.ensure_unique(label.value, "name")


@dataclass(frozen=True)
class GraphCounts:
    nodes: dict[Label, int]
    relations: dict[Relation, int]

    @property
    def total_nodes(self) -> int:
        return sum(self.nodes.values())

    @property
    def total_relations(self) -> int:
        return sum(self.relations.values())


def counts(store: GraphStore) -> GraphCounts:
    nodes = {label: int(store.query(f"MATCH (n:{label}) RETURN count(n) AS c")[0]["c"]) for label in Label}
    relations = {
        t.relation: int(
            store.query(f"MATCH (:{t.source})-[r:{t.relation}]->(:{t.target}) RETURN count(r) AS c")[0]["c"]
        )
        for t in TRIPLE_TYPES
    }
    return GraphCounts(nodes, relations)


def merge_nodes(
    store: GraphStore, label: Label | str, nodes: Iterable[str | Mapping[str, Any]], batch_size: int = 500
) -> int:
    """Create the nodes not there yet, by name; returns how many were created.

    A node is a name or a mapping with `name` (and, for Disease, `description`). A given description
    replaces the stored one; a missing or null one keeps it.
    """
    label = Label(label)
    if label is Label.DISEASE:
        cypher = (
            "UNWIND $rows AS row MERGE (n:Disease {name: row.name}) "
            "SET n.description = coalesce(row.description, n.description)"
        )
    else:
        cypher = f"UNWIND $rows AS row MERGE (n:{label} {{name: row.name}})"
    created = 0
    for batch in _batches((_node_row(label, node) for node in nodes), batch_size):
        created += store.write(cypher, {"rows": batch}).nodes_created
    return created


def merge_relations(
    store: GraphStore, relation: Relation | str, pairs: Iterable[tuple[str, str]], batch_size: int = 500
) -> int:
    """MERGE `(head)-[:relation]->(tail)` and both end nodes by name; returns how many edges were created.

    Self-pairs of a Disease → Disease relation are refused: a disease is not its own comorbidity.
    """
    triple = TRIPLE_TYPE[Relation(relation)]
    cypher = (
        f"UNWIND $rows AS row MERGE (h:{triple.source} {{name: row.head}}) "
        f"MERGE (t:{triple.target} {{name: row.tail}}) MERGE (h)-[:{triple.relation}]->(t)"
    )

    def rows() -> Iterator[dict[str, str]]:
        for head, tail in pairs:
            row = {"head": _clean_name(head), "tail": _clean_name(tail)}
            if triple.source is triple.target and row["head"] == row["tail"]:
                raise InvalidInputError(f"{triple.relation} of {row['head']!r} to itself")
            yield row

    created = 0
    for batch in _batches(rows(), batch_size):
        created += store.write(cypher, {"rows": batch}).relationships_created
    return created


def remove_isolated_nodes(store: GraphStore, labels: Sequence[Label | str] | None = None) -> int:
    """Delete nodes (of `labels`, default all) that have no relation; returns how many were deleted."""
    deleted = 0
    for label in labels or list(Label):
        deleted += store.write(f"MATCH (n:{Label(label)}) WHERE NOT (n)--() DELETE n").nodes_deleted
    return deleted


def _node_row(label: Label, node: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(node, str):
        return {"name": _clean_name(node), "description": None}
    if not isinstance(node, Mapping):
        raise InvalidInputError(f"a {label} node is a name or a mapping with a name, got {node!r}")
    unknown = set(node) - set(NODE_PROPERTIES[label])
    if unknown:
        raise InvalidInputError(f"{label} nodes have no properties {sorted(unknown)}")
    description = node.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidInputError(f"description of {node.get('name')!r} is not a string")
    return {"name": _clean_name(node.get("name")), "description": description or None}


def _clean_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"a node name must be a non-empty string, got {name!r}")
    cleaned = " ".join(name.split())
    if len(cleaned) > MAX_NAME_CHARS:
        raise InvalidInputError(f"node name longer than {MAX_NAME_CHARS} characters: {cleaned[:60]}…")
    return cleaned


def _batches(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    if size < 1:
        raise ValueError("batch_size must be at least 1")
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch
