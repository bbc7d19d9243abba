"""Input checks shared by the indexes; every failure is an `InvalidInputError` that says what to fix."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import numpy as np

from clinrag.core.errors import InvalidInputError

# Vectors must already be L2-normalised (Embedder.encode guarantees it): inner product is then cosine.
# They are rejected rather than silently normalised, because a non-unit vector means the caller mixed up
# embedders or post-processed them, and normalising would hide that.
NORM_TOLERANCE = 1e-3


def check_vectors(vectors: np.ndarray, dimension: int, *, what: str = "vectors") -> np.ndarray:
    """`vectors` as a C-contiguous (n, dimension) float32 matrix of finite unit-length rows."""
    if not isinstance(vectors, np.ndarray):
        raise InvalidInputError(f"{what} must be a numpy array, got {type(vectors).__name__}")
    if vectors.ndim != 2:
        raise InvalidInputError(f"{what} must be a 2-D (n, {dimension}) array, got shape {vectors.shape}")
    if vectors.shape[1] != dimension:
        raise InvalidInputError(f"{what} have dimension {vectors.shape[1]}, the index expects {dimension}")
    if vectors.dtype != np.float32:
        raise InvalidInputError(f"{what} must be float32, got {vectors.dtype} (use .astype(np.float32))")
    if not np.isfinite(vectors).all():
        row = int(np.argmax(~np.isfinite(vectors).all(axis=1)))
        raise InvalidInputError(f"{what} row {row} contains NaN or infinity")
    norms = np.linalg.norm(vectors, axis=1)
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        row = int(np.argmax(off))
        raise InvalidInputError(
            f"{what} must be L2-normalised; row {row} has norm {norms[row]:.6f} (normalise with the embedder)"
        )
    return np.ascontiguousarray(vectors)


def check_new_ids(ids: Sequence[str], rows: int, existing: Collection[str]) -> list[str]:
    """`ids` as a list of `rows` non-empty strings, unique among themselves and not already in `existing`."""
    if isinstance(ids, str | bytes):
        raise InvalidInputError("ids must be a sequence of strings, not a single string")
    items = list(ids)
    if len(items) != rows:
        raise InvalidInputError(f"got {len(items)} ids for {rows} rows")
    seen: set[str] = set()
    for position, item in enumerate(items):
        if not isinstance(item, str) or not item:
            raise InvalidInputError(f"id at position {position} is {item!r}, not a non-empty string")
        if item in seen or item in existing:
            raise InvalidInputError(f"duplicate id {item!r} (position {position})")
        seen.add(item)
    return items


def check_k(k: int, *, name: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def check_tag_sets(tag_sets: Sequence[Iterable[int]], rows: int, *, what: str) -> list[frozenset[int]]:
    """One frozenset of int tags per row (bools are refused: they are ints by accident only)."""
    if isinstance(tag_sets, str | bytes):
        raise InvalidInputError(f"{what} must be a sequence of tag collections")
    items = list(tag_sets)
    if len(items) != rows:
        raise InvalidInputError(f"got {len(items)} {what} for {rows} rows")
    checked: list[frozenset[int]] = []
    for position, tags in enumerate(items):
        if isinstance(tags, str | bytes):
            raise InvalidInputError(
                f"{what} at position {position} must be a collection of ints, got {tags!r}"
            )
        try:
            tag_set = frozenset(tags)
        except TypeError as exc:
            raise InvalidInputError(
                f"{what} at position {position} must be a collection of ints, got {tags!r}"
            ) from exc
        for tag in tag_set:
            if isinstance(tag, bool) or not isinstance(tag, int | np.integer):
                raise InvalidInputError(f"{what} at position {position} holds {tag!r}, not an int tag")
        checked.append(frozenset(int(t) for t in tag_set))
    return checked
