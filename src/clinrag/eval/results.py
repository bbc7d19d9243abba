"""The files of one evaluation run, shared by the runner, `eval compare` and `eval report`.

    DIR/run.json       RunConfig: what was run (dataset, method, parameters, the sampled case ids)
    DIR/results.jsonl  one CaseResult per finished case, appended (and flushed) as each case finishes
    DIR/summary.json   RunSummary, written when the run completes
    DIR/.lock          held (flock) by the process running in DIR, so a second run there is refused

A crash can leave a half-written last line in results.jsonl: readers ignore it and `RunDirectory.append`
cuts it off before writing, so a resumed run never duplicates or corrupts a case. run.json and summary.json
are replaced atomically. Readers keep one result per case id (the first), whatever wrote the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from clinrag.core.errors import DataFormatError, InvalidInputError, RunLockedError
from clinrag.core.files import os_reason, private_dir, private_file
from clinrag.core.models import Answer, Gold, TaskKind
from clinrag.core.usage import Usage
from clinrag.index.store import write_json

CONFIG_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"
QUALITY_FILE = "quality.jsonl"  # written by `clinrag eval quality`
PARTITIONS_DIR = "partitions"  # one results directory per partition of a partitioned run
JUDGE_METRIC = "judge_quality"


class Corpus(BaseModel):
    """A knowledge base or graph the method could retrieve from. `sources` are as given to `kb build` /
    `graph build` (None: not recorded); `files` maps each source file's fingerprint to its source."""

    kind: Literal["knowledge", "graph"]
    location: str
    sources: list[str] | None = None
    files: dict[str, str] | None = None


class RunConfig(BaseModel):
    """What was run. `overlap` lists the corpus sources that are files of the evaluated dataset (allowed
    only with `allow_overlap`; retrieval still leaves each case's own record out)."""

    dataset: str
    method: str
    method_params: dict[str, Any] = Field(default_factory=dict)
    data_path: str
    limit: int | None = None
    seed: int = 0
    case_ids: list[str]
    model: str = "none"
    scoring: str = ""  # how the model scored options (ChatModel.scoring_name); runs in other modes differ
    created_at: str
    corpora: list[Corpus] = Field(default_factory=list)
    overlap: list[str] = Field(default_factory=list)
    allow_overlap: bool = False
    data_report: str = ""  # the loader's report: cases read, records skipped and why


class TurnScore(BaseModel):
    """Differential metrics after one iteration of an interactive method."""

    iteration: int
    questions_asked: int
    scores: dict[str, float]


class CaseResult(BaseModel):
    case_id: str
    task: TaskKind
    gold: Gold | None = None
    answer: Answer
    scores: dict[str, float] = Field(default_factory=dict)
    turns: list[TurnScore] = Field(default_factory=list)
    elapsed_s: float = 0.0
    run_id: str


class MetricSummary(BaseModel):
    mean: float
    ci_low: float
    ci_high: float
    n: int


class RunSummary(BaseModel):
    dataset: str
    method: str
    model: str
    n_cases: int
    n_finished: int
    n_errors: int
    metrics: dict[str, MetricSummary]
    usage: Usage
    calls_per_case: float
    tokens_per_case: float
    wall_s: float
    run_ids: list[str]


