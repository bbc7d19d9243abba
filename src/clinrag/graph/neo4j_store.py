"""GraphStore on a Neo4j server (bolt:// or neo4j:// URI) through the official driver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import neo4j
from neo4j import exceptions as neo4j_errors

from clinrag.core.errors import ConfigError, GraphUnavailableError, InvalidInputError
from clinrag.graph.store import GraphStore, Row, WriteStats, check_identifier, check_params

_UNAVAILABLE = (
    neo4j_errors.ServiceUnavailable,
    neo4j_errors.SessionExpired,
    neo4j_errors.DriverError,
    OSError,
)


class Neo4jStore(GraphStore):
    """Reads run in READ transactions (Neo4j refuses writes there), writes in WRITE transactions."""

    backend = "neo4j"

    def __init__(
        self,
        uri: str,
        *,
        auth: tuple[str, str] | None = None,
        database: str | None = None,
        connection_timeout_s: float = 10.0,
    ) -> None:
        parts = urlsplit(uri)
        if parts.username is not None:  # credentials in the URI: bolt://user:password@host:7687
            auth = auth or (unquote(parts.username), unquote(parts.password or ""))
            netloc = parts.hostname or ""
            netloc += f":{parts.port}" if parts.port else ""
            uri = urlunsplit(parts._replace(netloc=netloc))
        self.uri = uri
        self.database = database
        try:
            self._driver = neo4j.GraphDatabase.driver(uri, auth=auth, connection_timeout=connection_timeout_s)
            self._driver.verify_connectivity()
        except neo4j_errors.AuthError as exc:
            raise ConfigError(f"Neo4j at {uri} refused the credentials: {exc}") from exc
        except neo4j_errors.ConfigurationError as exc:
            raise ConfigError(f"invalid Neo4j configuration for {uri}: {exc}") from exc
        except ValueError as exc:
            raise ConfigError(f"invalid Neo4j URI {uri}: {exc}") from exc
        except _UNAVAILABLE as exc:
            raise GraphUnavailableError(f"Neo4j at {uri} is not reachable: {exc}") from exc

    def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        records, _, _ = self._run(cypher, params, neo4j.RoutingControl.READ)
        return [record.data() for record in records]

    def write(self, cypher: str, params: Mapping[str, Any] | None = None) -> WriteStats:
        _, summary, _ = self._run(cypher, params, neo4j.RoutingControl.WRITE)
        c = summary.counters
        return WriteStats(
            nodes_created=c.nodes_created,
            nodes_deleted=c.nodes_deleted,
            relationships_created=c.relationships_created,
            relationships_deleted=c.relationships_deleted,
            properties_set=c.properties_set,
        )

    def ensure_unique(self, label: str, prop: str) -> None:
        # Neo4j backs a uniqueness constraint with its own index, and knows IF NOT EXISTS.
        check_identifier(label)
        check_identifier(prop)
        self._run(
            f"CREATE CONSTRAINT clinrag_{label}_{prop}_unique IF NOT EXISTS "
            f"FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE",
            None,
            neo4j.RoutingControl.WRITE,
        )

    def close(self) -> None:
        self._driver.close()

    def _run(
        self, cypher: str, params: Mapping[str, Any] | None, routing: neo4j.RoutingControl
    ) -> neo4j.EagerResult:
        try:
            return self._driver.execute_query(
                cypher, check_params(params), routing_=routing, database_=self.database
            )
        except neo4j_errors.Neo4jError as exc:
            if isinstance(exc, neo4j_errors.TransientError):
                raise GraphUnavailableError(f"Neo4j at {self.uri} failed transiently: {exc}") from exc
            raise InvalidInputError(f"Neo4j rejected the query: {exc}") from exc
        except _UNAVAILABLE as exc:
            raise GraphUnavailableError(f"Neo4j at {self.uri} is not reachable: {exc}") from exc
