"""An evaluation partitioned across Dask workers.

The cases still to answer are split into contiguous partitions; each partition is a task that builds the
method on its worker (once per worker process and run: its own model client, the shared response cache of
the settings), answers its cases and appends each result, fsync'd, to its own file under
RUN/partitions/. When the tasks end the partition files are merged into RUN/results.jsonl in case order and
removed. A crash loses at most the cases in flight: the next run merges whatever partition files it finds
before deciding what is left to answer, exactly as a single-process run resumes from results.jsonl."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.results import RunDirectory
from clinrag.methods.base import Method

if TYPE_CHECKING:
    from dask.distributed import Client

    from clinrag.eval.runner import EvalRunner, RunRequest

_WORKER_METHODS: dict[str, tuple[Method, dict[str, Case]]] = {}  # per worker process, by run directory


@dataclass
class DaskExecutor:
    """Partitions on the Dask cluster at `scheduler`, else on a LocalCluster of `workers` processes on
    127.0.0.1; `partitions` of them (default 4 per worker)."""

    scheduler: str | None = None
    workers: int = 2
    partitions: int | None = None

    async def answer(
        self,
        runner: EvalRunner,
        request: RunRequest,
        method: Method,
        todo: list[Case],
        run_dir: RunDirectory,
        run_id: str,
    ) -> None:
        await asyncio.to_thread(self._answer, runner, request, todo, run_dir, run_id)

    def _answer(
        self, runner: EvalRunner, request: RunRequest, todo: list[Case], run_dir: RunDirectory, run_id: str
    ) -> None:
        from clinrag.scale.cluster import dask_client

        with runner.progress_bar() as progress, dask_client(self.scheduler, workers=self.workers) as client:
            bar = progress.add_task(f"{request.method} on dask", total=len(todo))
            run_partitioned(
                client,
                runner.settings,
                request,
                todo,
                run_dir,
                run_id,
                partitions=self.partitions,
                on_progress=lambda n: progress.advance(bar, n),
            )


def answer_partition(
    settings: Settings, request: RunRequest, case_ids: list[str], part: str, run_id: str
) -> int:
    """Runs on a worker: answer `case_ids` into the partition directory `part`; returns how many."""
    from clinrag.eval.runner import EvalRunner

    runner = EvalRunner(settings, progress=False)
    method, cases = _worker_method(runner, request)
    part_dir = RunDirectory(Path(part))
    part_dir.path.mkdir(parents=True, exist_ok=True)
    todo = [cases[case_id] for case_id in case_ids]
    asyncio.run(runner.answer_all(method, todo, part_dir, run_id, request.concurrency))
    return len(todo)


def _worker_method(runner, request: RunRequest) -> tuple[Method, dict[str, Case]]:
    key = str(Path(request.out).resolve())
    if key not in _WORKER_METHODS:
        prepared = runner.prepare(request)
        _WORKER_METHODS[key] = (prepared.method, {case.id: case for case in prepared.cases})
    return _WORKER_METHODS[key]


def run_partitioned(
    client: Client,
    settings: Settings,
    request: RunRequest,
    todo: list[Case],
    run_dir: RunDirectory,
    run_id: str,
    *,
    partitions: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> None:
    """Answer `todo` on the cluster; the results end up in `run_dir`'s results.jsonl."""
    from dask.distributed import as_completed

    from clinrag.scale.cluster import worker_count

    if not todo:
        return
    count = partitions or 4 * worker_count(client)
    size = math.ceil(len(todo) / max(1, min(count, len(todo))))
    futures = [
        client.submit(
            answer_partition,
            settings,
            request,
            [case.id for case in todo[start : start + size]],
            str(run_dir.partition(f"part-{run_id}-{start // size:05d}").path),
            run_id,
            pure=False,
        )
        for start in range(0, len(todo), size)
    ]
    try:
        for future in as_completed(futures):
            answered = future.result()
            if on_progress is not None:
                on_progress(answered)
    finally:
        run_dir.merge_partitions([case.id for case in todo])
