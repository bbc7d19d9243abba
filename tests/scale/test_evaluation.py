"""Evaluations partitioned across Dask workers, on real DDXPlus patients with knn-vote: the same results as
one process, resumable after a crash that left partition files behind, and from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clinrag.core.settings import Settings
from clinrag.eval.results import PARTITIONS_DIR, RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.scale.evaluation import DaskExecutor
from tests.app.test_cli import invoke_cli


def request_for(out: Path, data_dir: Path) -> RunRequest:
    return RunRequest(
        dataset="ddxplus", method="knn-vote", out=out, data_path=data_dir / "ddxplus", limit=60, seed=4
    )


def by_case(path: Path) -> dict[str, tuple]:
    return {
        r.case_id: (r.scores, r.answer.result.model_dump(), [e.id for e in r.answer.evidence])
        for r in RunDirectory(path).results()
    }


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, data_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("local") / "run"
    EvalRunner(Settings(), progress=False).run(request_for(out, data_dir))
    return out


def test_partitioned_results_equal_one_process(
    client, local_run: Path, data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "dask"
    executor = DaskExecutor(scheduler=client.scheduler.address, partitions=5)
    outcome = EvalRunner(Settings(), progress=False, executor=executor).run(request_for(out, data_dir))
    assert outcome.ran == 60 and outcome.summary.n_finished == 60
    assert by_case(out) == by_case(local_run)
    assert not (out / PARTITIONS_DIR).exists()  # merged and removed
    run_ids = {r.run_id for r in RunDirectory(out).results()}
    assert len(run_ids) == 1


def test_a_crashed_partitioned_run_resumes(client, local_run: Path, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "crashed"
    shutil.copytree(local_run, out)
    lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(lines[:20]))
    # A partition file left by the crash: 20 finished cases and a half-written one.
    part = out / PARTITIONS_DIR / "part-crashed-00000"
    part.mkdir(parents=True)
    (part / "results.jsonl").write_text("".join(lines[20:40]) + lines[40][:50])
    executor = DaskExecutor(scheduler=client.scheduler.address)
    outcome = EvalRunner(Settings(), progress=False, executor=executor).run(request_for(out, data_dir))
    assert (outcome.skipped, outcome.ran) == (40, 20)
    ids = [r.case_id for r in RunDirectory(out).results()]
    assert len(ids) == len(set(ids)) == 60
    assert by_case(out) == by_case(local_run)


def test_eval_run_on_dask_from_the_command_line(client, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    result = invoke_cli(
        "eval", "run", "--method", "knn-vote", "--dataset", "ddxplus", "--data", str(data_dir / "ddxplus"),
        "--limit", "12", "--out", str(out), "--executor", "dask", "--scheduler", client.scheduler.address,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_finished"] == 12
