"""The Dask cluster clinrag runs on: an existing scheduler (`tcp://host:8786`), else a LocalCluster of worker
processes bound to 127.0.0.1 for the duration of the command."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from clinrag.core.errors import ConfigError, InvalidInputError

if TYPE_CHECKING:
    from dask.distributed import Client

Executor = str  # "local" (this process) or "dask"
EXECUTORS = ("local", "dask")


def check_executor(executor: str) -> None:
    if executor not in EXECUTORS:
        raise InvalidInputError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")


@contextmanager
def dask_client(
    scheduler: str | None = None, *, workers: int = 2, threads_per_worker: int = 1
) -> Iterator[Client]:
    """A client of the scheduler at `scheduler`, or of a LocalCluster (`workers` processes on 127.0.0.1, no
    dashboard) closed on exit."""
    from dask.distributed import Client, LocalCluster

    if workers < 1:
        raise InvalidInputError(f"workers must be at least 1, got {workers}")
    if scheduler:
        try:
            client = Client(scheduler, timeout="30s")
        except OSError as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def worker_count(client: Client) -> int:
    return max(1, len(client.scheduler_info().get("workers", {})))
