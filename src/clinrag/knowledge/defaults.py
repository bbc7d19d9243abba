"""The knowledge base a consultation uses: one the user built or points to, one built from the sources the
user names, else the declarative statements of the knowledge that ships in installed packages (ICD-10-CM
categories, the faker-healthcare disease table, HPO phenotype definitions), built once into the home by the
resumable builder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.knowledge.base import INFO_FILE, KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.factory import build_tagger
from clinrag.knowledge.readers.packaged import DEFAULT_SOURCES, PREFIX, is_packaged
from clinrag.knowledge.rewrite import DeclarativeRewriter
from clinrag.knowledge.tagging import EmbeddingTagger

PACKAGED_DEFAULT = tuple(PREFIX + name for name in DEFAULT_SOURCES)


def default_knowledge_base_path(settings: Settings) -> Path:
    return settings.default_kb_path


def sources_knowledge_base_path(settings: Settings, sources: Sequence[str | Path], rewrite: bool) -> Path:
    """Where the base built from `sources` is kept (one per set of resolved sources and rewrite setting)."""
    names = sorted(str(s) if is_packaged(s) else str(Path(s).resolve()) for s in sources)
    return settings.built_base_path("kb-sources", f"{names}:{rewrite}")


def open_knowledge_base(
    settings: Settings,
    embedder: Embedder,
    path: Path | None = None,
    *,
    sources: Sequence[str | Path] = (),
    progress: bool = True,
) -> KnowledgeBase:
    """In order: the base saved at `path`; the base built from `sources` (built on first use, text sources
    rewritten into statements by the chat model when CLINRAG_KB_REWRITE is on); the one at CLINRAG_KB_PATH /
    the home's `kb`; the packaged default (a few minutes to build on a laptop CPU; an interrupted build
    resumes)."""
    if path is not None:
        return KnowledgeBase.load(Path(path), embedder)
    packaged = not sources
    if sources:
        directory, rewrite = (
            sources_knowledge_base_path(settings, sources, settings.kb_rewrite),
            settings.kb_rewrite,
        )
    elif (settings.knowledge_base_path / INFO_FILE).is_file():
        return KnowledgeBase.load(settings.knowledge_base_path, embedder)
    else:
        # Packaged records carry their own statements and codes: no chat model is needed.
        directory, sources, rewrite = default_knowledge_base_path(settings), PACKAGED_DEFAULT, False
    if not (directory / INFO_FILE).is_file():
        # The packaged default is tagged without a model (16k HPO terms) and kept declarative; user sources
        # follow CLINRAG_KB_TAGGER and CLINRAG_KB_REWRITE, as `clinrag kb build` does.
        builder = KnowledgeBaseBuilder(
            embedder=embedder,
            tagger=EmbeddingTagger(embedder) if packaged else build_tagger(settings, embedder),
            rewriter=_rewriter(settings) if rewrite else None,
            raw_records=not (packaged or rewrite),
        )
        builder.build(list(sources), directory, progress=progress)
    return KnowledgeBase.load(directory, embedder)


def _rewriter(settings: Settings) -> DeclarativeRewriter:
    from clinrag.llm.factory import build_chat_model

    return DeclarativeRewriter(build_chat_model(settings))
