"""Sharded dense search (scatter-gather) against the single exact index: the same top-k, in process and with
the shards held by Dask workers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.sharded import ShardedDenseIndex

EXACT = DenseConfig(exact_threshold=1_000_000)


def unit(rows: int, seed: int, dimension: int = 64) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(rows, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def items() -> tuple[np.ndarray, list[str]]:
    return unit(6_000, seed=1), [f"item-{i}" for i in range(6_000)]


def single_top(vectors: np.ndarray, ids: list[str], queries: np.ndarray, k: int) -> list[list[str]]:
    index = DenseIndex("test", vectors.shape[1], EXACT)
    index.add(vectors, ids)
    return [[hit.id for hit in row] for row in index.search(queries, k)]


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_sharded_search_equals_the_single_index(items, shards) -> None:
    vectors, ids = items
    queries = unit(1_000, seed=2)
    sharded = ShardedDenseIndex.build(vectors, ids, shards, embedder="test", config=EXACT)
    assert len(sharded) == len(ids) and len(sharded.shards) == shards
    found = [[hit.id for hit in row] for row in sharded.search(queries, 10)]
    assert found == single_top(vectors, ids, queries, 10)


def test_shards_built_and_searched_on_dask_workers(client, items) -> None:
    vectors, ids = items
    queries = unit(500, seed=3)
    sharded = ShardedDenseIndex.build(vectors, ids, 4, embedder="test", config=EXACT, client=client)
    remote = sharded.serve(client)
    found = [[hit.id for hit in row] for row in remote.search(queries, 5)]
    assert found == single_top(vectors, ids, queries, 5)
    scores = [[hit.score for hit in row] for row in remote.search(queries, 5)]
    assert all(a >= b for row in scores for a, b in itertools.pairwise(row))


def test_a_shard_count_below_one_is_refused(items) -> None:
    vectors, ids = items
    with pytest.raises(InvalidInputError, match="shards must be at least 1"):
        ShardedDenseIndex.build(vectors, ids, 0, embedder="test")
