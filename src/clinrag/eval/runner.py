"""The evaluation runner: a method over a dataset's sampled cases, concurrently, resumable.

Each finished case is appended (fsync'd) to results.jsonl the moment it finishes, so a crash or a kill loses
at most the cases in flight; running the same command again skips every case already in the file. The
patient base a method may use is the dataset's records minus the sampled cases (leave-sample-out), so no
case can retrieve itself. Likewise for knowledge: the cases carry their provenance (`Case.meta`), which the
methods' retrievers leave out, and a run whose corpus shares a file with the dataset is refused unless
`allow_overlap` (see `clinrag.eval.validity`); run.json records the corpora and any overlap.

An outage is not a result: a case whose backend is unreachable, times out or keeps failing
(`ModelUnavailableError`, `ModelAuthError`, `GraphUnavailableError`) is left unanswered for the next run to
retry, and `max_outages` outages in a row stop the run (`RunStoppedError`). The cases in flight when a
backend goes down fail together and count as one outage (`OutageCount`). Only the method's own failures (an
unparseable answer, bad input) are stored as the case's result. One process at a time runs in a run
directory (`RunDirectory.lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from clinrag.core.errors import (
    ClinragError,
    DataFormatError,
    GraphUnavailableError,
    InvalidInputError,
    ModelAuthError,
    ModelUnavailableError,
    RunStoppedError,
)
from clinrag.core.models import Answer, Case
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.eval.datasets import Dataset, load_dataset
from clinrag.eval.metrics import score_case
from clinrag.eval.results import CaseResult, Corpus, RunConfig, RunDirectory, RunSummary
from clinrag.eval.sampling import sample_cases
from clinrag.eval.summary import summarize
from clinrag.eval.validity import check_overlap, dataset_files, method_corpora
from clinrag.llm.base import ChatModel
from clinrag.methods.base import Method, MethodContext
from clinrag.methods.registry import get_method


@dataclass
class RunRequest:
    dataset: str
    method: str
    out: Path
    data_path: Path | None = None
    limit: int | None = None
    seed: int = 0
    concurrency: int = 4
    params: dict[str, Any] = field(default_factory=dict)
    # A corpus may share files with the dataset (each case's own record is still left out of retrieval).
    allow_overlap: bool = False
    max_outages: int = 3  # backend outages in a row that stop the run (see OutageCount)


@dataclass
class PreparedRun:
    method: Method
    cases: list[Case]
    dataset: str  # the dataset's name
    corpora: list[Corpus] = field(default_factory=list)
    overlap: list[str] = field(default_factory=list)  # corpus sources that are files of the dataset
    data_report: str = ""  # the loader's report (records read and skipped)


@dataclass
class RunOutcome:
    summary: RunSummary
    skipped: int  # cases already finished by an earlier run of the same directory
    ran: int
    unanswered: int = 0  # cases left for the next run (their backend was unavailable)
    data_report: str = ""


class Executor(Protocol):
    """Answers the cases a run has left, appending each result to the run directory as it finishes."""

    async def answer(
        self,
        runner: EvalRunner,
        request: RunRequest,
        method: Method,
        todo: list[Case],
        run_dir: RunDirectory,
        run_id: str,
    ) -> None: ...


class LocalExecutor:
    """This process: `request.concurrency` cases at a time."""

    async def answer(
        self,
        runner: EvalRunner,
        request: RunRequest,
        method: Method,
        todo: list[Case],
        run_dir: RunDirectory,
        run_id: str,
    ) -> None:
        await runner.answer_all(method, todo, run_dir, run_id, request.concurrency, request.max_outages)


class EvalRunner:
    def __init__(
        self,
        settings: Settings,
        *,
        progress: bool = True,
        chat_model_factory: Callable[[Settings], ChatModel] | None = None,
        embedder_factory: Callable[[Settings], Embedder] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.in_flight = 0  # cases being answered now, for the stop message
        self.settings = settings
        self.progress = progress
        self.chat_model_factory = chat_model_factory
        self.embedder_factory = embedder_factory
        self.executor = executor or LocalExecutor()

    def run(self, request: RunRequest) -> RunOutcome:
        return asyncio.run(self._run_until_stopped(request))

    async def _run_until_stopped(self, request: RunRequest) -> RunOutcome:
        # SIGTERM cancels the run like Ctrl-C does: finished cases are already on disk.
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        # Not possible off the main thread or on platforms without loop signal handlers: then SIGTERM
        # simply ends the process, which loses nothing either.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, self._stop, task)
        return await self.arun(request)

    def _stop(self, task: asyncio.Task[RunOutcome] | None) -> None:
        print(
            f"SIGTERM: stopping, cancelling the {self.in_flight} cases in flight (their model calls are "
            "abandoned; a call running in a worker thread finishes its current step first)",
            file=sys.stderr,
            flush=True,
        )
        if task is not None:
            task.cancel()

    async def arun(self, request: RunRequest) -> RunOutcome:
        if request.concurrency < 1:
            raise InvalidInputError(f"concurrency must be at least 1, got {request.concurrency}")
        if request.max_outages < 1:
            raise InvalidInputError(f"max_outages must be at least 1, got {request.max_outages}")
        prepared = self.prepare(request)
        run_dir = RunDirectory(request.out)
        if run_dir.is_foreign():
            raise InvalidInputError(
                f"{run_dir.path} holds run files but no run.json (not a run clinrag started, or its run.json "
                "was removed): it is not adopted; choose another --out"
            )
        with run_dir.lock():
            return await self._run_locked(request, prepared, run_dir)

    async def _run_locked(
        self, request: RunRequest, prepared: PreparedRun, run_dir: RunDirectory
    ) -> RunOutcome:
        method, cases = prepared.method, prepared.cases
        model = getattr(method, "model", None)
        model_name, scoring = (model.model, model.scoring_name) if model is not None else ("none", "")
        config = self._config(request, prepared, model_name, scoring)
        self._prepare(run_dir, config)
        run_dir.merge_partitions([case.id for case in cases])  # what a crashed partitioned run finished
        done = {r.case_id for r in run_dir.results()}
        todo = [case for case in cases if case.id not in done]
        run_id = uuid.uuid4().hex[:12]
        earlier_wall_s = self._earlier_wall_s(run_dir)
        started = time.perf_counter()
        try:
            await self.executor.answer(self, request, method, todo, run_dir, run_id)
        finally:
            # Also when stopped: the summary then describes what is finished so far.
            wall_s = earlier_wall_s + time.perf_counter() - started
            summary = summarize(config, run_dir.results(), wall_s)
            run_dir.write_summary(summary)
        return RunOutcome(
            summary=summary,
            skipped=len(cases) - len(todo),
            ran=len(todo),
            unanswered=summary.n_cases - summary.n_finished,
            data_report=prepared.data_report,
        )

    @staticmethod
    def _earlier_wall_s(run_dir: RunDirectory) -> float:
        """The time of the invocations that ran before (a resumed run adds its own); a torn summary.json is
        only a lost total, rewritten at the end of this run."""
        if not run_dir.has_summary():
            return 0.0
        try:
            return run_dir.summary().wall_s
        except DataFormatError:
            return 0.0

    def prepare(self, request: RunRequest) -> PreparedRun:
        """The method built for the run and the sampled cases (the same on the driver and every worker); a
        corpus that shares files with the dataset is an `InvalidInputError` unless `allow_overlap`."""
        spec = get_method(request.method)
        dataset = load_dataset(request.dataset, request.data_path, data_dir=self.settings.data_dir)
        cases = sample_cases(dataset.cases, request.limit, request.seed)
        if not cases:
            raise InvalidInputError(f"dataset {request.dataset!r} has no cases to evaluate")
        context = self._context(request, dataset, cases)
        method = spec.build(context)
        corpora = method_corpora(context)
        overlap = check_overlap(corpora, dataset_files(dataset), allow=request.allow_overlap)
        return PreparedRun(method, cases, dataset.name, corpora, overlap, dataset.report)

    def _context(self, request: RunRequest, dataset: Dataset, cases: list[Case]) -> MethodContext:
        return MethodContext(
            settings=self.settings,
            params=request.params,
            experience=dataset.experience(exclude=[case.id for case in cases]),
            labels=dataset.labels,
            chat_model_factory=self.chat_model_factory,
            embedder_factory=self.embedder_factory,
        )

    @staticmethod
    def _config(request: RunRequest, prepared: PreparedRun, model_name: str, scoring: str) -> RunConfig:
        return RunConfig(
            dataset=prepared.dataset,
            method=request.method,
            method_params=request.params,
            data_path=str(request.data_path or ""),
            limit=request.limit,
            seed=request.seed,
            case_ids=[case.id for case in prepared.cases],
            model=model_name,
            scoring=scoring,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            corpora=prepared.corpora,
            overlap=prepared.overlap,
            allow_overlap=request.allow_overlap,
            data_report=prepared.data_report,
        )

    @staticmethod
    def _prepare(run_dir: RunDirectory, config: RunConfig) -> None:
        """A new directory gets the config; an existing one must hold the same run to be resumed."""
        if not run_dir.exists():
            run_dir.write_config(config)
            return
        previous = run_dir.config()
        same = ("dataset", "method", "method_params", "case_ids", "model", "scoring")
        differing = [name for name in same if getattr(previous, name) != getattr(config, name)]
        if differing:
            raise InvalidInputError(
                f"{run_dir.path} holds another run ({previous.method} on {previous.dataset}; differs in "
                f"{', '.join(differing)}): choose another --out directory"
            )
        run_dir.drop_torn_tail()

    def progress_bar(self) -> Progress:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        return Progress(*columns, disable=not self.progress, transient=False)

    async def answer_all(
        self,
        method: Method,
        cases: list[Case],
        run_dir: RunDirectory,
        run_id: str,
        concurrency: int,
        max_outages: int = 3,
    ) -> None:
        """Answer `cases`, `concurrency` at a time, appending each result to `run_dir` as it finishes; a case
        whose backend is unavailable is left unanswered, and `max_outages` outages in a row stop the run with
        `RunStoppedError` (the cases in flight are cancelled)."""
        semaphore = asyncio.Semaphore(concurrency)
        outages = OutageCount()

        with self.progress_bar() as progress:
            bar = progress.add_task(f"{method.name}", total=len(cases))

            async def one(case: Case) -> None:
                async with semaphore:
                    self.in_flight += 1
                    began = outages.counted
                    try:
                        result = await self._answer_one(method, case, run_id)
                    except _OUTAGES as exc:
                        if outages.failed(began, exc) >= max_outages:
                            raise RunStoppedError(_stop_message(outages.in_a_row, run_dir)) from exc
                        return
                    finally:
                        self.in_flight -= 1
                outages.answered()
                # Appends happen on the event loop thread, one at a time: lines never interleave.
                run_dir.append(result)
                progress.advance(bar)

            tasks = [asyncio.ensure_future(one(case)) for case in cases]
            try:
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    async def _answer_one(method: Method, case: Case, run_id: str) -> CaseResult:
        started = time.perf_counter()
        try:
            answer = await method.aanswer(case)
        except _OUTAGES:
            raise
        except ClinragError as exc:
            # A typed failure of the method (unparseable answer, bad input) is this case's result.
            answer = Answer(case_id=case.id, method=method.name, error=f"{type(exc).__name__}: {exc}")
        scores, turns = score_case(case, answer)
        return CaseResult(
            case_id=case.id,
            task=case.task,
            gold=case.gold,
            answer=answer,
            scores=scores,
            turns=turns,
            elapsed_s=time.perf_counter() - started,
            run_id=run_id,
        )


# Failures of the infrastructure, not of the method: never stored as a case's result.
_OUTAGES = (ModelUnavailableError, ModelAuthError, GraphUnavailableError)


@dataclass
class OutageCount:
    """Backend outages in a row. When a backend goes down, every case in flight fails with it: a failed case
    is a new outage only if it began after the last outage was counted, so the cases in flight count once
    whatever the concurrency (at concurrency 1, each failed case is an outage)."""

    counted: int = 0  # outages counted in this run; a case notes it when it begins
    in_a_row: list[ClinragError] = field(default_factory=list)  # the last failure of each, since an answer

    def failed(self, began: int, exc: ClinragError) -> int:
        """Record the failure of a case that began when `counted` was `began`; the outages in a row."""
        if began == self.counted:
            self.counted += 1
            self.in_a_row.append(exc)
        elif self.in_a_row:
            self.in_a_row[-1] = exc  # the same outage, seen by a case that was already in flight
        return len(self.in_a_row)

    def answered(self) -> None:
        self.in_a_row.clear()


def _stop_message(outages: list[ClinragError], run_dir: RunDirectory) -> str:
    last = outages[-1]
    return (
        f"stopped after {len(outages)} cases in a row failed for want of a backend, each begun after the one "
        f"before had failed (cases in flight with it count once; last: {type(last).__name__}: {last}); "
        f"finished cases are saved in {run_dir.path}, and the unanswered ones are retried when the same "
        "command is run again"
    )
