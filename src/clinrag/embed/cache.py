"""On-disk embedding cache: SQLite, one row per (embedder name, sha256 of the exact text) → float32 vector."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from clinrag.core.errors import ConfigError
from clinrag.embed.base import Embedder, validate_texts

# Stays below SQLite's bound-parameter limit on old builds (999) with room for the model name.
_CHUNK = 900


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its exact UTF-8 bytes (no normalisation, so no false hits)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """(model, text_sha256) → vector. One connection per thread; WAL so readers never block the writer."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the cache directory {self.path.parent}: {exc}") from exc
        self._local = threading.local()
        with self._connection() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
                "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_sha256)) WITHOUT ROWID"
            )

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(self.path, timeout=30)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot open the embedding cache {self.path}: {exc}") from exc
            self._local.db = db
        return db

    def get_many(self, model: str, keys: Iterable[str], dimension: int | None) -> dict[str, np.ndarray]:
        """The cached vectors among `keys`; with a dimension given, rows of another one count as absent."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        db = self._connection()
        dim_clause = "" if dimension is None else f" AND dim = {int(dimension)}"
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                f"SELECT text_sha256, vector FROM embeddings "
                f"WHERE model = ?{dim_clause} AND text_sha256 IN ({marks})",
                (model, *chunk),
            )
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype="<f4")
        return found

    def put_many(self, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Stores all vectors in one transaction."""
        rows = [
            (model, key, int(vector.shape[0]), np.asarray(vector, dtype="<f4").tobytes())
            for key, vector in items
        ]
        with self._connection() as db:
            db.executemany(
                "INSERT OR REPLACE INTO embeddings (model, text_sha256, dim, vector) VALUES (?, ?, ?, ?)",
                rows,
            )

    def __len__(self) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]

    def close(self) -> None:
        """Closes this thread's connection (others close when their threads end)."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


class CachedEmbedder(Embedder):
    """Wraps an embedder: only texts missing from the cache reach it; output order is the input order.

    `hits` counts inputs answered without computing (from the cache, or a repeat within the same call);
    `misses` counts distinct texts sent to the wrapped embedder."""

    def __init__(self, inner: Embedder, path: Path | EmbeddingCache) -> None:
        super().__init__(inner.batch_size)
        self.inner = inner
        self.name = inner.name
        self.cache = path if isinstance(path, EmbeddingCache) else EmbeddingCache(path)
        self.hits = 0
        self.misses = 0
        self._counter_lock = threading.Lock()

    @property
    def dimension(self) -> int:  # type: ignore[override]
        return self.inner.dimension

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode(texts)

    @property
    def known_dimension(self) -> int | None:
        return self.inner.known_dimension

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        items = validate_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        keys = [text_key(t) for t in items]
        # A remote embedder may not know its dimension yet; asking would cost a request, so read first.
        dimension = self.inner.known_dimension
        found = self.cache.get_many(self.name, keys, dimension)
        if dimension is None and len({v.shape[0] for v in found.values()}) > 1:
            dimension = self.inner.dimension
        sent = self._fill(keys, items, found, dimension, progress)
        if dimension is None and sent:
            # Rows cached under this name by a model of another dimension are recomputed.
            sent += self._fill(keys, items, found, self.inner.dimension, progress)
        with self._counter_lock:
            self.misses += sent
            self.hits += len(items) - sent
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def _fill(
        self,
        keys: list[str],
        items: list[str],
        found: dict[str, np.ndarray],
        dimension: int | None,
        progress: bool,
    ) -> int:
        """Computes and stores what `found` lacks (or holds at another dimension); returns how many texts."""
        todo = {
            key: text
            for key, text in zip(keys, items, strict=True)
            if key not in found or (dimension is not None and found[key].shape[0] != dimension)
        }
        if todo:
            fresh = list(zip(todo, self.inner.encode(list(todo.values()), progress=progress), strict=True))
            self.cache.put_many(self.name, fresh)
            found.update(fresh)
        return len(todo)

    def reset_counters(self) -> None:
        with self._counter_lock:
            self.hits = self.misses = 0

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, path={str(self.cache.path)!r})"
