"""GraphStore on FalkorDB: a server at a URL, or the packaged one that clinrag starts itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import redis
from falkordb import FalkorDB

from clinrag.core.errors import GraphUnavailableError, InvalidInputError
from clinrag.graph.falkordb_server import FalkorDBServer
from clinrag.graph.store import GraphStore, Row, WriteStats, check_identifier, check_params, redact

DEFAULT_GRAPH = "clinrag"
_CONSTRAINT_WAIT_S = 30.0
T = TypeVar("T")


class FalkorDBStore(GraphStore):
    """One named graph on a FalkorDB server. Reads go through GRAPH.RO_QUERY, so they cannot write."""

    backend = "falkordb"

    def __init__(
        self,
        url: str,
        graph: str = DEFAULT_GRAPH,
        *,
        server: FalkorDBServer | None = None,
        query_timeout_ms: int = 60_000,
        socket_timeout_s: float = 120.0,
    ) -> None:
        self.url = redact(url)
        self.server = server
        self.query_timeout_ms = query_timeout_ms
        self.socket_timeout_s = socket_timeout_s
        self.graph_name = graph
        self.restarted = False
        self._connections = 0  # connections replaced after a restart: a call notes it when it begins
        self._restart_lock = threading.Lock()
        self._connect(url)

    def _connect(self, url: str) -> None:
        try:
            self._db = FalkorDB.from_url(
                url, socket_timeout=self.socket_timeout_s, socket_connect_timeout=5.0
            )
            self._db.connection.ping()
        except (redis.RedisError, OSError, ValueError) as exc:
            raise GraphUnavailableError(f"FalkorDB at {self.url} is not reachable: {exc}") from exc
        self._graph = self._db.select_graph(self.graph_name)

    @classmethod
    def embedded(
        cls, data_dir: str | Path, graph: str = DEFAULT_GRAPH, **server_options: Any
    ) -> FalkorDBStore:
        """Start (or join) clinrag's own FalkorDB server on `data_dir` and open `graph` on it."""
        server = FalkorDBServer(data_dir, **server_options)
        url = server.acquire()
        try:
            return cls(url, graph, server=server)
        except BaseException:
            server.release()
            raise

    def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        values = check_params(params)

        def read() -> Any:
            try:
                return self._graph.ro_query(cypher, values, timeout=self.query_timeout_ms)
            except redis.ResponseError as exc:
                if "empty key" not in str(exc):
                    raise
                # RO_QUERY on a graph that does not exist yet fails; create it empty and ask again.
                self._graph.query("RETURN 0")
                return self._graph.ro_query(cypher, values, timeout=self.query_timeout_ms)

        try:
            result = self._reconnecting(read)
        except redis.ResponseError as exc:
            raise InvalidInputError(f"FalkorDB rejected the query: {exc}") from exc
        except (redis.RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        names = [str(column[1]) for column in result.header]
        return [dict(zip(names, row, strict=True)) for row in result.result_set]

    def write(self, cypher: str, params: Mapping[str, Any] | None = None) -> WriteStats:
        values = check_params(params)
        try:
            # every write clinrag makes is a MERGE, so writing again after a restart is harmless
            result = self._reconnecting(
                lambda: self._graph.query(cypher, values, timeout=self.query_timeout_ms)
            )
        except redis.ResponseError as exc:
            raise InvalidInputError(f"FalkorDB rejected the query: {exc}") from exc
        except (redis.RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        return WriteStats(
            nodes_created=int(result.nodes_created),
            nodes_deleted=int(result.nodes_deleted),
            relationships_created=int(result.relationships_created),
            relationships_deleted=int(result.relationships_deleted),
            properties_set=int(result.properties_set),
        )

    def ensure_unique(self, label: str, prop: str) -> None:
        # FalkorDB refuses a unique constraint without an exact-match index on the property, has no
        # IF NOT EXISTS, and builds constraints asynchronously (PENDING, then OPERATIONAL or FAILED).
        check_identifier(label)
        check_identifier(prop)
        try:
            self._graph.query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
        except redis.ResponseError as exc:
            if "already indexed" not in str(exc):
                raise InvalidInputError(f"FalkorDB could not index {label}.{prop}: {exc}") from exc
        except (redis.RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        command = ["GRAPH.CONSTRAINT", "CREATE", self.graph_name, "UNIQUE", "NODE", label]
        try:
            self._db.connection.execute_command(*command, "PROPERTIES", 1, prop)
        except redis.ResponseError as exc:
            if "already exists" not in str(exc):
                raise InvalidInputError(f"FalkorDB refused unique {label}.{prop}: {exc}") from exc
        except (redis.RedisError, OSError) as exc:
            raise self._unavailable(exc) from exc
        self._await_constraint(label, prop)

    def _await_constraint(self, label: str, prop: str) -> None:
        deadline = time.monotonic() + _CONSTRAINT_WAIT_S
        while True:
            rows = self.query("CALL db.constraints() YIELD type, label, properties, status RETURN *")
            status = next(
                (
                    r["status"]
                    for r in rows
                    if r["type"] == "UNIQUE" and r["label"] == label and r["properties"] == [prop]
                ),
                None,
            )
            if status == "OPERATIONAL":
                return
            if status == "FAILED":
                # dropped so that a retry after removing the duplicates can build it again
                drop = ["GRAPH.CONSTRAINT", "DROP", self.graph_name, "UNIQUE", "NODE", label]
                self._db.connection.execute_command(*drop, "PROPERTIES", 1, prop)
                raise InvalidInputError(
                    f"unique {label}.{prop} failed: the graph already holds {label} nodes sharing a {prop}"
                )
            if time.monotonic() > deadline:
                raise GraphUnavailableError(
                    f"unique {label}.{prop} still {status} after {_CONSTRAINT_WAIT_S} s"
                )
            time.sleep(0.02)

    def _reconnecting(self, call: Callable[[], T]) -> T:
        """`call()`; if clinrag's own server has died, restart it once per store and call again. The calls in
        flight when it died all fail: the first restarts it, the others call again on the new connection."""
        began = self._connections
        try:
            return call()
        except redis.ResponseError:
            raise
        except (redis.ConnectionError, OSError):
            if self.server is None or not self._reconnected(began, self.server):
                raise
        return call()

    def _reconnected(self, began: int, server: FalkorDBServer) -> bool:
        """True if the store now has a connection newer than the one a failed call `began` on: made by an
        earlier call's restart, or by restarting the dead server now (once per store; a server that is running
        did not die, and is not restarted)."""
        with self._restart_lock:
            if self._connections != began:
                return True
            if self.restarted or server.running():
                return False
            self.restarted = True
            # The old client is not closed: calls in flight on it in other threads fail on their own (the
            # server is gone) rather than on a socket closed under them; it is closed when they let it go.
            self._connect(server.restart())
            self._connections += 1
            return True

    def close(self) -> None:
        try:
            self._db.close()
        finally:
            if self.server is not None:
                self.server.release()
                self.server = None

    def _unavailable(self, exc: BaseException) -> GraphUnavailableError:
        message = f"FalkorDB at {self.url} is not reachable ({exc})"
        server = self.server
        if server is not None and self.restarted and not server.running():
            message += (
                f"; clinrag's own server has stopped again after one restart: see its log {server.log_path}"
            )
        return GraphUnavailableError(message)
