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
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.results import RunDirectory
from clinrag.methods.base import Method

if TYPE_CHECKING:
    from dask.distributed import Client

    from clinrag.eval.runner import RunRequest

PARTITIONS_DIR = "partitions"
_WORKER_METHODS: dict[str, tuple[Method, dict[str, Case]]] = {}  # per worker process, by run directory


def merge_partitions(run_dir: RunDirectory, case_order: list[str]) -> int:
    """Append the results found in partition files to results.jsonl (in `case_order`, each case once, none
    already there), then remove the partition files; returns how many were added."""
    folder = run_dir.path / PARTITIONS_DIR
    if not folder.is_dir():
        return 0
    done = {result.case_id for result in run_dir.results()}
    position = {case_id: index for index, case_id in enumerate(case_order)}
    found = {}
    for part in sorted(folder.iterdir()):
        for result in RunDirectory(part).results():
            if result.case_id in position and result.case_id not in done:
                found.setdefault(result.case_id, result)
    for result in sorted(found.values(), key=lambda r: position[r.case_id]):
        run_dir.append(result)
    shutil.rmtree(folder)
    return len(found)


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
    folder = run_dir.path / PARTITIONS_DIR
    futures = [
        client.submit(
            answer_partition,
            settings,
            request,
            [case.id for case in todo[start : start + size]],
            str(folder / f"part-{run_id}-{start // size:05d}"),
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
        merge_partitions(run_dir, [case.id for case in todo])