class RunDirectory:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS_FILE

    def exists(self) -> bool:
        return (self.path / CONFIG_FILE).is_file()

    def config(self) -> RunConfig:
        return self._read_model(CONFIG_FILE, RunConfig)

    def summary(self) -> RunSummary:
        return self._read_model(SUMMARY_FILE, RunSummary)

    def has_summary(self) -> bool:
        return (self.path / SUMMARY_FILE).is_file()

    def is_foreign(self) -> bool:
        """Run files (results, summary) without the run.json that says what they are: never adopted."""
        if self.exists():
            return False
        return any((self.path / name).exists() for name in (RESULTS_FILE, SUMMARY_FILE, PARTITIONS_DIR))

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the directory's exclusive lock (created if missing); `RunLockedError` if another process
        holds it. The kernel drops the lock when its holder dies, so a crash never leaves it stale."""
        self._make_dir()
        lock_path = self._private_file(LOCK_FILE)
        handle = lock_path.open("r+", encoding="utf-8")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                raise RunLockedError(
                    f"another clinrag run (pid {holder}) is using {self.path}: wait for it to finish, "
                    "or choose another --out directory"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(str(os.getpid()))
            handle.flush()
            yield
        finally:
            handle.close()

    def _make_dir(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise InvalidInputError(f"{self.path} is a file, not a run directory: choose another --out")
        try:
            private_dir(self.path)
        except OSError as exc:
            raise InvalidInputError(
                f"cannot create the run directory {self.path}: {os_reason(exc)}; choose another --out"
            ) from exc

    def _private_file(self, name: str) -> Path:
        """DIR/name, created owner-only if missing and made so if not: results hold patients' words."""
        path = self.path / name
        try:
            return private_file(path)
        except OSError as exc:
            raise InvalidInputError(
                f"cannot write {path} in the run directory: {os_reason(exc)}; choose another --out"
            ) from exc

    def write_config(self, config: RunConfig) -> None:
        self._make_dir()
        write_json(self.path / CONFIG_FILE, config.model_dump(mode="json"))

    def write_summary(self, summary: RunSummary) -> None:
        write_json(self.path / SUMMARY_FILE, summary.model_dump(mode="json"))

    def results(self) -> list[CaseResult]:
        """Every complete result line, the first one of each case id; a torn last line (a crash mid-write)
        is ignored."""
        unique: dict[str, CaseResult] = {}
        for result, _ in self._complete_lines():
            unique.setdefault(result.case_id, result)
        return list(unique.values())

    def scored_results(self) -> list[CaseResult]:
        """`results()` with the judge's answer quality (RUN/quality.jsonl, 0–1) added as the `judge_quality`
        score of every case the judge scored validly, so judged runs can be compared on it."""
        results = self.results()
        path = self.path / QUALITY_FILE
        if not path.is_file():
            return results
        quality = {}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                row = json.loads(line)
                if row.get("score") is not None:
                    quality[str(row["case_id"])] = float(row["score"])
            except (ValueError, KeyError, TypeError) as exc:
                raise DataFormatError(f"{path}:{number}: not a quality score: {exc}") from exc
        return [
            r.model_copy(update={"scores": {**r.scores, JUDGE_METRIC: quality[r.case_id]}})
            if r.case_id in quality
            else r
            for r in results
        ]

    def append(self, result: CaseResult) -> None:
        line = result.model_dump_json() + "\n"
        with self._private_file(RESULTS_FILE).open("a+b") as handle:
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())

    def partition(self, name: str) -> RunDirectory:
        """The directory of one partition of a partitioned run (see `merge_partitions`)."""
        return RunDirectory(self.path / PARTITIONS_DIR / name)

    def merge_partitions(self, case_order: list[str]) -> int:
        """Append the results found in partition directories to results.jsonl (in `case_order`, each case
        once, none already there), then remove them; returns how many were added. A partitioned run writes
        each partition's results apart; what a crash left there is merged by the next run."""
        folder = self.path / PARTITIONS_DIR
        if not folder.is_dir():
            return 0
        done = {result.case_id for result in self.results()}
        position = {case_id: index for index, case_id in enumerate(case_order)}
        found = {}
        for part in sorted(folder.iterdir()):
            for result in RunDirectory(part).results():
                if result.case_id in position and result.case_id not in done:
                    found.setdefault(result.case_id, result)
        for result in sorted(found.values(), key=lambda r: position[r.case_id]):
            self.append(result)
        shutil.rmtree(folder)
        return len(found)

    def drop_torn_tail(self) -> None:
        """Cut a half-written last line left by a crash, so appends start on a fresh line."""
        if not self.results_path.is_file():
            return
        end = 0
        for _, offset in self._complete_lines():
            end = offset
        if end != self.results_path.stat().st_size:
            with self.results_path.open("r+b") as handle:
                handle.truncate(end)

    def _complete_lines(self) -> list[tuple[CaseResult, int]]:
        """(result, byte offset just after its line) for every complete line. Only the last line may be
        broken (a crash mid-write); a broken line anywhere else is a corrupt file."""
        if not self.results_path.is_file():
            return []
        lines = self.results_path.read_bytes().splitlines(keepends=True)
        complete: list[tuple[CaseResult, int]] = []
        offset = 0
        for number, line in enumerate(lines, 1):
            if not line.endswith(b"\n"):
                break  # the write of this line never finished
            offset += len(line)
            if not line.strip():
                continue
            try:
                complete.append((CaseResult.model_validate_json(line), offset))
            except ValidationError as exc:
                if number == len(lines):
                    break
                raise DataFormatError(f"{self.results_path}:{number}: not a case result: {exc}") from exc
        return complete

    def _read_model(self, name: str, model: type[BaseModel]) -> Any:
        path = self.path / name
        if not path.is_file():
            raise InvalidInputError(f"{self.path} is not an evaluation run directory (no {name})")
        try:
            return model.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, ValidationError) as exc:
            if name == CONFIG_FILE:
                raise DataFormatError(
                    f"{path} is empty or unreadable (torn by a crash while it was written?): the run there "
                    f"cannot be resumed; move {self.path} aside or delete it and run again ({exc})"
                ) from exc
            raise DataFormatError(f"{path}: {exc}") from exc
