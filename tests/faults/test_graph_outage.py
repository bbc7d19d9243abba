"""A killed graph server mid-run: `graph-infer` on DDXPlus against clinrag's own FalkorDB server (real, on
a unix socket), killed with SIGKILL while the run is querying it. Before: the remaining cases were stored as
errors (66 of 100) and the run exited 0. After: the server clinrag started is restarted once and the run
finishes with the same answers; killed again, the run stops, stores nothing for the unanswered cases and the
next run answers them.

With several queries in flight (concurrency 4, four queries waiting on the server when it dies): before,
the first failed query restarted the server, the three others failed anyway, counted as three outages in a
row and stopped the run with a message saying the server "has stopped again after one restart". After: the
queries in flight call again on the restarted server and the run finishes unchanged; only a real second
crash is reported as one.

The kill is injected around the store's real `query` (the N-th query kills the server first; in flight,
four queries meet at a barrier and one of them kills it), so it lands mid-run at the same place every
time."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from clinrag.core.errors import RunStoppedError
from clinrag.core.settings import Settings, load_settings
from clinrag.eval.results import RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.graph.falkordb_server import FalkorDBServer
from clinrag.graph.falkordb_store import FalkorDBStore
from tests.graph.conftest import build_ddx_graph, load_ddx_graph

pytestmark = pytest.mark.integration  # each test kills and restarts clinrag's FalkorDB server
CASES = 10
IN_FLIGHT = 4  # the concurrency of the runs whose queries are in flight together
IN_FLIGHT_CASES = 16


@pytest.fixture
def settings(data_dir: Path, isolated_home: Path) -> Iterator[Settings]:
    settings = load_settings(data_dir=data_dir)
    with FalkorDBStore.embedded(settings.graph_data_dir) as store:
        load_ddx_graph(store, build_ddx_graph(data_dir / "ddxplus"))
    yield settings
    FalkorDBServer(settings.graph_data_dir).stop()


def _run(
    settings: Settings, out: Path, concurrency: int = 1, cases: int = CASES
) -> list[tuple[str, list[str]]]:
    request = RunRequest(
        dataset="ddxplus",
        method="graph-infer",
        out=out,
        data_path=settings.data_dir / "ddxplus",
        limit=cases,
        concurrency=concurrency,
    )
    EvalRunner(settings, progress=False).run(request)
    return _answers(out)


def _answers(out: Path) -> list[tuple[str, list[str]]]:
    results = RunDirectory(out).results()
    assert all(r.answer.error is None for r in results)
    assert len({r.case_id for r in results}) == len(results)  # none twice
    return sorted((r.answer.case_id, [d.name for d in r.answer.result.ddx]) for r in results)


def _kill(settings: Settings) -> int:
    pid = FalkorDBServer(settings.graph_data_dir)._read_state().pid
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(pid).wait(10)
    return pid


def _kill_on_queries(monkeypatch: pytest.MonkeyPatch, settings: Settings, at: set[int]) -> list[int]:
    """Make the store's query number n (for n in `at`) first SIGKILL the running server; returns the pids
    killed."""
    real_query = FalkorDBStore.query
    calls, killed = [0], []

    def query(store: FalkorDBStore, cypher: str, params: dict | None = None) -> list:
        calls[0] += 1
        if calls[0] in at:
            killed.append(_kill(settings))
        return real_query(store, cypher, params)

    monkeypatch.setattr(FalkorDBStore, "query", query)
    return killed


def _kill_under_queries(monkeypatch: pytest.MonkeyPatch, settings: Settings, at: list[int]) -> list[int]:
    """From the store's query number n (for n in `at`), the next IN_FLIGHT queries wait for each other, one
    SIGKILLs the server, and all of them then query it; returns the pids killed."""
    real_query = FalkorDBStore.query
    lock, calls, killed = threading.Lock(), [0], []
    barriers = {n: threading.Barrier(IN_FLIGHT, timeout=20) for n in at}

    def query(store: FalkorDBStore, cypher: str, params: dict | None = None) -> list:
        with lock:
            calls[0] += 1
            barrier = next((b for n, b in barriers.items() if n <= calls[0] < n + IN_FLIGHT), None)
        if barrier is not None:
            if barrier.wait() == 0:
                killed.append(_kill(settings))
            barrier.wait()  # nobody queries before the server is dead
        return real_query(store, cypher, params)

    monkeypatch.setattr(FalkorDBStore, "query", query)
    return killed


def test_a_killed_server_is_restarted_and_the_run_finishes_unchanged(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    undisturbed = _run(settings, tmp_path / "undisturbed")
    assert len(undisturbed) == CASES and all(ddx for _, ddx in undisturbed)
    killed = _kill_on_queries(monkeypatch, settings, {4})
    assert _run(settings, tmp_path / "killed") == undisturbed
    assert len(killed) == 1
    assert FalkorDBServer(settings.graph_data_dir).running()


def test_killed_twice_the_run_stops_and_the_next_run_answers_the_rest(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    undisturbed = _run(settings, tmp_path / "undisturbed")
    with monkeypatch.context() as patch:
        killed = _kill_on_queries(patch, settings, {3, 6})
        with pytest.raises(RunStoppedError, match="in a row"):
            _run(settings, tmp_path / "killed")
    assert len(killed) == 2
    partial = _answers(tmp_path / "killed")
    assert 0 < len(partial) < CASES  # what was answered before the second kill is kept, the rest is not
    assert _run(settings, tmp_path / "killed") == undisturbed


def test_queries_in_flight_when_the_server_dies_survive_its_restart(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    undisturbed = _run(settings, tmp_path / "undisturbed", IN_FLIGHT, IN_FLIGHT_CASES)
    assert len(undisturbed) == IN_FLIGHT_CASES and all(ddx for _, ddx in undisturbed)
    killed = _kill_under_queries(monkeypatch, settings, [8])
    assert _run(settings, tmp_path / "killed", IN_FLIGHT, IN_FLIGHT_CASES) == undisturbed
    assert len(killed) == 1
    assert FalkorDBServer(settings.graph_data_dir).running()


def test_a_second_crash_with_queries_in_flight_is_reported_as_one(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    undisturbed = _run(settings, tmp_path / "undisturbed", IN_FLIGHT, IN_FLIGHT_CASES)
    with monkeypatch.context() as patch:
        killed = _kill_under_queries(patch, settings, [8, 20])
        with pytest.raises(RunStoppedError, match="has stopped again after one restart") as stopped:
            _run(settings, tmp_path / "killed", IN_FLIGHT, IN_FLIGHT_CASES)
    assert len(killed) == 2
    assert "3 cases in a row" in str(stopped.value)
    partial = _answers(tmp_path / "killed")
    assert 0 < len(partial) < IN_FLIGHT_CASES
    assert (
        _run(settings, tmp_path / "killed", IN_FLIGHT, IN_FLIGHT_CASES) == undisturbed
    )  # the next run answers the rest
