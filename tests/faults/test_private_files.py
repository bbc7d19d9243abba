"""Files holding full prompts and patients' words are owner-only: the response cache, the recording of calls
(CLINRAG_LLM_RECORD_PATH) and an evaluation's results are created 0600 in 0700 directories (the home, the run
directory), and such files left readable by an older clinrag are tightened when clinrag opens them."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

from clinrag.core.settings import load_settings
from clinrag.eval.results import LOCK_FILE
from clinrag.eval.runner import EvalRunner, RunRequest
from tests.app.test_cli import run_cli
from tests.openai_server import SCRIPTED_SETTINGS, ScriptedServer, chat_body


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _chat(server: ScriptedServer, record: Path) -> None:
    server.replies = [(200, chat_body("fine"), 0.0)]
    env = {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": server.base_url,
        "CLINRAG_LLM_RECORD_PATH": str(record),
        **SCRIPTED_SETTINGS,
    }
    result = run_cli("llm", "chat", "I have had a fever for three days", env=env)
    assert result.returncode == 0, result.stderr


def test_cache_and_recording_are_created_private(
    server: ScriptedServer, isolated_home: Path, tmp_path: Path
) -> None:
    record = tmp_path / "recordings" / "calls.jsonl"
    _chat(server, record)
    assert _mode(isolated_home) == 0o700 and _mode(record.parent) == 0o700
    assert _mode(isolated_home / "llm_cache.sqlite") == 0o600
    assert _mode(record) == 0o600 and "three days" in record.read_text()
    assert all(_mode(path) == 0o600 for path in isolated_home.iterdir() if path.is_file())


def test_files_left_readable_are_tightened(
    server: ScriptedServer, isolated_home: Path, tmp_path: Path
) -> None:
    isolated_home.mkdir(mode=0o755)
    cache = isolated_home / "llm_cache.sqlite"
    sqlite3.connect(cache).close()
    record = tmp_path / "calls.jsonl"
    record.write_text("")
    for path in (cache, record):
        path.chmod(0o644)
    _chat(server, record)
    assert (_mode(cache), _mode(record)) == (0o600, 0o600)


def test_run_directory_and_results_are_private(data_dir: Path, tmp_path: Path) -> None:
    runner = EvalRunner(load_settings(data_dir=data_dir), progress=False)
    out = tmp_path / "runs" / "first"
    runner.run(RunRequest(dataset="ddxplus", method="knn-vote", out=out, limit=3))
    assert _mode(out.parent) == 0o700 and _mode(out) == 0o700
    for name in ("results.jsonl", "run.json", "summary.json", LOCK_FILE):
        assert _mode(out / name) == 0o600, name
    # a run written before, with a case left to do: its files are tightened when the run is resumed
    results = out / "results.jsonl"
    results.write_text("".join(results.read_text().splitlines(keepends=True)[:-1]))
    results.chmod(0o644)
    (out / "summary.json").chmod(0o644)
    assert runner.run(RunRequest(dataset="ddxplus", method="knn-vote", out=out, limit=3)).ran == 1
    assert (_mode(out / "results.jsonl"), _mode(out / "summary.json")) == (0o600, 0o600)
