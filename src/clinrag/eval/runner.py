"""The evaluation runner: a method over a dataset's sampled cases, concurrently, resumable.

Each finished case is appended (fsync'd) to results.jsonl the moment it finishes, so a crash or a kill loses
at most the cases in flight; running the same command again skips every case already in the file. The
patient base a method may use is the dataset's records minus the sampled cases (leave-sample-out), so no
case can retrieve itself. Likewise for knowledge: the cases carry their provenance (`Case.meta`), which the
methods' retrievers leave out, and a run whose corpus shares a file with the dataset is refused unless
`allow_overlap` (see `clinrag.eval.validity`); run.json records the corpora and any overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from clinrag.core.errors import ClinragError, InvalidInputError
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


@dataclass
class PreparedRun:
    method: Method
    cases: list[Case]
    dataset: str  # the dataset's name
    corpora: list[Corpus] = field(default_factory=list)
    overlap: list[str] = field(default_factory=list)  # corpus sources that are files of the dataset


@dataclass
class RunOutcome:
    summary: RunSummary
    skipped: int  # cases already finished by an earlier run of the same directory
    ran: int


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
        await runner.answer_all(method, todo, run_dir, run_id, request.concurrency)


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
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        return await self.arun(request)

    async def arun(self, request: RunRequest) -> RunOutcome:
        if request.concurrency < 1:
            raise InvalidInputError(f"concurrency must be at least 1, got {request.concurrency}")
        prepared = self.prepare(request)
        method, cases = prepared.method, prepared.cases
        model_name = method.model.model if getattr(method, "model", None) is not None else "none"
        run_dir = RunDirectory(request.out)
        config = self._config(request, prepared, model_name)
        self._prepare(run_dir, config)
        run_dir.merge_partitions([case.id for case in cases])  # what a crashed partitioned run finished
        done = {r.case_id for r in run_dir.results()}
        todo = [case for case in cases if case.id not in done]
        run_id = uuid.uuid4().hex[:12]
        # A resumed run adds its time to that of the invocations that finished before it.
        earlier_wall_s = run_dir.summary().wall_s if run_dir.has_summary() else 0.0
        started = time.perf_counter()
        await self.executor.answer(self, request, method, todo, run_dir, run_id)
        summary = summarize(config, run_dir.results(), earlier_wall_s + time.perf_counter() - started)
        run_dir.write_summary(summary)
        return RunOutcome(summary=summary, skipped=len(cases) - len(todo), ran=len(todo))

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
        return PreparedRun(method, cases, dataset.name, corpora, overlap)

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
    def _config(request: RunRequest, prepared: PreparedRun, model_name: str) -> RunConfig:
        return RunConfig(
            dataset=prepared.dataset,
            method=request.method,
            method_params=request.params,
            data_path=str(request.data_path or ""),
            limit=request.limit,
            seed=request.seed,
            case_ids=[case.id for case in prepared.cases],
            model=model_name,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            corpora=prepared.corpora,
            overlap=prepared.overlap,
            allow_overlap=request.allow_overlap,
        )

    @staticmethod
    def _prepare(run_dir: RunDirectory, config: RunConfig) -> None:
        """A new directory gets the config; an existing one must hold the same run to be resumed."""
        if not run_dir.exists():
            run_dir.write_config(config)
            return
        previous = run_dir.config()
        same = ("dataset", "method", "method_params", "case_ids", "model")
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
        self, method: Method, cases: list[Case], run_dir: RunDirectory, run_id: str, concurrency: int
    ) -> None:
        """Answer `cases`, `concurrency` at a time, appending each result to `run_dir` as it finishes."""
        semaphore = asyncio.Semaphore(concurrency)
        with self.progress_bar() as progress:
            bar = progress.add_task(f"{method.name}", total=len(cases))

            async def one(case: Case) -> None:
                async with semaphore:
                    result = await self._answer_one(method, case, run_id)
                # Appends happen on the event loop thread, one at a time: lines never interleave.
                run_dir.append(result)
                progress.advance(bar)

            await asyncio.gather(*(one(case) for case in cases))

    @staticmethod
    async def _answer_one(method: Method, case: Case, run_id: str) -> CaseResult:
        started = time.perf_counter()
        try:
            answer = await method.aanswer(case)
        except ClinragError as exc:
            # A typed failure (model timeout, bad input) is this case's result, not the run's end.
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
