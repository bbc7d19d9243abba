"""The statement knowledge base: statements with ICD-10 chapter tags, a concept-constrained dense index
(DoctorRAG eq. 1) and a BM25 index over the same statements, persisted together in one directory.

Each statement keeps the origin (source file fingerprint, record) it was derived from, and kb.json lists the
fingerprints of the source files (`source_files`), so an evaluation can tell whether the base shares a file
with its dataset and a search can leave out what a case was derived from (`exclude`). Format 1 bases, built
before origins were recorded, still load; their `source_files` is None (unknown)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from clinrag.core.errors import DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.core.models import Evidence
from clinrag.core.provenance import Origin
from clinrag.embed.base import Embedder
from clinrag.index.concept import ConceptIndex, Fallback
from clinrag.index.fusion import rrf
from clinrag.index.hits import Hit
from clinrag.index.lexical import LexicalIndex
from clinrag.index.store import atomic_directory, read_json, write_json
from clinrag.knowledge.statement import Statement
from clinrag.knowledge.tagging import Tagger

# concept: dense under the chapter constraint (eq. 1); hybrid: that fused with BM25 under the same constraint;
# dense and lexical: unconstrained; rrf: unconstrained dense and BM25 fused by reciprocal rank (MedRAG).
SearchMode = Literal["concept", "hybrid", "dense", "lexical", "rrf"]
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # format 1: no statement origins, no source_files
INFO_FILE = "kb.json"
STATEMENTS_FILE = "statements.jsonl"


@dataclass
class KBSearch:
    """Search results with the record of how they were found (for the trace)."""

    query: str
    mode: SearchMode
    query_tags: list[int]
    tag_source: Literal["given", "tagger", "none"]
    hits: list[tuple[Statement, float]]
    record: dict[str, Any] = field(default_factory=dict)

    def evidence(self) -> list[Evidence]:
        return [
            Evidence(
                id=f"kb:{statement.id}",
                kind="statement",
                text=statement.text,
                score=score,
                source=statement.source,
                provenance={"tags": statement.tags, **statement.provenance},
            )
            for statement, score in self.hits
        ]


class KnowledgeBase:
    def __init__(
        self,
        statements: list[Statement],
        concept: ConceptIndex,
        lexical: LexicalIndex,
        embedder: Embedder,
        info: dict[str, Any],
    ) -> None:
        self.statements = {s.id: s for s in statements}
        self.concept = concept
        self.lexical = lexical
        self.embedder = embedder
        self.info = info
        self.directory: Path | None = None  # where it was loaded from
        self._origin_counts = Counter(s.origin for s in statements if s.origin is not None)

    @property
    def source_files(self) -> dict[str, str] | None:
        """Fingerprint → source of every file the statements were read from; None when the base predates
        recorded origins (format 1), so what it holds is unknown."""
        files = self.info.get("source_files")
        return dict(files) if isinstance(files, dict) else None

    @classmethod
    def create(
        cls, statements: list[Statement], embedder: Embedder, *, language: str = "en", progress: bool = False
    ) -> KnowledgeBase:
        if not statements:
            raise InvalidInputError("a knowledge base needs at least one statement (the corpus was empty)")
        ids = [s.id for s in statements]
        vectors = embedder.encode([s.text for s in statements], progress=progress)
        concept = ConceptIndex(embedder.name, embedder.dimension)
        concept.add(vectors, ids, [s.tags for s in statements], progress=progress)
        lexical = LexicalIndex(language)  # type: ignore[arg-type]
        lexical.add(ids, [s.text for s in statements])
        info = {
            "format_version": FORMAT_VERSION,
            "embedder": embedder.name,
            "dimension": embedder.dimension,
            "language": language,
            "count": len(statements),
        }
        return cls(statements, concept, lexical, embedder, info)

    def save(self, directory: Path) -> None:
        """Write everything atomically: an existing knowledge base there is replaced only on success."""
        with atomic_directory(directory) as staging:
            write_json(staging / INFO_FILE, self.info)
            with (staging / STATEMENTS_FILE).open("w", encoding="utf-8") as sink:
                for statement in self.statements.values():
                    sink.write(statement.model_dump_json() + "\n")
            self.concept.save(staging / "concept")
            self.lexical.save(staging / "lexical")

    @classmethod
    def load(cls, directory: Path, embedder: Embedder) -> KnowledgeBase:
        info = read_info(directory)
        if (info["embedder"], info["dimension"]) != (embedder.name, embedder.dimension):
            raise IndexMismatchError(
                f"{directory} was built with {info['embedder']} ({info['dimension']}-d); the configured "
                f"embedder is {embedder.name} ({embedder.dimension}-d): rebuild it or change CLINRAG_EMBED_*"
            )
        statements = read_statements(directory)
        concept = ConceptIndex.load(
            directory / "concept", expect_embedder=embedder.name, expect_dimension=embedder.dimension
        )
        lexical = LexicalIndex.load(directory / "lexical")
        if len(concept) != len(statements) or len(lexical) != len(statements):
            raise DataFormatError(f"{directory}: the indexes and the statement file disagree on the count")
        base = cls(statements, concept, lexical, embedder, info)
        base.directory = Path(directory)
        return base

    def search(
        self,
        query: str,
        *,
        k: int = 5,
        mode: SearchMode = "concept",
        tags: list[int] | None = None,
        tagger: Tagger | None = None,
        fallback: Fallback = "none",
        vector: np.ndarray | None = None,
        exclude: Collection[Origin] = (),
    ) -> KBSearch:
        """Top-k statements. `concept` (DoctorRAG eq. 1) and `hybrid` use the query's chapter tags: given,
        or from `tagger`; a query without tags gets the `fallback` policy, recorded in `record`. `vector` is
        the query's embedding when the caller already has it (computed alongside the tags). Statements
        derived from an origin in `exclude` (the evaluated case's own record) are never returned: the search
        fetches k plus their number, then drops them, so k others are still returned when there are."""
        if not query.strip():
            raise InvalidInputError("the query is empty")
        tag_source: Literal["given", "tagger", "none"] = "given" if tags is not None else "none"
        record: dict[str, Any] = {}
        if tags is None and tagger is not None and mode in ("concept", "hybrid"):
            tagging = tagger.tag(query)
            tags, tag_source = tagging.tags, "tagger"
            record["tagging"] = {
                "tagger": tagger.name,
                "rejected": tagging.rejected,
                "untagged_reason": tagging.untagged_reason,
            }
        query_tags = sorted(set(tags or []))
        excluded = {origin for origin in exclude if origin in self._origin_counts}
        fetch = k + sum(self._origin_counts[origin] for origin in excluded)
        hits = self._hits(query, fetch, mode, query_tags, fallback, vector, record)
        if excluded:
            kept = [hit for hit in hits if self.statements[hit.id].origin not in excluded]
            record["excluded"] = len(hits) - len(kept)
            hits = kept
        return KBSearch(
            query=query,
            mode=mode,
            query_tags=query_tags,
            tag_source=tag_source,
            hits=[(self.statements[hit.id], hit.score) for hit in hits[:k]],
            record=record,
        )

    def _hits(
        self,
        query: str,
        k: int,
        mode: SearchMode,
        query_tags: list[int],
        fallback: Fallback,
        vector: np.ndarray | None,
        record: dict[str, Any],
    ) -> list[Hit]:
        hits: list[Hit]
        if mode == "lexical":
            hits = self.lexical.search(query, k)
        else:
            if vector is None:
                vector = self.embedder.encode([query])
            constrained = mode in ("concept", "hybrid")
            fused = mode in ("hybrid", "rrf")
            (result,) = self.concept.search(
                vector,
                [set(query_tags) if constrained else set()],
                3 * k if fused else k,
                fallback=fallback if constrained else "unconstrained",
            )
            record["concept"] = {key: value for key, value in result.to_trace().items() if key != "hits"}
            hits = result.hits
            if fused:
                lexical = self.lexical.search(query, 3 * k)
                if constrained and not result.fallback_used:  # the tag constraint applies to BM25 too
                    allowed = set(query_tags)
                    lexical = [h for h in lexical if allowed & set(self.statements[h.id].tags)]
                hits = rrf([hits, lexical], limit=k)
        return hits

    def stats(self) -> dict[str, Any]:
        return statistics(self.info, list(self.statements.values()))


def read_info(directory: Path) -> dict[str, Any]:
    path = Path(directory) / INFO_FILE
    if not path.exists():
        raise DataFormatError(f"no knowledge base at {directory} (build one with `clinrag kb build`)")
    info = read_json(path)
    if info.get("format_version") not in READABLE_VERSIONS:
        raise IndexMismatchError(
            f"{directory} has knowledge-base format {info.get('format_version')}, this clinrag reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}: rebuild it"
        )
    return info


def read_statements(directory: Path) -> list[Statement]:
    path = Path(directory) / STATEMENTS_FILE
    try:
        return [Statement.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines()]
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"cannot read the statements of {directory}: {exc}") from exc


def statistics(info: dict[str, Any], statements: list[Statement]) -> dict[str, Any]:
    tag_counts = Counter(tag for s in statements for tag in s.tags)
    return {
        **info,
        "statements": len(statements),
        "by_source": dict(Counter(s.source for s in statements).most_common()),
        "untagged": sum(not s.tags for s in statements),
        "tags_per_statement": round(sum(len(s.tags) for s in statements) / max(len(statements), 1), 2),
        "by_chapter": {str(tag): tag_counts[tag] for tag in sorted(tag_counts)},
        "rewrite_failures": sum("rewrite_error" in s.provenance for s in statements),
    }


def describe(directory: Path) -> dict[str, Any]:
    """Statistics of a saved knowledge base without loading its indexes or an embedder."""
    return statistics(read_info(directory), read_statements(directory))
