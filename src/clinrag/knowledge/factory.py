"""Build the configured concept tagger."""

from __future__ import annotations

from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.knowledge.tagging import MAX_TAGS, EmbeddingTagger, LLMTagger, Tagger


def build_tagger(
    settings: Settings, embedder: Embedder, kind: str | None = None, max_tags: int = MAX_TAGS
) -> Tagger:
    """`kind` (else `settings.kb_tagger`): "llm" — the paper's tagging agent on the chat model — or
    "embedding" — cosine to the chapter titles, no model call; at most `max_tags` chapters a text."""
    if (kind or settings.kb_tagger) == "llm":
        from clinrag.llm.factory import build_chat_model

        return LLMTagger(build_chat_model(settings), max_tags=max_tags)
    return EmbeddingTagger(embedder, max_tags=max_tags)
