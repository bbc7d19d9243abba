"""`clinrag kb …`: build, search and describe the statement knowledge base."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from clinrag.app.common import (
    ExecutorOption,
    SchedulerOption,
    WorkersOption,
    out,
    require_text,
    settings_from,
)
from clinrag.core.errors import InvalidInputError

kb_app = typer.Typer(help="Build, search and describe the statement knowledge base.", no_args_is_help=True)

KbOption = Annotated[
    Path | None, typer.Option("--kb", help="Knowledge-base directory (else CLINRAG_KB_PATH).")
]


def _parse_tags(text: str) -> list[int]:
    from clinrag.terms.icd10 import parse_chapter_reference

    tags = []
    for part in text.split(","):
        number = parse_chapter_reference(part.strip())
        if number is None:
            raise InvalidInputError(
                f"{part.strip()!r} is not an ICD-10 chapter (use 1-22, IX, or a code range)"
            )
        tags.append(number)
    return tags


@kb_app.command("build")
def kb_build(
    ctx: typer.Context,
    source: Annotated[
        list[Path],
        typer.Option(
            "--source",
            "-s",
            help="Corpus file or folder, DDXPlus release_conditions.json, or packaged:NAME "
            "(icd10cm, faker-diseases[-fr|-zh], hpo, hpo-diseases); repeat for several.",
        ),
    ],
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output directory (else CLINRAG_KB_PATH).")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many items per source.")] = None,
    tagger: Annotated[Literal["llm", "embedding"] | None, typer.Option(help="Concept tagger.")] = None,
    rewrite: Annotated[
        bool | None,
        typer.Option(
            "--rewrite/--no-rewrite",
            help="Declarative statements: texts rewritten by the chat model, records by their template "
            "(off: everything indexed as it is).",
        ),
    ] = None,
    language: Annotated[Literal["en", "zh", "fr"], typer.Option(help="Language of the corpus.")] = "en",
    executor: ExecutorOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = 2,
) -> None:
    """Read corpora, rewrite them into declarative statements, tag them with ICD-10 chapters, index them.
    Resumable: run the same command again after an interruption. With --executor dask the embedding (and
    the embedding tagger) runs in parallel partitions on a Dask cluster."""
    from clinrag.knowledge.builder import KnowledgeBaseBuilder
    from clinrag.knowledge.factory import build_tagger
    from clinrag.knowledge.rewrite import DeclarativeRewriter
    from clinrag.llm.factory import build_chat_model
    from clinrag.scale.embedding import embedder_for

    settings = settings_from(ctx)
    declarative = settings.kb_rewrite if rewrite is None else rewrite
    target = out_dir or settings.knowledge_base_path
    with embedder_for(settings, executor, scheduler=scheduler, workers=workers) as embedder:
        builder = KnowledgeBaseBuilder(
            embedder=embedder,
            tagger=build_tagger(settings, embedder, tagger),
            rewriter=DeclarativeRewriter(build_chat_model(settings)) if declarative else None,
            raw_records=not declarative,
            language=language,
            # Distributed, items are tagged in large batches so that their embedding is worth partitioning.
            batch_size=4_096 if executor == "dask" and not declarative else 16,
        )
        report = builder.build(source, target, limit=limit)
    for line in report.sources.values():
        out.print(line, markup=False, highlight=False)
    summary = {k: v for k, v in report.as_dict().items() if k != "sources"}
    out.print(f"knowledge base written to {target}", markup=False)
    out.print_json(json.dumps(summary))


@kb_app.command("search")
def kb_search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="The question or text to find statements for.")],
    kb: KbOption = None,
    tags: Annotated[
        str | None, typer.Option(help="Query chapters, e.g. '9,10' or 'IX' (else the tagger decides).")
    ] = None,
    k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    mode: Annotated[Literal["concept", "hybrid", "dense", "lexical", "rrf"], typer.Option()] = "concept",
    fallback: Annotated[Literal["none", "unconstrained"] | None, typer.Option()] = None,
    tagger: Annotated[Literal["llm", "embedding"] | None, typer.Option(help="Query tagger.")] = None,
) -> None:
    """Search the knowledge base (DoctorRAG eq. 1 by default: cosine only where chapters are shared)."""
    from clinrag.embed.factory import build_embedder
    from clinrag.knowledge.base import KnowledgeBase
    from clinrag.knowledge.factory import build_tagger

    require_text(query, "the query")
    settings = settings_from(ctx)
    chapters = _parse_tags(tags) if tags else None  # checked before the model and the base are loaded
    embedder = build_embedder(settings)
    base = KnowledgeBase.load(kb or settings.knowledge_base_path, embedder)
    result = base.search(
        query,
        k=k,
        mode=mode,
        tags=chapters,
        tagger=None if tags else build_tagger(settings, embedder, tagger),
        fallback=fallback or settings.kb_fallback,
    )
    out.print(f"query chapters: {result.query_tags or 'none'} ({result.tag_source})", markup=False)
    concept = result.record.get("concept", {})
    if concept.get("reason"):
        used = "searched without the constraint" if concept.get("fallback_used") else "no results"
        out.print(f"fallback {concept.get('fallback')}: {concept['reason']} → {used}", markup=False)
    table = Table("rank", "score", "id", "chapters", "statement", title=f"{mode} search")
    for rank, (statement, score) in enumerate(result.hits, start=1):
        chapters = ",".join(map(str, statement.tags)) or "-"
        table.add_row(str(rank), f"{score:.3f}", statement.id, chapters, statement.text)
    out.print(table)


@kb_app.command("stats")
def kb_stats(ctx: typer.Context, kb: KbOption = None) -> None:
    """Counts by source and by ICD-10 chapter, untagged statements, rewrite failures."""
    from clinrag.knowledge.base import describe

    out.print_json(json.dumps(describe(kb or settings_from(ctx).knowledge_base_path)))
