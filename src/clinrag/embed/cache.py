"""On-disk embedding cache: SQLite, one row per (embedder name, sha256 of the exact text) → float32 vector."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.core.sqlite import ThreadLocalSQLite
from clinrag.embed.base import Embedder, validate_texts

# Stays below SQLite's bound-parameter limit on old builds (999) with room for the model name.
_CHUNK = 900


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its exact UTF-8 bytes (no normalisation, so no false hits)."""
    try:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except UnicodeEncodeError as exc:  # lone surrogates: undecodable bytes kept by Python's surrogateescape
        raise InvalidInputError(f"text to embed is not valid Unicode (at character {exc.start})") from None


class EmbeddingCache:
    """(model, text_sha256) → float32 vector in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = ThreadLocalSQLite(
            self.path,
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
            "vector BLOB NOT NULL, PRIMARY KEY (model, text_sha256)) WITHOUT ROWID",
            "embedding cache",
        )

    def get_many(self, model: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors among `keys`."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        db = self._db.connection()
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = db.execute(
                f"SELECT text_sha256, vector FROM embeddings WHERE model = ? AND text_sha256 IN ({marks})",
                (model, *chunk),
            )
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype="<f4")
        return found

    def put_many(self, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Stores all vectors in one transaction."""
        rows = [(model, key, np.asarray(vector, dtype="<f4").tobytes()) for key, vector in items]
        with self._db.connection() as db:
            db.executemany(
                "INSERT OR REPLACE INTO embeddings (model, text_sha256, vector) VALUES (?, ?, ?)", rows
            )

    def __len__(self) -> int:
        return self._db.connection().execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]


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

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        items = validate_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        keys = [text_key(t) for t in items]
        # Read the cache before touching the inner embedder: a remote one that does not know its dimension
        # yet would otherwise spend a request to learn it.
        found = self.cache.get_many(self.name, keys)
        todo = {key: text for key, text in zip(keys, items, strict=True) if key not in found}
        if todo:
            fresh = list(zip(todo, self.inner.encode(list(todo.values()), progress=progress), strict=True))
            self.cache.put_many(self.name, fresh)
            found.update(fresh)
        with self._counter_lock:
            self.misses += len(todo)
            self.hits += len(items) - len(todo)
        return np.stack([found[key] for key in keys]).astype(np.float32, copy=False)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, path={str(self.cache.path)!r})"
