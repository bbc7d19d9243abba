"""Builds the embedder the settings ask for."""

from __future__ import annotations

from clinrag.core.backends import EMBED_BACKENDS
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.embed.cache import CachedEmbedder


def build_embedder(settings: Settings) -> Embedder:
    """The configured backend, behind the on-disk cache when `embed_cache_enabled`."""
    embedder = EMBED_BACKENDS.get(settings.embed_backend)(settings)
    if settings.embed_cache_enabled:
        return CachedEmbedder(embedder, settings.embed_cache_path)
    return embedder
