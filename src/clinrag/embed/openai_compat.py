"""Any OpenAI-compatible embeddings endpoint: vLLM, llama.cpp server, Ollama, TEI, OpenAI."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from clinrag.core.errors import ConfigError, ModelReplyError, ModelUnavailableError
from clinrag.core.settings import Settings, redact_url
from clinrag.embed.backends import EMBED_BACKENDS
from clinrag.embed.base import Embedder

if TYPE_CHECKING:  # the OpenAI SDK takes a third of a second to import: loaded when this backend is built
    from clinrag.core.remote import RetryPolicy

_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder(Embedder):
    """`dimension` is the one given, else learnt from the first reply (or a probe request if asked first)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        batch_size: int = 64,
        dimension: int | None = None,
    ) -> None:
        from clinrag.core.remote import RetryPolicy, make_clients

        super().__init__(batch_size)
        if not model:
            raise ConfigError("the OpenAI-compatible embedder needs a model name")
        if dimension is not None and dimension < 1:
            raise ConfigError(f"embedding dimension must be positive, got {dimension}")
        self.name = model
        self.base_url = base_url
        self.retry = retry or RetryPolicy()
        self._client, _ = make_clients(base_url, api_key, timeout_s)
        self._dimension = dimension
        self._dimension_lock = threading.Lock()
        self._where = f"the embeddings server at {redact_url(base_url) if base_url else 'api.openai.com'}"

    @property
    def dimension(self) -> int:  # type: ignore[override]
        if self._dimension is None:
            self._embed_batch([_PROBE_TEXT])
        assert self._dimension is not None
        return self._dimension

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        from clinrag.core.remote import call_with_retries

        response = call_with_retries(
            # "float" explicitly: the SDK otherwise asks for base64, which not every server implements.
            lambda: self._client.embeddings.create(model=self.name, input=texts, encoding_format="float"),
            self.retry,
            self._where,
        )
        vectors = self._vectors(response, len(texts))
        with self._dimension_lock:
            if self._dimension is None:
                self._dimension = vectors.shape[1]
        if vectors.shape[1] != self._dimension:
            raise ModelUnavailableError(
                f"{self._where} returned {vectors.shape[1]}-dimensional vectors for {self.name}, "
                f"expected {self._dimension}"
            )
        return vectors

    def _vectors(self, response: Any, expected: int) -> np.ndarray:
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise ModelReplyError(f"{self._where} returned {got} embeddings for {expected} inputs")
        # The protocol carries an index per item and does not promise input order; a server that omits
        # the indices is taken to keep the order.
        items = data
        indices = [getattr(item, "index", None) for item in data]
        if all(isinstance(i, int) for i in indices):
            if sorted(indices) != list(range(expected)):
                raise ModelReplyError(f"{self._where} returned embeddings with inconsistent indices")
            items = sorted(data, key=lambda item: item.index)
        try:
            vectors = np.array([item.embedding for item in items], dtype=np.float32)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ModelReplyError(f"{self._where} returned malformed embeddings: {exc}") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise ModelReplyError(
                f"{self._where} returned malformed embeddings of shape {vectors.shape}, expected (n, dim)"
            )
        if not np.isfinite(vectors).all():
            raise ModelReplyError(f"{self._where} returned embeddings with non-finite values")
        return vectors


@EMBED_BACKENDS.register("openai")
def from_settings(settings: Settings) -> OpenAIEmbedder:
    missing = [
        f"CLINRAG_{name.upper()}" for name in ("embed_model", "embed_base_url") if not getattr(settings, name)
    ]
    if missing or settings.embed_model is None:
        raise ConfigError(f"embed_backend 'openai' needs {' and '.join(missing)}")
    from clinrag.core.remote import RetryPolicy

    return OpenAIEmbedder(
        model=settings.embed_model,
        base_url=settings.embed_base_url,
        api_key=settings.embed_api_key.get_secret_value() if settings.embed_api_key else None,
        timeout_s=settings.llm_timeout_s,
        retry=RetryPolicy(max_retries=settings.llm_max_retries, backoff_s=settings.llm_backoff_s),
        batch_size=settings.embed_batch_size,
    )
