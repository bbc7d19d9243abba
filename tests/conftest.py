"""Shared fixtures: the real data beside the checkout, an isolated clinrag home, the embedded model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clinrag.core.settings import Settings
from clinrag.llm.base import ChatModel
from clinrag.llm.embedded import from_settings
from tests.openai_server import ScriptedServer


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
