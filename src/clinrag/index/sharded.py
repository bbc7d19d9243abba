"""Dense search over shards: the items split into contiguous partitions, one `DenseIndex` per partition;
a query goes to every shard (scatter) and the shards' top-k are merged by score (gather). With exact shards
the result is the single exact index's top-k. Shards can be built and served on Dask workers, where each
stays in a worker's memory and is searched there."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.hits import Hit
from clinrag.index.validate import check_k

if TYPE_CHECKING:
    from dask.distributed import Client, Future


def build_shard(embedder: str, vectors: np.ndarray, ids: list[str], config: DenseConfig | None) -> DenseIndex:
    shard = DenseIndex(embedder, vectors.shape[1], config)
    shard.add(vectors, ids)
    return shard


def search_shard(shard: DenseIndex, queries: np.ndarray, k: int) -> list[list[Hit]]:
    return shard.search(queries, k)


def merge_hits(per_shard: Sequence[list[list[Hit]]], k: int) -> list[list[Hit]]:
    """Per query, the k best hits over all shards (score descending; equal scores in shard order)."""
    merged = []
    for rows in zip(*per_shard, strict=True):
        ranked = heapq.merge(*rows, key=lambda hit: -hit.score)
        merged.append([hit for _, hit in zip(range(k), ranked, strict=False)])
    return merged


def _partitions(count: int, shards: int) -> list[slice]:
    if shards < 1:
        raise InvalidInputError(f"shards must be at least 1, got {shards}")
    size = math.ceil(count / shards) if count else 1
    return [slice(start, min(start + size, count)) for start in range(0, count, size)]


class ShardedDenseIndex:
    def __init__(self, shards: Sequence[DenseIndex]) -> None:
        if not shards:
            raise InvalidInputError("a sharded index needs at least one shard")
        self.shards = list(shards)

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        ids: Sequence[str],
        shards: int,
        *,
        embedder: str,
        config: DenseConfig | None = None,
        client: Client | None = None,
    ) -> ShardedDenseIndex:
        """`shards` contiguous partitions of the items, each indexed on its own — on the Dask workers when a
        client is given."""
        if len(vectors) != len(ids):
            raise InvalidInputError(f"{len(vectors)} vectors for {len(ids)} ids")
        parts = _partitions(len(ids), shards)
        arguments = [(vectors[part], list(ids[part])) for part in parts]
        if client is None:
            return cls([build_shard(embedder, v, i, config) for v, i in arguments])
        futures = [client.submit(build_shard, embedder, v, i, config, pure=False) for v, i in arguments]
        return cls(client.gather(futures))

    def __len__(self) -> int:
        return sum(len(shard) for shard in self.shards)

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        k = check_k(k)
        return merge_hits([search_shard(shard, queries, k) for shard in self.shards], k)

    def serve(self, client: Client) -> RemoteShards:
        """The shards placed on the workers (one each, round robin) to be searched there."""
        workers = list(client.scheduler_info()["workers"])
        placed = [
            client.scatter(shard, workers=[workers[i % len(workers)]]) for i, shard in enumerate(self.shards)
        ]
        return RemoteShards(client, placed)


class RemoteShards:
    """Shards held by Dask workers: each query batch is searched on every shard where it lives."""

    def __init__(self, client: Client, shards: list[Future]) -> None:
        self.client = client
        self.shards = shards

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        k = check_k(k)
        futures = [self.client.submit(search_shard, shard, queries, k, pure=False) for shard in self.shards]
        return merge_hits(self.client.gather(futures), k)
