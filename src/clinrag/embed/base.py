"""The Embedder contract: texts in, a float32 matrix of unit-length rows out, computed in batches."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
from tqdm import tqdm

from clinrag.core.errors import ConfigError, InvalidInputError, ModelUnavailableError


class Embedder(ABC):
    """Subclasses set `name` and `dimension` and implement `_embed_batch`; `encode` does the rest."""

    name: str
    dimension: int
    # Batching texts of similar length wastes less compute on padding (local models only).
    sort_by_length: bool = False

    def __init__(self, batch_size: int) -> None:
        if batch_size < 1:
            raise ConfigError(f"embedding batch size must be at least 1, got {batch_size}")
        self.batch_size = batch_size

    @abstractmethod
    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """Raw (not necessarily normalised) vectors for at most `batch_size` validated texts."""

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """A (len(texts), dimension) float32 matrix with L2-normalised rows, in input order."""
        items = validate_texts(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = np.arange(len(items))
        if self.sort_by_length:
            order = np.argsort([len(t) for t in items], kind="stable")
        out: np.ndarray | None = None
        show = progress and len(items) > self.batch_size
        with tqdm(total=len(items), unit="text", desc=f"embedding ({self.name})", disable=not show) as bar:
            for start in range(0, len(items), self.batch_size):
                rows = order[start : start + self.batch_size]
                vectors = self._checked(self._embed_batch([items[i] for i in rows]), len(rows))
                if out is None:  # a remote backend may learn its dimension from the first reply
                    out = np.empty((len(items), self.dimension), dtype=np.float32)
                out[rows] = vectors
                bar.update(len(rows))
        assert out is not None
        return out

    def _checked(self, vectors: np.ndarray, expected_rows: int) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (expected_rows, self.dimension):
            raise ModelUnavailableError(
                f"embedder {self.name} returned shape {vectors.shape}, "
                f"expected ({expected_rows}, {self.dimension})"
            )
        return l2_normalize(vectors, where=self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, batch_size={self.batch_size})"


def validate_texts(texts: Sequence[str]) -> list[str]:
    """The texts as a list; a non-string or blank entry is an `InvalidInputError` that names its index."""
    if isinstance(texts, str | bytes):
        raise InvalidInputError("encode() takes a sequence of strings, not a single string")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(f"text at index {index} is {type(text).__name__}, not str")
        if not text.strip():
            raise InvalidInputError(f"text at index {index} is empty or whitespace only")
    return items


def l2_normalize(vectors: np.ndarray, *, where: str) -> np.ndarray:
    """Rows scaled to unit length; a zero or non-finite row means a broken backend and is never kept."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    bad = ~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0)
    if bad.any():
        raise ModelUnavailableError(
            f"embedder {where} returned a zero or non-finite vector at batch row {int(np.argmax(bad))}"
        )
    return (vectors / norms).astype(np.float32, copy=False)
