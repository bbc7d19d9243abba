"""Dense vector index on faiss: cosine similarity as inner product of unit vectors, exact up to a size
threshold, HNSW above it, with string ids and atomic persistence."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from clinrag.core.errors import ConfigError, DataFormatError, InvalidInputError
from clinrag.index.hits import Hit
from clinrag.index.store import (
    Manifest,
    atomic_directory,
    read_id_list,
    read_vector_manifest,
    write_json,
    write_manifest,
)
from clinrag.index.validate import check_k, check_new_ids, check_vectors

Structure = Literal["flat", "hnsw"]
VECTORS_FILE = "vectors.faiss"
IDS_FILE = "ids.json"


@dataclass(frozen=True, slots=True)
class DenseConfig:
    """`exact_threshold`: up to this many vectors the index is exact (IndexFlatIP); once an `add` takes it
    past the threshold it is rebuilt as HNSW (IndexHNSWFlat, inner product) with `hnsw_m` links per node,
    `ef_construction` candidates while building and `ef_search` (at least k) while searching."""

    exact_threshold: int = 100_000
    hnsw_m: int = 32
    ef_construction: int = 200
    ef_search: int = 128

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            lowest = 0 if name == "exact_threshold" else 1  # a threshold of 0 means HNSW from the start
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ConfigError(f"DenseConfig.{name} must be an integer >= {lowest}, got {value!r}")


class DenseIndex:
    """Unit vectors under string ids; `search` returns cosine similarities, best first.

    Items can be added but not removed (HNSW graphs do not support removal). Not safe for concurrent `add`
    and `search` from several threads; concurrent searches are fine."""

    def __init__(self, embedder: str, dimension: int, config: DenseConfig | None = None) -> None:
        if not embedder:
            raise ConfigError("a dense index needs the name of the embedder that made its vectors")
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise ConfigError(f"dimension must be a positive integer, got {dimension!r}")
        self.embedder = embedder
        self.dimension = dimension
        self.config = config or DenseConfig()
        self._index: faiss.Index = faiss.IndexFlatIP(dimension)
        self._ids: list[str] = []
        self._positions: dict[str, int] = {}  # string id -> faiss id (= insertion position)

    @property
    def structure(self) -> Structure:
        return "hnsw" if isinstance(self._index, faiss.IndexHNSWFlat) else "flat"

    @property
    def ids(self) -> list[str]:
        """The ids in insertion order (a copy)."""
        return list(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, vectors: np.ndarray, ids: Sequence[str]) -> None:
        """Add unit-length float32 rows under new, unique ids (a duplicate is an `InvalidInputError`)."""
        vectors = check_vectors(vectors, self.dimension)
        new_ids = check_new_ids(ids, len(vectors), self._positions)
        if not new_ids:
            return
        if self.structure == "flat" and len(self._ids) + len(new_ids) > self.config.exact_threshold:
            self._index = self._as_hnsw(self._index)
        self._index.add(vectors)
        start = len(self._ids)
        self._ids.extend(new_ids)
        self._positions.update((item, start + offset) for offset, item in enumerate(new_ids))

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        within: Collection[str] | None = None,
        ef_search: int | None = None,
    ) -> list[list[Hit]]:
        """The k most similar items for each query row (fewer if the index holds fewer), best first.

        `within` restricts the search to those ids; it is computed exactly over just their vectors, which is
        what a small allowed set needs (a filtered HNSW walk loses recall when most nodes are excluded).
        `ef_search` overrides the configured HNSW search breadth for this call (no effect when exact)."""
        queries = check_vectors(queries, self.dimension, what="query vectors")
        k = check_k(k)
        breadth = self.config.ef_search if ef_search is None else check_k(ef_search, name="ef_search")
        if within is not None:
            return self._search_within(queries, k, within)
        if not self._ids:
            return [[] for _ in range(len(queries))]
        k = min(k, len(self._ids))
        params = None
        if self.structure == "hnsw":
            params = faiss.SearchParametersHNSW(efSearch=max(breadth, k))
        scores, positions = self._index.search(queries, k, params=params)
        return [
            self._hits(row_scores, row_positions)
            for row_scores, row_positions in zip(scores, positions, strict=True)
        ]

    def vectors(self, ids: Sequence[str]) -> np.ndarray:
        """The stored vectors of `ids`, in that order."""
        return self._index.reconstruct_batch(self._positions_of(ids))

    def save(self, directory: Path) -> None:
        """Write the index to `directory` atomically (an existing index there is replaced only on success)."""
        with atomic_directory(directory) as staging:
            self.write_into(staging)

    def write_into(self, directory: Path) -> None:
        """Write the index files into an existing, empty directory (used inside a larger atomic save)."""
        faiss.write_index(self._index, str(directory / VECTORS_FILE))
        write_json(directory / IDS_FILE, self._ids)
        params: dict[str, Any] = {"structure": self.structure, **asdict(self.config)}
        manifest = Manifest.new(
            "dense", count=len(self._ids), embedder=self.embedder, dimension=self.dimension, params=params
        )
        write_manifest(directory, manifest)

    @classmethod
    def load(
        cls,
        directory: Path,
        *,
        expect_embedder: str | None = None,
        expect_dimension: int | None = None,
    ) -> DenseIndex:
        """Load a saved index; with `expect_*` given, an index from another embedder or of another dimension
        is refused with `IndexMismatchError`."""
        directory = Path(directory)
        manifest = read_vector_manifest(
            directory, "dense", expect_embedder=expect_embedder, expect_dimension=expect_dimension
        )
        params = dict(manifest.params)
        structure = params.pop("structure", None)
        try:
            config = DenseConfig(**params)
        except (TypeError, ConfigError) as exc:
            raise DataFormatError(f"{directory}: invalid dense index parameters {params}: {exc}") from exc
        index = cls(manifest.embedder, manifest.dimension, config)
        try:
            index._index = faiss.read_index(str(directory / VECTORS_FILE))
        except RuntimeError as exc:  # faiss reports unreadable or truncated files as RuntimeError
            raise DataFormatError(f"cannot read {directory / VECTORS_FILE}: {exc}") from exc
        if index._index.d != manifest.dimension or index._index.ntotal != manifest.count:
            raise DataFormatError(
                f"{directory}: faiss file holds {index._index.ntotal} vectors of dimension {index._index.d}, "
                f"the manifest says {manifest.count} of dimension {manifest.dimension}"
            )
        if index.structure != structure:
            raise DataFormatError(
                f"{directory}: faiss file is {index.structure}, the manifest says {structure}"
            )
        index._ids = read_id_list(directory / IDS_FILE, manifest.count)
        index._positions = {item: position for position, item in enumerate(index._ids)}
        if len(index._positions) != len(index._ids):
            raise DataFormatError(f"{directory / IDS_FILE} contains duplicate ids")
        return index

    def _as_hnsw(self, flat: faiss.Index) -> faiss.IndexHNSWFlat:
        hnsw = faiss.IndexHNSWFlat(self.dimension, self.config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = self.config.ef_construction
        if flat.ntotal:
            hnsw.add(flat.reconstruct_n(0, flat.ntotal))
        return hnsw

    def _search_within(self, queries: np.ndarray, k: int, within: Collection[str]) -> list[list[Hit]]:
        positions = np.unique(self._positions_of(within))
        if positions.size == 0:
            return [[] for _ in range(len(queries))]
        scores = queries @ self._index.reconstruct_batch(positions).T
        k = min(k, positions.size)
        results = []
        for row in scores:
            top = np.argpartition(-row, k - 1)[:k]
            top = top[np.lexsort((positions[top], -row[top]))]
            results.append([Hit(self._ids[positions[i]], float(row[i])) for i in top])
        return results

    def _positions_of(self, ids: Collection[str]) -> np.ndarray:
        if isinstance(ids, str | bytes):
            raise InvalidInputError("ids must be a collection of strings, not a single string")
        missing = [item for item in ids if item not in self._positions]
        if missing:
            raise InvalidInputError(f"{len(missing)} id(s) are not in the index, e.g. {missing[0]!r}")
        return np.fromiter((self._positions[item] for item in ids), dtype=np.int64, count=len(ids))

    def _hits(self, scores: np.ndarray, positions: np.ndarray) -> list[Hit]:
        # faiss pads with -1 when it finds fewer than k (possible with HNSW).
        return [Hit(self._ids[p], float(s)) for s, p in zip(scores, positions, strict=True) if p >= 0]
