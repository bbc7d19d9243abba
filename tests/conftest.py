"""Shared fixtures: the real data beside the checkout, an isolated clinrag home, the embedded model, a home
holding the packaged disease model; and the test tiers (unit, integration, slow) given to every test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clinrag.core.settings import Settings
from clinrag.llm.base import ChatModel
from clinrag.llm.embedded import from_settings
from tests.llama_server import LlamaServer, server_missing
from tests.openai_server import ScriptedServer

# Rich sizes the CLI's consoles when they are created (on import), from COLUMNS: wide enough that no printed
# line wraps, whatever the length of the temporary paths in it (longer under pytest-xdist).
os.environ["COLUMNS"] = "400"

# Test tiers (pyproject.toml registers the markers; `bash scripts/test.sh --fast` runs the unit tier alone):
# - unit: in-process logic on small data: no server, no model, no subprocess; each test well under a second.
# - integration: a real server (FalkorDB, llama.cpp, the HTTP app, a headless browser, a loopback HTTP test
#   server, a Dask cluster), a model (SmolLM2, MiniLM), a build of the packaged knowledge, the CLI in a
#   subprocess.
# - slow: the embedded model over many inputs, or a test that takes over about 20 s.
# A tier marker on a test or on its module (`pytestmark`) wins. Otherwise a test that uses one of these
# fixtures, directly or through another fixture, is integration, and every other test is unit; so a test that
# starts a server, a model or a subprocess itself says so with its own marker. The CLI run in this process by
# typer's CliRunner (`invoke_cli` in tests/app/test_cli.py) is no subprocess.
INTEGRATION_FIXTURES = frozenset(
    {
        # servers: scripted loopback HTTP servers, llama.cpp, FalkorDB, Neo4j, the HTTP app, Dask, Chromium
        "server", "lit_server", "embeddings_server", "chunk_server", "plan_server", "role_server",
        "marker_server", "llama_server", "store", "graph_home", "neo4j_store", "live", "secured", "served",
        "browser", "client",
        # models and what is built with them
        "embedded", "minilm_embedder", "minilm", "source_embedded", "consult_home", "web_kb",
    }
)  # fmt: skip
TIERS = ("unit", "integration", "slow")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            tier = "integration" if INTEGRATION_FIXTURES.intersection(item.fixturenames) else "unit"
            item.add_marker(tier)


# CI sets this: there a test that needs the shared data fails where the data is missing, never skips.
REQUIRE_DATA = os.environ.get("CLINRAG_REQUIRE_TEST_DATA") == "1"


def _data_dir() -> Path:
    return Path(os.environ.get("CLINRAG_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def shared_data(path: Path, what: str = "real test data") -> Path:
    """`path` under the shared data, where it is there; else the test skips, or fails in CI
    (`REQUIRE_DATA`): a test that needs the data never passes there by skipping."""
    if not path.exists():
        message = f"{what} not found at {path} (set CLINRAG_TEST_DATA to the shared data folder)"
        if REQUIRE_DATA:
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return shared_data(_data_dir())


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own CLINRAG_HOME and no CLINRAG_* settings from the developer's shell; `clinrag
    consult` starts no warm process (tests/app/test_warm.py starts one of its own)."""
    for name in list(os.environ):
        if name.startswith("CLINRAG_") and name != "CLINRAG_TEST_DATA":
            monkeypatch.delenv(name)
    home = tmp_path / "clinrag-home"
    monkeypatch.setenv("CLINRAG_HOME", str(home))
    monkeypatch.setenv("CLINRAG_CONSULT_WARM_S", "0")
    return home


@pytest.fixture(scope="session")
def embedded() -> ChatModel:
    """The real packaged SmolLM2 model, loaded once per test session through the registered backend: on the
    default runtime, or the one CLINRAG_EMBEDDED_RUNTIME names. No other CLINRAG_* setting reaches it."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("CLINRAG_") and name != "CLINRAG_EMBEDDED_RUNTIME":
                patch.delenv(name)
        return from_settings(Settings(embedded_n_ctx=2048))


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory):
    """llama.cpp's OpenAI-compatible server on loopback serving the packaged model (tests/llama_server.py),
    skipped with the reason where llama-cpp-python's server is not installed (CI installs it)."""
    missing = server_missing()
    if missing:
        pytest.skip(missing)
    started = LlamaServer(tmp_path_factory.mktemp("llama-server") / "server.log")
    yield started
    started.close()


@pytest.fixture
def server():
    """A scripted OpenAI-compatible HTTP server on loopback (see tests/openai_server.py)."""
    scripted = ScriptedServer()
    yield scripted
    scripted.close()


@pytest.fixture(scope="session")
def minilm_embedder():
    """The real packaged MiniLM int8 ONNX embedder, loaded once per test session."""
    from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder

    return MiniLMOnnxEmbedder()


@pytest.fixture(scope="session")
def consult_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clinrag home holding the consultation's default knowledge compiled (the packaged disease model, the
    vocabulary, the English finding pipeline), built once per test session (per xdist worker: about 15 s on
    two cores); a consultant opened on it loads it in about a second. No CLINRAG_* setting from the
    developer's shell reaches the build."""
    from clinrag.methods.base import MethodContext
    from clinrag.methods.consult import ConsultConfig, build_consultant

    home = tmp_path_factory.mktemp("consult-home")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("CLINRAG_"):
                patch.delenv(name)
        build_consultant(MethodContext(settings=Settings(home=home)), ConsultConfig())
    return home
