"""Embedding in parallel partitions on Dask: an `Embedder` whose `encode` splits the texts into contiguous
partitions, embeds each on a worker (each worker builds the configured embedder once, from the settings,
behind the shared embedding cache) and returns the rows in input order. Anything that takes an embedder —
knowledge-base and patient-base builds, the embedding tagger — runs distributed by being given one."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder, validate_texts

if TYPE_CHECKING:
    from dask.distributed import Client

_WORKER_EMBEDDERS: dict[str, Embedder] = {}  # per worker process, by settings


def embed_partition(settings: Settings, texts: list[str]) -> np.ndarray:
    """Runs on a worker: the texts' vectors with the worker's own embedder."""
    from clinrag.embed.factory import build_embedder

    key = json.dumps(settings.model_dump(mode="json"), sort_keys=True, default=str)
    if key not in _WORKER_EMBEDDERS:
        _WORKER_EMBEDDERS[key] = build_embedder(settings)
    return _WORKER_EMBEDDERS[key].encode(texts)


class DistributedEmbedder(Embedder):
    def __init__(self, client: Client, settings: Settings, local: Embedder, *, partition_size: int = 2_000):
        """`local` is the same embedder in this process: it names the vectors (name, dimension) and embeds
        what is too small to be worth shipping (fewer texts than one partition)."""
        super().__init__(batch_size=local.batch_size)
        self.client = client
        self.settings = settings
        self.local = local
        self.name = local.name
        self.dimension = local.dimension
        self.partition_size = partition_size

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        items = validate_texts(texts)
        if len(items) <= self.partition_size:
            return self.local.encode(items)
        count = math.ceil(len(items) / self.partition_size)
        size = math.ceil(len(items) / count)
        parts = [items[start : start + size] for start in range(0, len(items), size)]
        settings = self.client.scatter(self.settings, broadcast=True)
        futures = self.client.map(embed_partition, [settings] * len(parts), parts, pure=False)
        return np.vstack(self.client.gather(futures)).astype(np.float32, copy=False)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:  # encode is overridden; kept for the contract
        return self.local.encode(texts)


@contextmanager
def embedder_for(
    settings: Settings, executor: str = "local", *, scheduler: str | None = None, workers: int = 2
) -> Iterator[Embedder]:
    """The configured embedder: in this process (`local`), or distributed over a Dask cluster (`dask`)."""
    from clinrag.embed.factory import build_embedder
    from clinrag.scale.cluster import check_executor, dask_client

    check_executor(executor)
    local = build_embedder(settings)
    if executor == "local":
        yield local
        return
    with dask_client(scheduler, workers=workers) as client:
        yield DistributedEmbedder(client, settings, local)
