"""Stopping `clinrag serve`: the real command in a subprocess on loopback, after a `graph-infer` request has
made it start clinrag's own FalkorDB server. Before: on SIGTERM uvicorn shut down and raised the signal
again, which killed the process (exit code 143, -15 here) before it released the FalkorDB server: the
server kept running under PID 1 with the dead process still listed as its client. After: SIGTERM and SIGINT
end `serve` with exit code 0, and the FalkorDB server it started is stopped."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from clinrag.core.settings import load_settings
from clinrag.graph.falkordb_server import STATE_FILE, FalkorDBServer
from clinrag.patients.base import PatientBase
from clinrag.patients.loaders import load_patient_dataset
from tests.loopback import free_port


@pytest.fixture
def graph_dir(isolated_home: Path) -> Iterator[Path]:
    directory = load_settings().graph_data_dir
    yield directory
    if (directory / STATE_FILE).exists():  # a server that a failed run left behind
        FalkorDBServer(directory).stop()


@pytest.fixture
def patients(tmp_path: Path, minilm_embedder) -> Path:
    """A small patient base, so that `serve` need not build its default cohort of 1,000."""
    records, _ = load_patient_dataset("synthetic", None, 20)
    PatientBase.create(records, minilm_embedder, progress=False).save(tmp_path / "patients")
    return tmp_path / "patients"


def _serve(port: int, patients: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "clinrag", "serve", "--port", str(port), "--log-level", "warning"]
    command += ["--patients", str(patients)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, "clinrag serve did not become ready"
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return process
        time.sleep(0.2)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_serve_and_the_graph_server_it_started(
    graph_dir: Path, patients: Path, stop: signal.Signals
) -> None:
    port = free_port()
    process = _serve(port, patients)
    try:
        body = {"method": "graph-infer", "task": "diagnosis", "text": "fever and cough"}
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/consult", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        state = FalkorDBServer(graph_dir)._read_state()
        assert state is not None and any(c.startswith(f"{process.pid}:") for c in state.clients)
        graph_server = psutil.Process(state.pid)
        process.send_signal(stop)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert f"clinrag stopped on {stop.name}" in output
    assert "Traceback" not in output
    assert not graph_server.is_running()
    assert not (graph_dir / STATE_FILE).exists()
