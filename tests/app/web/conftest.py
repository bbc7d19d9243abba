"""A real clinrag server on loopback for the API and browser tests: uvicorn in a thread, on the session's
consultation home (tests/conftest.py), a knowledge base built from the packaged disease table, a patient base
built from the real iCraft-MD vignettes, the real DDXPlus patients for interactive differentials, the real
embedded model and embedder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from clinrag.app.web.api import create_app
from clinrag.app.web.server import server_config
from clinrag.app.web.services import ConsultService, DdxService
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.datasets.base import Dataset
from clinrag.patients.defaults import open_patient_base
from tests.app.test_cli import invoke_cli

CASE = (
    "A 5-year-old boy has multiple dome-shaped skin-coloured papules with central umbilication on the chest "
    "and back. They are not itchy. What is it and what should we do?"
)
CHEAP = {"refine_iterations": 0}  # DoctorRAG without Med-TextGrad: one model call
# The README's consultation example: in the patient's words, no question asked.
EXAMPLE = (
    "I am 45 and have had a fever, a productive cough and pain on the right side of my chest when I breathe "
    "for three days."
)


@dataclass
class LiveServer:
    url: str
    consult: ConsultService


@pytest.fixture(scope="session")
def web_home(consult_home: Path) -> Path:
    """The home where the packaged disease model is already built, so the consultation loads it."""
    return consult_home


@pytest.fixture(scope="session")
def web_kb(web_home: Path) -> Path:
    out = web_home / "kb"
    built = invoke_cli(
        "kb", "build", "-s", "packaged:faker-diseases", "--out", str(out), env={"CLINRAG_HOME": str(web_home)}
    )
    assert built.returncode == 0, built.stderr
    return out


@pytest.fixture(scope="session")
def ddxplus_interactive(data_dir: Path) -> Dataset:
    return load_dataset("ddxplus-interactive", data_dir / "ddxplus")


@pytest.fixture(scope="session")
def ddx_service(data_dir: Path, minilm_embedder) -> DdxService:
    return DdxService.from_ddxplus(data_dir / "ddxplus", minilm_embedder, Settings())


def start_server(app) -> tuple[uvicorn.Server, threading.Thread, str]:
    """The app served as `clinrag serve` serves it (its connection limits included), on a free port."""
    settings = app.state.consult.settings
    server = uvicorn.Server(server_config(app, settings, "127.0.0.1", 0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


def serve(settings: Settings, data_dir: Path, embedded, minilm_embedder, ddx: DdxService | None):
    base = open_patient_base(
        settings, minilm_embedder, dataset="icraft", data_path=data_dir / "icraft_md" / "craft_md.jsonl"
    )
    consult = ConsultService(
        settings, patient_base=base, embedder=lambda _: minilm_embedder, chat_model=lambda _: embedded
    )
    server, thread, url = start_server(create_app(consult, ddx))
    return server, thread, LiveServer(url, consult)


@pytest.fixture(scope="session")
def live(web_home, web_kb, data_dir, embedded, minilm_embedder, ddx_service) -> Iterator[LiveServer]:
    """The server as `clinrag serve` builds it, without a token (loopback)."""
    settings = Settings(home=web_home, kb_path=web_kb)
    server, thread, live = serve(settings, data_dir, embedded, minilm_embedder, ddx_service)
    yield live
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def secured(web_home, web_kb, data_dir, embedded, minilm_embedder) -> Iterator[LiveServer]:
    """A server with a bearer token, a small body limit and a short per-request timeout."""
    settings = Settings(
        home=web_home,
        kb_path=web_kb,
        api_token="s3cret-operator-token",
        api_max_body_bytes=4096,
        api_timeout_s=0.5,
    )
    server, thread, live = serve(settings, data_dir, embedded, minilm_embedder, None)
    yield live
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def served(web_home, web_kb, data_dir) -> Iterator[str]:
    """`clinrag serve` as a user starts it: a subprocess on a free loopback port; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable, "-m", "clinrag", "serve", "--port", str(port), "--kb", str(web_kb),
        "--patients-dataset", "icraft", "--patients-path", str(data_dir / "icraft_md" / "craft_md.jsonl"),
        "--ddx-data", str(data_dir / "ddxplus"), "--log-level", "warning",
    ]  # fmt: skip
    environment = {**os.environ, "CLINRAG_HOME": str(web_home)}
    process = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else "exited"
        assert time.monotonic() < deadline, "clinrag serve did not become ready"
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.5)
    yield url
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Where browser screenshots are kept (CLINRAG_TEST_ARTIFACTS, else test-artifacts/ in the checkout)."""
    path = Path(os.environ.get("CLINRAG_TEST_ARTIFACTS", Path(__file__).parents[3] / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path
