"""Disease knowledge graph: store contract and backends, schema, matching, and the 10 fixed actions."""

from clinrag.graph.actions import Action, ActionRequest, ActionResult, parse_request, run_action
from clinrag.graph.factory import open_graph
from clinrag.graph.matching import KeywordMatch, NodeMatcher
from clinrag.graph.schema import (
    Label,
    Relation,
    counts,
    ensure_schema,
    merge_nodes,
    merge_relations,
    remove_isolated_nodes,
    valid_triple,
)
from clinrag.graph.store import GraphStore, WriteStats

__all__ = [
    "Action",
    "ActionRequest",
    "ActionResult",
    "GraphStore",
    "KeywordMatch",
    "Label",
    "NodeMatcher",
    "Relation",
    "WriteStats",
    "counts",
    "ensure_schema",
    "merge_nodes",
    "merge_relations",
    "open_graph",
    "parse_request",
    "remove_isolated_nodes",
    "run_action",
    "valid_triple",
]
