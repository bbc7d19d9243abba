"""`open_graph`: the graph store a URI names, or clinrag's own FalkorDB server when there is none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clinrag.core.errors import ConfigError, GraphUnavailableError
from clinrag.core.files import os_reason, private_dir
from clinrag.graph.store import GraphStore

FALKORDB_SCHEMES = ("redis", "rediss", "falkor", "falkors", "unix")
NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def open_graph(
    uri: str | None = None,
    data_dir: str | Path | None = None,
    *,
    graph: str = "clinrag",
    **options: Any,
) -> GraphStore:
    """Open a graph store.

    - no `uri`: start (or join) the packaged FalkorDB server on `data_dir` (`settings.graph_data_dir`);
    - `redis://`, `falkor://`, `unix://` (and TLS variants): a running FalkorDB server, graph `graph`;
    - `bolt://`, `neo4j://` (and TLS variants): a Neo4j server; credentials may sit in the URI.

    `options` go to the backend (e.g. `auth=`, `database=` for Neo4j, `start_timeout_s=` for the server).
    """
    if not uri:
        from clinrag.graph.falkordb_store import FalkorDBStore

        if data_dir is None:
            raise ConfigError("clinrag's own graph server needs a data directory (settings.graph_data_dir)")
        try:
            return FalkorDBStore.embedded(private_dir(data_dir), graph, **options)
        except OSError as exc:  # a data directory that cannot be created or written (an unwritable home)
            raise GraphUnavailableError(
                f"cannot start clinrag's graph server on {data_dir}: {os_reason(exc)}"
            ) from exc
    try:
        scheme = graph_scheme(uri)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if scheme in FALKORDB_SCHEMES:
        from clinrag.graph.falkordb_store import FalkorDBStore

        return FalkorDBStore(uri, graph, **options)
    from clinrag.graph.neo4j_store import Neo4jStore

    return Neo4jStore(uri, **options)


def graph_scheme(uri: str) -> str:
    """The scheme of a graph URI, lower case; `ValueError` when no store speaks it."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    supported = FALKORDB_SCHEMES + NEO4J_SCHEMES
    if scheme not in supported:
        schemes = ", ".join(s + "://" for s in supported)
        raise ValueError(
            f"unsupported graph URI {uri!r}: use one of {schemes}, or none for the packaged server"
        )
    return scheme
