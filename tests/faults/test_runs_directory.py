"""The run directory on real runs (knn-vote over DDXPlus): one run at a time, no foreign directory adopted,
atomic run.json / summary.json, duplicate results read once, and the loader's skipped records reported."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError, RunLockedError
from clinrag.core.settings import load_settings
from clinrag.eval.results import LOCK_FILE, RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from tests.openai_server import SCRIPTED_SETTINGS_KWARGS, chat_body


@pytest.fixture
def runner(data_dir: Path) -> EvalRunner:
    return EvalRunner(load_settings(data_dir=data_dir), progress=False)


def _request(out: Path, **extra) -> RunRequest:
    return RunRequest(dataset="ddxplus", method="knn-vote", out=out, limit=10, **extra)


def test_a_second_run_on_a_locked_directory_is_refused(runner: EvalRunner, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    # Another process holds the lock (flock is per open file: this handle stands in for that process).
    with (out / LOCK_FILE).open("a+") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        holder.write("4242")
        holder.flush()
        with pytest.raises(RunLockedError, match="pid 4242"):
            runner.run(_request(out))
    assert not (out / "results.jsonl").exists()
    assert runner.run(_request(out)).summary.n_finished == 10  # the lock is free again


def test_duplicate_lines_are_read_once(runner: EvalRunner, tmp_path: Path) -> None:
    # Before: two runs appending side by side gave "20/10" in the summary.
    runner.run(_request(tmp_path / "run"))
    path = tmp_path / "run" / "results.jsonl"
    path.write_bytes(path.read_bytes() * 2)
    outcome = runner.run(_request(tmp_path / "run"))
    assert (outcome.ran, outcome.summary.n_finished, outcome.summary.n_cases) == (0, 10, 10)


def test_a_foreign_directory_is_not_adopted(runner: EvalRunner, tmp_path: Path) -> None:
    runner.run(_request(tmp_path / "run"))
    (tmp_path / "run" / "run.json").unlink()
    with pytest.raises(InvalidInputError, match=r"no run\.json"):
        runner.run(_request(tmp_path / "run"))
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 10


def test_out_naming_a_file_is_a_typed_error(runner: EvalRunner, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("not a run")
    with pytest.raises(InvalidInputError, match="is a file"):
        runner.run(_request(tmp_path / "taken"))


def test_a_torn_run_json_says_how_to_recover(runner: EvalRunner, tmp_path: Path) -> None:
    runner.run(_request(tmp_path / "run"))
    (tmp_path / "run" / "run.json").write_text("")
    with pytest.raises(DataFormatError, match=r"empty or unreadable.*delete it and run again"):
        runner.run(_request(tmp_path / "run"))


def test_a_torn_summary_is_rewritten_and_json_writes_leave_no_temporaries(
    runner: EvalRunner, tmp_path: Path
) -> None:
    runner.run(_request(tmp_path / "run"))
    (tmp_path / "run" / "summary.json").write_text('{"dataset": ')
    outcome = runner.run(_request(tmp_path / "run"))
    assert RunDirectory(tmp_path / "run").summary() == outcome.summary
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        LOCK_FILE,
        "results.jsonl",
        "run.json",
        "summary.json",
    ]


def test_skipped_dataset_rows_are_reported_and_recorded(
    data_dir: Path, tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the loader's report was dropped, so nobody learnt that rows were skipped.
    data = tmp_path / "medqa.jsonl"
    lines = (data_dir / "medqa" / "us_4options_test.jsonl").read_text(encoding="utf-8").splitlines()[:5]
    data.write_text("\n".join([*lines[:2], "{not json", json.dumps({"question": "no options"}), *lines[2:]]))
    server.replies = [(200, chat_body("A"), 0.0)]
    settings = load_settings(
        data_dir=data_dir,
        llm_backend="openai",
        llm_base_url=server.base_url,
        llm_model="m",
        **SCRIPTED_SETTINGS_KWARGS,
    )
    request = RunRequest(dataset="medqa", method="direct", out=tmp_path / "run", data_path=data)
    outcome = EvalRunner(settings, progress=False).run(request)
    assert outcome.summary.n_cases == 5
    assert "skipped" in outcome.data_report
    assert RunDirectory(tmp_path / "run").config().data_report == outcome.data_report
