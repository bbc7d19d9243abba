"""Deterministic case sampling and train/test splits.

Membership is decided by a hash of (seed, item key), never by position, so the same seed picks the same
items whatever order they arrive in, a smaller sample is a subset of a larger one with the same seed, and a
dataset that gains items keeps its earlier picks where the hash ranks them first. Results keep the input
order."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case

T = TypeVar("T")


def _rank(seed: int, key: str) -> bytes:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).digest()


def _item_id(item: Any) -> str:
    key = getattr(item, "id", None)
    if not isinstance(key, str):
        raise InvalidInputError(f"cannot key {type(item).__name__}: pass key= (items have no string .id)")
    return key


def _keys(items: Sequence[T], key: Callable[[T], str]) -> list[str]:
    keys = [key(item) for item in items]
    duplicates = [k for k, count in Counter(keys).items() if count > 1]
    if duplicates:
        raise InvalidInputError(f"duplicate keys cannot be sampled deterministically: {duplicates[:5]}")
    return keys


def _chosen(keys: list[str], count: int, seed: int) -> set[str]:
    return set(sorted(keys, key=lambda k: _rank(seed, k))[:count])


def sample_cases(cases: Sequence[Case], limit: int | None, seed: int) -> list[Case]:
    """`limit` cases chosen by seed (all of them when `limit` is None or not smaller than the count), in
    input order. A limit below 1 raises `InvalidInputError`, as do duplicate case ids."""
    if limit is not None and limit < 1:
        raise InvalidInputError(f"limit must be at least 1, got {limit}")
    keys = _keys(cases, _item_id)
    if limit is None or limit >= len(cases):
        return list(cases)
    chosen = _chosen(keys, limit, seed)
    return [case for case, key in zip(cases, keys, strict=True) if key in chosen]


def train_test_split(
    items: Sequence[T], test_fraction: float, seed: int, key: Callable[[T], str] = _item_id
) -> tuple[list[T], list[T]]:
    """(train, test), disjoint and together all items, both in input order. The test part holds
    round(n × test_fraction) items, at least 1 and at most n − 1; `key` names an item (default: its `.id`)."""
    if not 0.0 < test_fraction < 1.0:
        raise InvalidInputError(f"test_fraction must be between 0 and 1 (exclusive), got {test_fraction}")
    if len(items) < 2:
        raise InvalidInputError(f"need at least 2 items to split, got {len(items)}")
    keys = _keys(items, key)
    size = min(len(items) - 1, max(1, round(len(items) * test_fraction)))
    chosen = _chosen(keys, size, seed)
    train = [item for item, k in zip(items, keys, strict=True) if k not in chosen]
    test = [item for item, k in zip(items, keys, strict=True) if k in chosen]
    return train, test
