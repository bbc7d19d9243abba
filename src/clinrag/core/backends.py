"""Chat-model and embedding backends by name (`CLINRAG_LLM_BACKEND`, `CLINRAG_EMBED_BACKEND`).

A backend module registers a function that builds the backend from the settings, e.g.
`@CHAT_BACKENDS.register("embedded")`. Every module of `clinrag.llm` / `clinrag.embed` (and of installed
distributions naming one under the `clinrag.chat_backends` / `clinrag.embed_backends` entry-point groups) is
imported on the first lookup, so a backend is one file. The settings check the names against these."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clinrag.core.registry import Registry

if TYPE_CHECKING:
    from clinrag.core.settings import Settings
    from clinrag.embed.base import Embedder
    from clinrag.llm.base import ChatModel

CHAT_BACKENDS: Registry[Callable[[Settings], ChatModel]] = Registry(
    "chat backend", packages=["clinrag.llm"], entry_point_group="clinrag.chat_backends"
)
EMBED_BACKENDS: Registry[Callable[[Settings], Embedder]] = Registry(
    "embedding backend", packages=["clinrag.embed"], entry_point_group="clinrag.embed_backends"
)


def check_name(registry: Registry[Any], name: str | None) -> str | None:
    """`name` when it names a registered backend (or is None); a `ValueError` listing the valid ones."""
    if name is not None and name not in registry.names():
        raise ValueError(f"unknown {registry.kind} {name!r}; valid: {', '.join(registry.names())}")
    return name
