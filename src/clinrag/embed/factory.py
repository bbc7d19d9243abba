"""Builds the embedder the settings ask for."""

from __future__ import annotations

from clinrag.core.errors import ConfigError
from clinrag.core.remote import RetryPolicy
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.embed.cache import CachedEmbedder
from clinrag.embed.minilm_onnx import MODEL_ID, MiniLMOnnxEmbedder
from clinrag.embed.openai_compat import OpenAIEmbedder


def build_embedder(settings: Settings) -> Embedder:
    """The configured backend, behind the on-disk cache when `embed_cache_enabled`."""
    embedder: Embedder
    if settings.embed_backend == "minilm-onnx":
        if settings.embed_model not in (None, MODEL_ID):
            raise ConfigError(
                f"embed_backend 'minilm-onnx' runs {MODEL_ID} only; embed_model is {settings.embed_model!r}"
            )
        embedder = MiniLMOnnxEmbedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    elif settings.embed_backend == "openai":
        missing = [
            f"CLINRAG_{name.upper()}"
            for name in ("embed_model", "embed_base_url")
            if not getattr(settings, name)
        ]
        if missing:
            raise ConfigError(f"embed_backend 'openai' needs {' and '.join(missing)}")
        assert settings.embed_model is not None
        embedder = OpenAIEmbedder(
            model=settings.embed_model,
            base_url=settings.embed_base_url,
            api_key=settings.embed_api_key.get_secret_value() if settings.embed_api_key else None,
            timeout_s=settings.llm_timeout_s,
            retry=RetryPolicy(max_retries=settings.llm_max_retries, backoff_s=settings.llm_backoff_s),
            batch_size=settings.embed_batch_size,
        )
    else:  # unreachable through Settings validation; kept for settings built with model_construct
        raise ConfigError(f"unknown embed_backend {settings.embed_backend!r}")
    if settings.embed_cache_enabled:
        return CachedEmbedder(embedder, settings.embed_cache_path)
    return embedder
