"""A home, a run directory, a base's --out or a config file that clinrag cannot use ends the command with one
typed line and exit code 2, never a traceback.

Tests run as root, which ignores permission bits, so each unwritable place is made with what binds root too:
a directory where a file must be written (`.lock`, the cache's `-shm` file: SQLite then opens the cache
read-only, as in a read-only home) or a regular file where a directory must be. A variant with permission
bits runs for other users."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.app.test_cli import invoke_cli

ROOT = os.geteuid() == 0


def _one_line_error(result: subprocess.CompletedProcess, kind: str, *fragments: str) -> str:
    assert result.returncode == 2, result.stderr + result.stdout
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {kind}: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def _eval_run(out: Path, data_dir: Path) -> subprocess.CompletedProcess:
    return invoke_cli(
        "eval", "run", "--method", "knn-vote", "--dataset", "ddxplus", "--data", str(data_dir / "ddxplus"),
        "--limit", "2", "--out", str(out),
    )  # fmt: skip


def test_a_lock_file_that_cannot_be_opened_is_a_typed_error(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "run"
    (out / ".lock").mkdir(parents=True)  # open(.lock) fails, as PermissionError does in a read-only --out
    _one_line_error(_eval_run(out, data_dir), "InvalidInputError", f"{out / '.lock'}", "choose another --out")
    assert not (out / "results.jsonl").exists()


def test_an_out_below_a_file_is_a_typed_error(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / "run"
    _one_line_error(_eval_run(out, data_dir), "InvalidInputError", "Not a directory", "choose another --out")


@pytest.mark.skipif(ROOT, reason="root ignores permission bits")
def test_a_read_only_out_is_a_typed_error(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    out.chmod(0o555)
    try:
        _one_line_error(_eval_run(out, data_dir), "InvalidInputError", "Permission denied")
    finally:
        out.chmod(0o755)


def test_a_cache_sqlite_can_only_read_is_a_typed_error(isolated_home: Path) -> None:
    isolated_home.mkdir()
    cache = isolated_home / "llm_cache.sqlite"
    db = sqlite3.connect(cache)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE other (x)")
    db.close()  # the last connection removes -wal and -shm
    (isolated_home / "llm_cache.sqlite-shm").mkdir()
    env = {"CLINRAG_LLM_BACKEND": "openai", "CLINRAG_LLM_MODEL": "m"}
    env["CLINRAG_LLM_BASE_URL"] = "http://127.0.0.1:9/v1"  # never reached: the cache is opened first
    line = _one_line_error(invoke_cli("llm", "chat", "hi", env=env), "ConfigError", str(cache))
    assert "attempt to write a readonly database" in line


@pytest.mark.skipif(ROOT, reason="root ignores permission bits")
def test_a_read_only_home_is_a_typed_error(isolated_home: Path) -> None:
    isolated_home.mkdir(mode=0o555)
    env = {"CLINRAG_LLM_BACKEND": "openai", "CLINRAG_LLM_MODEL": "m"}
    env["CLINRAG_LLM_BASE_URL"] = "http://127.0.0.1:9/v1"
    try:
        _one_line_error(invoke_cli("llm", "chat", "hi", env=env), "ConfigError", "Permission denied")
    finally:
        isolated_home.chmod(0o755)


def test_a_home_below_a_file_is_a_typed_error_for_the_graph_server(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    env = {"CLINRAG_HOME": str(tmp_path / "file" / "home")}
    _one_line_error(invoke_cli("graph", "counts", env=env), "GraphUnavailableError", "Not a directory")


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_config_file_that_is_not_utf8_is_a_typed_error(tmp_path: Path, how: str) -> None:
    config = tmp_path / "clinrag.toml"
    config.write_bytes(b'[llm]\nmodel = "caf\xe9"\n')
    args, env = (["--config", str(config)], {}) if how == "option" else ([], {"CLINRAG_CONFIG": str(config)})
    _one_line_error(
        invoke_cli(*args, "config", "show", env=env), "ConfigError", "not UTF-8 at byte offset 18"
    )


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_directory_as_config_file_is_a_typed_error(tmp_path: Path, how: str) -> None:
    args, env = (
        (["--config", str(tmp_path)], {}) if how == "option" else ([], {"CLINRAG_CONFIG": str(tmp_path)})
    )
    _one_line_error(invoke_cli(*args, "config", "show", env=env), "ConfigError", "Is a directory")


def test_a_base_out_below_a_file_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / "base"
    result = invoke_cli("patients", "build", "--dataset", "synthetic", "--n", "5", "--out", str(out))
    _one_line_error(result, "InvalidInputError", f"cannot write {out}: Not a directory")
