"""`clinrag eval` as a user runs it: in this process through typer's CliRunner, and as real subprocesses for a
second process on the same run, a kill half-way and a resume; the embedded model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clinrag.eval.results import RunDirectory
from tests.app.test_cli import _assert_clean_failure, invoke_cli

CASES = 10


def _start_direct_run(data_dir: Path, out: Path) -> subprocess.Popen:
    args = ["eval", "run", "--method", "direct", "--dataset", "medqa", "--data", str(data_dir)]
    args += ["--limit", str(CASES), "--concurrency", "1", "--out", str(out), "--param", "max_tokens=8"]
    # No response cache, so the resumed run cannot look finished merely because answers are cached.
    env = {**os.environ, "COLUMNS": "120", "CLINRAG_CACHE_ENABLED": "false"}
    return subprocess.Popen(
        [sys.executable, "-m", "clinrag", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.is_file() else 0


@pytest.mark.slow
def test_a_second_process_is_refused_then_sigterm_half_way_and_resume_finishes_only_the_rest(
    data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    results = out / "results.jsonl"
    process = _start_direct_run(data_dir, out)
    deadline = time.monotonic() + 240
    while _lines(results) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()
    # A second real process on the same --out is refused while the first runs (before: both appended).
    second = _start_direct_run(data_dir, out)
    _, stderr = second.communicate(timeout=120)
    assert second.returncode == 2 and f"another clinrag run (pid {process.pid})" in stderr, stderr
    assert "Traceback" not in stderr
    assert process.poll() is None, "the first run ended before the second one was refused"
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "run the same command to resume" in stderr
    before = RunDirectory(out).results()
    assert 3 <= len(before) < CASES
    first_run_ids = {r.case_id: r.run_id for r in before}

    resumed = _start_direct_run(data_dir, out)
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert f"{len(before)} cases were already finished, {CASES - len(before)} answered now" in stdout
    after = RunDirectory(out).results()
    ids = [r.case_id for r in after]
    assert len(ids) == len(set(ids)) == CASES
    assert sorted(ids) == sorted(RunDirectory(out).config().case_ids)
    # The cases finished before the kill were not answered again.
    assert {r.case_id: r.run_id for r in after if r.case_id in first_run_ids} == first_run_ids
    assert len({r.run_id for r in after}) == 2
    assert (out / "summary.json").is_file()


def test_unknown_names_list_the_valid_ones(data_dir: Path, tmp_path: Path) -> None:
    base = ["eval", "run", "--out", str(tmp_path / "x"), "--data", str(data_dir)]
    result = invoke_cli(*base, "--method", "oracle", "--dataset", "medqa")
    _assert_clean_failure(result, "unknown method 'oracle'")
    assert "knn-vote" in result.stderr and "direct" in result.stderr
    result = invoke_cli(*base, "--method", "direct", "--dataset", "usmle")
    _assert_clean_failure(result, "usmle")
    assert "medqa" in result.stderr and "ddxplus" in result.stderr


def test_a_dataset_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "medqa.jsonl"
    result = invoke_cli(
        "eval",
        "run",
        "--method",
        "direct",
        "--dataset",
        "medqa",
        "--data",
        str(missing),
        "--out",
        str(tmp_path / "r"),
    )
    _assert_clean_failure(result, str(missing))


@pytest.mark.integration
def test_compare_refuses_runs_on_different_datasets(data_dir: Path, tmp_path: Path) -> None:
    common = ["--method", "knn-vote", "--data", str(data_dir), "--limit", "5"]
    assert (
        invoke_cli("eval", "run", "--dataset", "ddxplus", "--out", str(tmp_path / "a"), *common).returncode
        == 0
    )
    assert (
        invoke_cli("eval", "run", "--dataset", "icraft-md", "--out", str(tmp_path / "b"), *common).returncode
        == 0
    )
    result = invoke_cli("eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    _assert_clean_failure(result, "ddxplus")
    assert "icraft-md" in result.stderr


@pytest.mark.slow
def test_judge_quality_and_report_over_real_runs(data_dir: Path, tmp_path: Path) -> None:
    runs = []
    for mode in ("generate", "score"):
        out = tmp_path / f"direct-{mode}"
        args = [
            "eval",
            "run",
            "--method",
            "direct",
            "--dataset",
            "medqa",
            "--data",
            str(data_dir),
            "--limit",
            "2",
        ]
        result = invoke_cli(*args, "--out", str(out), "--param", f"mode={mode}", "--param", "max_tokens=8")
        assert result.returncode == 0, result.stderr
        runs.append(str(out))
    env = {"CLINRAG_DATA_DIR": str(data_dir)}
    judged = invoke_cli("eval", "judge", *runs, "--out", str(tmp_path / "win.json"), "--limit", "1", env=env)
    assert judged.returncode == 0, judged.stderr
    assert "1 comparisons" in judged.stdout and (tmp_path / "win.json").is_file()
    quality = invoke_cli("eval", "quality", runs[0], env=env)
    assert quality.returncode == 0, quality.stderr
    assert len((Path(runs[0]) / "quality.jsonl").read_text().splitlines()) == 2
    report = invoke_cli(
        "eval", "report", *runs, "--out", str(tmp_path / "report"), "--win-matrix", str(tmp_path / "win.json")
    )
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "direct-generate" in text and "direct-score" in text and "win-matrix.png" in text
    assert (tmp_path / "report" / "win-matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
