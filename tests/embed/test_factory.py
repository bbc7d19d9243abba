"""build_embedder: the backend and the cache follow the settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clinrag.core.errors import ConfigError
from clinrag.core.settings import Settings
from clinrag.embed.cache import CachedEmbedder
from clinrag.embed.factory import build_embedder
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.embed.openai_compat import OpenAIEmbedder
from tests.embed.embeddings_server import DIMENSION, EmbeddingsServer


@pytest.mark.integration  # the packaged MiniLM model
def test_default_is_cached_minilm_in_the_clinrag_home(isolated_home: Path) -> None:
    settings = Settings()
    embedder = build_embedder(settings)
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, MiniLMOnnxEmbedder)
    assert embedder.name == "all-MiniLM-L6-v2-onnx-int8"
    assert embedder.dimension == 384
    assert embedder.batch_size == settings.embed_batch_size
    assert embedder.cache.path == settings.embed_cache_path == isolated_home / "embed_cache.sqlite"
    vectors = embedder.encode(["chest pain"])
    assert vectors.shape == (1, 384)
    assert settings.embed_cache_path.is_file()


@pytest.mark.integration
def test_cache_can_be_disabled() -> None:
    embedder = build_embedder(Settings(embed_cache_enabled=False, embed_batch_size=16))
    assert isinstance(embedder, MiniLMOnnxEmbedder)
    assert embedder.batch_size == 16


def test_an_unknown_backend_is_refused_where_the_embedder_is_built() -> None:
    settings = Settings(embed_backend="word2vec")  # loading the settings does not check the name
    with pytest.raises(ConfigError, match="embed_backend: unknown embedding backend 'word2vec'") as error:
        build_embedder(settings)
    assert "known embedding backends: minilm-onnx, openai" in str(error.value)


def test_minilm_backend_rejects_another_model_name() -> None:
    with pytest.raises(ConfigError, match="runs all-MiniLM-L6-v2-onnx-int8 only"):
        build_embedder(Settings(embed_model="text-embedding-3-small"))


@pytest.mark.parametrize(
    ("fields", "missing"),
    [
        ({}, "CLINRAG_EMBED_MODEL and CLINRAG_EMBED_BASE_URL"),
        ({"embed_model": "nomic-embed-text"}, "CLINRAG_EMBED_BASE_URL"),
        ({"embed_base_url": "http://127.0.0.1:1/v1"}, "CLINRAG_EMBED_MODEL"),
    ],
)
def test_openai_backend_needs_model_and_url(fields: dict, missing: str) -> None:
    with pytest.raises(ConfigError, match=missing):
        build_embedder(Settings(embed_backend="openai", **fields))


def test_openai_backend_from_environment(
    embeddings_server: EmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLINRAG_EMBED_BACKEND", "openai")
    monkeypatch.setenv("CLINRAG_EMBED_MODEL", "nomic-embed-text")
    monkeypatch.setenv("CLINRAG_EMBED_BASE_URL", embeddings_server.base_url)
    monkeypatch.setenv("CLINRAG_EMBED_API_KEY", "k-123")
    monkeypatch.setenv("CLINRAG_EMBED_BATCH_SIZE", "2")
    monkeypatch.setenv("CLINRAG_LLM_BACKOFF_S", "0.01")
    embeddings_server.failures = [502]
    embedder = build_embedder(Settings())
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, OpenAIEmbedder)
    texts = ["fever", "cough", "rash"]
    vectors = embedder.encode(texts)
    assert vectors.shape == (3, DIMENSION)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert embeddings_server.statuses == [502, 200, 200]
    assert {r["auth"] for r in embeddings_server.requests} == {"Bearer k-123"}
    embedder.encode(texts)
    assert len(embeddings_server.requests) == 3  # all from the cache the second time
