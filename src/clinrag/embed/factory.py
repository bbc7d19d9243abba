"""Builds the embedder the settings ask for."""

from __future__ import annotations

from clinrag.core.settings import Settings
from clinrag.embed.backends import EMBED_BACKENDS
from clinrag.embed.base import Embedder
from clinrag.embed.cache import CachedEmbedder


def build_embedder(settings: Settings) -> Embedder:
    """The configured backend, behind the on-disk cache when `embed_cache_enabled`. The backend's name is
    checked here, not when the settings load: an unknown one is a `ConfigError` naming `embed_backend`."""
    embedder = EMBED_BACKENDS.configured("embed_backend", settings.embed_backend)(settings)
    if settings.embed_cache_enabled:
        return CachedEmbedder(embedder, settings.embed_cache_path)
    return embedder
