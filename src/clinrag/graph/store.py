"""The graph store contract: parameterised Cypher in, plain rows out, whatever the server.

Values always travel as parameters (`$name`), never spliced into the query text. Only labels and relation
types, which Cypher cannot parameterise, are written into query text, and only from the schema enums.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from clinrag.core.settings import redact_url as redact  # noqa: F401  (re-exported: URLs in messages)

Row = dict[str, Any]
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class WriteStats:
    """What a write changed, as the server counted it."""

    nodes_created: int = 0
    nodes_deleted: int = 0
    relationships_created: int = 0
    relationships_deleted: int = 0
    properties_set: int = 0


class GraphStore(ABC):
    """A graph database reachable by Cypher. Subclasses: FalkorDB (default), Neo4j."""

    backend: str = ""

    @abstractmethod
    def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Run a read-only query; one dict per row, keyed by the RETURN names. Writes are refused."""

    @abstractmethod
    def write(self, cypher: str, params: Mapping[str, Any] | None = None) -> WriteStats:
        """Run a query that may change the graph."""

    @abstractmethod
    def ensure_unique(self, label: str, prop: str) -> None:
        """Index `label.prop` and make it unique; idempotent. Syntax differs per backend, hence here."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection (and, for a server clinrag started, its share of that server)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def check_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise TypeError(f"Cypher parameters must be a mapping, got {type(params).__name__}")
    return dict(params)


def check_identifier(name: str) -> str:
    """A label, relation type or property name that may be written into query text."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a plain Cypher identifier: {name!r}")
    return name
