"""Embedding backends by name (`CLINRAG_EMBED_BACKEND`).

A backend module registers a function that builds the backend from the settings, e.g.
`@EMBED_BACKENDS.register("minilm-onnx")`. Every module of `clinrag.embed` (and of installed distributions
naming one under the `clinrag.embed_backends` entry-point group) is imported on the first lookup, so a backend
is one file. The name is checked where the embedder is built (`embed/factory.py`): loading the settings
imports no backend."""

from __future__ import annotations

from collections.abc import Callable

from clinrag.core.registry import Registry
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder

EMBED_BACKENDS: Registry[Callable[[Settings], Embedder]] = Registry(
    "embedding backend", packages=["clinrag.embed"], entry_point_group="clinrag.embed_backends"
)
