"""The runner on real data: knn-vote over DDXPlus, resume after a torn write, foreign directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.core.errors import ClinragError, InvalidInputError
from clinrag.core.settings import load_settings
from clinrag.eval.results import RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest


@pytest.fixture
def runner(data_dir: Path) -> EvalRunner:
    return EvalRunner(load_settings(data_dir=data_dir), progress=False)


def test_knn_vote_on_ddxplus_then_resume_runs_nothing(runner: EvalRunner, tmp_path: Path) -> None:
    request = RunRequest(dataset="ddxplus", method="knn-vote", out=tmp_path / "run", limit=120, seed=3)
    first = runner.run(request)
    assert first.ran == 120 and first.skipped == 0
    summary = first.summary
    assert summary.n_finished == 120 and summary.n_errors == 0 and summary.model == "none"
    assert summary.metrics["gtpa@1"].mean >= 0.9
    assert (
        summary.metrics["gtpa@1"].ci_low
        <= summary.metrics["gtpa@1"].mean
        <= summary.metrics["gtpa@1"].ci_high
    )
    run_dir = RunDirectory(tmp_path / "run")
    results = run_dir.results()
    assert sorted(r.case_id for r in results) == sorted(run_dir.config().case_ids)
    for result in results:
        # Leave-sample-out: no sampled case is anyone's neighbour.
        assert not set(result.answer.evidence_ids) & set(run_dir.config().case_ids)
    again = runner.run(request)
    assert (again.ran, again.skipped) == (0, 120)
    assert len(run_dir.results()) == 120
    # The resumed run's wall time includes the first invocation's, not only its own (near-zero) time.
    assert again.summary.wall_s >= summary.wall_s > 0


def test_a_torn_last_line_is_dropped_and_its_case_rerun(runner: EvalRunner, tmp_path: Path) -> None:
    request = RunRequest(dataset="ddxplus", method="knn-vote", out=tmp_path / "run", limit=20)
    runner.run(request)
    path = tmp_path / "run" / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    # Simulate a crash in the middle of writing the last result.
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    assert len(RunDirectory(tmp_path / "run").results()) == 19
    outcome = runner.run(request)
    assert (outcome.ran, outcome.skipped) == (1, 19)
    ids = [r.case_id for r in RunDirectory(tmp_path / "run").results()]
    assert len(ids) == len(set(ids)) == 20


def test_a_directory_holding_another_run_is_refused(runner: EvalRunner, tmp_path: Path) -> None:
    runner.run(RunRequest(dataset="ddxplus", method="knn-vote", out=tmp_path / "run", limit=5))
    with pytest.raises(InvalidInputError, match="holds another run"):
        runner.run(RunRequest(dataset="ddxplus", method="knn-vote", out=tmp_path / "run", limit=5, seed=9))


def test_names_and_paths_are_checked_before_any_work(runner: EvalRunner, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"valid methods: .*knn-vote"):
        runner.run(RunRequest(dataset="ddxplus", method="magic", out=tmp_path / "a"))
    with pytest.raises(InvalidInputError, match="ddxplus"):
        runner.run(RunRequest(dataset="nosuchset", method="knn-vote", out=tmp_path / "b"))
    with pytest.raises(ClinragError, match="does-not-exist"):
        runner.run(
            RunRequest(
                dataset="medqa", method="direct", out=tmp_path / "c", data_path=tmp_path / "does-not-exist"
            )
        )
    with pytest.raises(InvalidInputError, match="patient base"):
        runner.run(RunRequest(dataset="mmlu-med", method="knn-vote", out=tmp_path / "d", limit=3))
    assert not (tmp_path / "a").exists() and not (tmp_path / "d" / "results.jsonl").exists()
