"""Concept-constrained dense retrieval, DoctorRAG eq. 1:

    score(q, s) = cos(q, s)  if tags(q) ∩ tags(s) ≠ ∅,  else −∞;  return the top k by score.

The constraint lives inside the index: every statement is stored in one dense sub-index per tag it carries
(a statement tagged {2, 9} is in sub-indexes 2 and 9), a query searches only the sub-indexes of its own tags,
and the results are merged by score with duplicates removed. Statements without tags are kept in an
"untagged" pool. Because every statement is in at least one sub-index or in that pool, searching all of
them is an unconstrained search over everything: that is the fallback, so no extra full copy is stored.
`clinrag.index.baseline.masked_search` is the brute-force reference for the same definition."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from tqdm import tqdm

from clinrag.core.errors import ConfigError, DataFormatError, InvalidInputError
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.hits import Hit
from clinrag.index.store import (
    Manifest,
    atomic_directory,
    read_json,
    read_vector_manifest,
    write_json,
    write_manifest,
)
from clinrag.index.validate import check_k, check_new_ids, check_tag_sets, check_vectors

Fallback = Literal["none", "unconstrained"]
FALLBACKS: tuple[str, ...] = get_args(Fallback)

NO_QUERY_TAGS = "query has no tags"
NO_SHARED_TAGS = "no statement shares the query's tags"
EMPTY_INDEX = "the index is empty"

STATEMENTS_FILE = "statements.json"
UNTAGGED_DIR = "untagged"
_UNTAGGED = None  # key of the untagged pool among the sub-indexes a query searches


@dataclass(frozen=True, slots=True)
class ConceptResult:
    """The hits of one query and what the search did to get them, for the caller's trace.

    `reason` says why the tag-constrained search had nothing to offer (`NO_QUERY_TAGS`, `NO_SHARED_TAGS`,
    `EMPTY_INDEX`) and is None when it ran; `fallback_used` says whether the unconstrained fallback then
    searched every statement. `unmatched_tags` are query tags that no statement carries."""

    hits: list[Hit]
    query_tags: tuple[int, ...]
    searched_tags: tuple[int, ...]
    unmatched_tags: tuple[int, ...]
    searched_untagged: bool
    fallback: Fallback
    fallback_used: bool
    reason: str | None

    def to_trace(self) -> dict[str, Any]:
        """A JSON-ready record (e.g. for a `TraceStep.output`)."""
        return {
            "query_tags": list(self.query_tags),
            "searched_tags": list(self.searched_tags),
            "unmatched_tags": list(self.unmatched_tags),
            "searched_untagged": self.searched_untagged,
            "fallback": self.fallback,
            "fallback_used": self.fallback_used,
            "reason": self.reason,
            "hits": [{"id": hit.id, "score": hit.score} for hit in self.hits],
        }


class ConceptIndex:
    """Statements (unit vectors with sets of int tags, e.g. ICD-10 chapters 1–22) searched under eq. 1."""

    def __init__(self, embedder: str, dimension: int, config: DenseConfig | None = None) -> None:
        # Validates embedder and dimension the same way for the pool and every sub-index.
        self._untagged = DenseIndex(embedder, dimension, config)
        self.embedder = embedder
        self.dimension = dimension
        self.config = self._untagged.config
        self._subs: dict[int, DenseIndex] = {}
        self._tags: dict[str, frozenset[int]] = {}  # statement id -> tags, in insertion order

    @property
    def tags(self) -> list[int]:
        """The tags that at least one statement carries, ascending."""
        return sorted(self._subs)

    def __len__(self) -> int:
        return len(self._tags)

    def tags_of(self, item_id: str) -> frozenset[int]:
        try:
            return self._tags[item_id]
        except KeyError:
            raise InvalidInputError(f"no statement with id {item_id!r} in the index") from None

    def sub_index_sizes(self) -> dict[int | None, int]:
        """Statements per sub-index (key None: the untagged pool); multi-tag statements count once per tag."""
        sizes: dict[int | None, int] = {tag: len(self._subs[tag]) for tag in self.tags}
        sizes[_UNTAGGED] = len(self._untagged)
        return sizes

    def add(
        self,
        vectors: np.ndarray,
        ids: Sequence[str],
        tags: Sequence[Iterable[int]],
        *,
        progress: bool = False,
    ) -> None:
        """Add statements: unit float32 vectors, new unique ids, one collection of int tags each (may be
        empty: untagged). Everything is validated before any sub-index changes."""
        vectors = check_vectors(vectors, self.dimension)
        new_ids = check_new_ids(ids, len(vectors), self._tags)
        tag_sets = check_tag_sets(tags, len(vectors), what="tags")
        rows_by_key: dict[int | None, list[int]] = {}
        for row, tag_set in enumerate(tag_sets):
            for key in tag_set or (_UNTAGGED,):
                rows_by_key.setdefault(key, []).append(row)
        keys = sorted(rows_by_key, key=lambda key: (key is _UNTAGGED, key or 0))
        for key in tqdm(keys, desc="concept sub-indexes", unit="index", disable=not progress):
            rows = np.asarray(rows_by_key[key], dtype=np.int64)
            target = self._untagged if key is _UNTAGGED else self._sub_for_adding(key)
            target.add(vectors[rows], [new_ids[row] for row in rows])
        self._tags.update(zip(new_ids, tag_sets, strict=True))

    def search(
        self,
        query_vectors: np.ndarray,
        query_tags: Sequence[Iterable[int]],
        k: int,
        *,
        fallback: Fallback = "none",
        ef_search: int | None = None,
    ) -> list[ConceptResult]:
        """Top k statements per query under eq. 1, with a record of what was searched.

        With `fallback="none"` a query without tags, or whose tags no statement carries, gets no hits (and a
        `reason`); with `fallback="unconstrained"` such a query is answered by plain cosine over every
        statement. A query whose tags do match never falls back, even if fewer than k statements share them:
        eq. 1 gives every other statement −∞. `ef_search` overrides the HNSW search breadth for this call."""
        queries = check_vectors(query_vectors, self.dimension, what="query vectors")
        k = check_k(k)
        if fallback not in FALLBACKS:
            raise InvalidInputError(f"fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
        tag_sets = check_tag_sets(query_tags, len(queries), what="query tags")
        if ef_search is not None:
            check_k(ef_search, name="ef_search")
        plans = [self._plan(tag_set, fallback) for tag_set in tag_sets]
        # One batched search per sub-index, over the queries that need it.
        rows_by_key: dict[int | None, list[int]] = {}
        for row, plan in enumerate(plans):
            for key in plan.keys:
                rows_by_key.setdefault(key, []).append(row)
        best: list[dict[str, float]] = [{} for _ in plans]
        for key, rows in rows_by_key.items():
            source = self._untagged if key is _UNTAGGED else self._subs[key]
            for row, hits in zip(rows, source.search(queries[rows], k, ef_search=ef_search), strict=True):
                merged = best[row]
                for hit in hits:  # a multi-tag statement comes back from several sub-indexes
                    if hit.score > merged.get(hit.id, -np.inf):
                        merged[hit.id] = hit.score
        return [
            plan.result(sorted((Hit(i, s) for i, s in merged.items()), key=_rank)[:k], fallback)
            for plan, merged in zip(plans, best, strict=True)
        ]

    def save(self, directory: Path) -> None:
        """Write the index to `directory` atomically: the tag map, one dense sub-index per tag, the pool."""
        with atomic_directory(directory) as staging:
            write_json(
                staging / STATEMENTS_FILE,
                {"ids": list(self._tags), "tags": [sorted(tags) for tags in self._tags.values()]},
            )
            for tag in self.tags:
                (staging / _tag_dir(tag)).mkdir()
                self._subs[tag].write_into(staging / _tag_dir(tag))
            (staging / UNTAGGED_DIR).mkdir()
            self._untagged.write_into(staging / UNTAGGED_DIR)
            params = {**asdict(self.config), "tags": self.tags}
            manifest = Manifest.new(
                "concept", count=len(self), embedder=self.embedder, dimension=self.dimension, params=params
            )
            write_manifest(staging, manifest)

    @classmethod
    def load(
        cls,
        directory: Path,
        *,
        expect_embedder: str | None = None,
        expect_dimension: int | None = None,
    ) -> ConceptIndex:
        """Load a saved index; with `expect_*` given, an index from another embedder or of another dimension
        is refused with `IndexMismatchError`."""
        directory = Path(directory)
        manifest = read_vector_manifest(
            directory, "concept", expect_embedder=expect_embedder, expect_dimension=expect_dimension
        )
        params = dict(manifest.params)
        tags = params.pop("tags", None)
        if not isinstance(tags, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tags
        ):
            raise DataFormatError(f"{directory}: the manifest's tag list is missing or not a list of ints")
        try:
            index = cls(manifest.embedder, manifest.dimension, DenseConfig(**params))
        except (TypeError, ConfigError) as exc:
            raise DataFormatError(f"{directory}: invalid concept index parameters {params}: {exc}") from exc
        index._tags = _read_statements(directory / STATEMENTS_FILE, manifest.count)
        expected: dict[int | None, set[str]] = {tag: set() for tag in tags}
        expected[_UNTAGGED] = set()
        for item_id, tag_set in index._tags.items():
            for key in tag_set or (_UNTAGGED,):
                if key not in expected:
                    raise DataFormatError(
                        f"{directory}: statement {item_id!r} has tag {key}, which has no sub-index"
                    )
                expected[key].add(item_id)
        for key, members in expected.items():
            path = directory / (UNTAGGED_DIR if key is _UNTAGGED else _tag_dir(key))
            sub = DenseIndex.load(
                path, expect_embedder=manifest.embedder, expect_dimension=manifest.dimension
            )
            if set(sub.ids) != members:
                raise DataFormatError(
                    f"{path} does not hold exactly the statements the tag map assigns to it"
                )
            if key is _UNTAGGED:
                index._untagged = sub
            else:
                index._subs[key] = sub
        return index

    def _sub_for_adding(self, tag: int) -> DenseIndex:
        if tag not in self._subs:
            self._subs[tag] = DenseIndex(self.embedder, self.dimension, self.config)
        return self._subs[tag]

    def _plan(self, tag_set: frozenset[int], fallback: Fallback) -> _Plan:
        query_tags = tuple(sorted(tag_set))
        matched = tuple(t for t in query_tags if t in self._subs)
        unmatched = tuple(t for t in query_tags if t not in self._subs)
        if not self._tags:
            return _Plan(query_tags, (), unmatched, fallback_used=False, reason=EMPTY_INDEX)
        if matched:
            return _Plan(query_tags, matched, unmatched, fallback_used=False, reason=None)
        reason = NO_SHARED_TAGS if query_tags else NO_QUERY_TAGS
        if fallback == "unconstrained":
            return _Plan(query_tags, tuple(self.tags), unmatched, fallback_used=True, reason=reason)
        return _Plan(query_tags, (), unmatched, fallback_used=False, reason=reason)


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which sub-indexes one query searches, decided before any search runs."""

    query_tags: tuple[int, ...]
    searched_tags: tuple[int, ...]
    unmatched_tags: tuple[int, ...]
    fallback_used: bool
    reason: str | None

    @property
    def keys(self) -> tuple[int | None, ...]:
        # The untagged pool is part of "everything" only; eq. 1 never admits an untagged statement.
        return (*self.searched_tags, _UNTAGGED) if self.fallback_used else self.searched_tags

    def result(self, hits: list[Hit], fallback: Fallback) -> ConceptResult:
        return ConceptResult(
            hits=hits,
            query_tags=self.query_tags,
            searched_tags=self.searched_tags,
            unmatched_tags=self.unmatched_tags,
            searched_untagged=self.fallback_used,
            fallback=fallback,
            fallback_used=self.fallback_used,
            reason=self.reason,
        )


def _rank(hit: Hit) -> tuple[float, str]:
    return (-hit.score, hit.id)


def _tag_dir(tag: int) -> str:
    return f"tag_{tag}"


def _read_statements(path: Path, expected: int) -> dict[str, frozenset[int]]:
    raw = read_json(path)
    ids = raw.get("ids") if isinstance(raw, dict) else None
    tags = raw.get("tags") if isinstance(raw, dict) else None
    if not isinstance(ids, list) or not isinstance(tags, list) or len(ids) != len(tags):
        raise DataFormatError(f"{path} must hold equally long 'ids' and 'tags' lists")
    if len(ids) != expected:
        raise DataFormatError(f"{path} lists {len(ids)} statements, the manifest says {expected}")
    statements: dict[str, frozenset[int]] = {}
    for item_id, tag_list in zip(ids, tags, strict=True):
        valid_tags = isinstance(tag_list, list) and all(
            isinstance(t, int) and not isinstance(t, bool) for t in tag_list
        )
        if not isinstance(item_id, str) or not item_id or item_id in statements or not valid_tags:
            raise DataFormatError(f"{path}: invalid or duplicate statement entry {item_id!r}: {tag_list!r}")
        statements[item_id] = frozenset(tag_list)
    return statements
