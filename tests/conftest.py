"""Shared fixtures: the real data beside the checkout, an isolated clinrag home, the embedded model."""

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


def _data_dir() -> Path:
    return Path(os.environ.get("CLINRAG_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = _data_dir()
    if not path.is_dir():
        pytest.skip(f"real test data not found at {path} (set CLINRAG_TEST_DATA)")
    return path


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own CLINRAG_HOME and no CLINRAG_* settings from the developer's shell."""
    for name in list(os.environ):
        if name.startswith("CLINRAG_") and name != "CLINRAG_TEST_DATA":
            monkeypatch.delenv(name)
    home = tmp_path / "clinrag-home"
    monkeypatch.setenv("CLINRAG_HOME", str(home))
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
