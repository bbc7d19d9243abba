"""The command line as a user runs it: in this process through typer's CliRunner (`invoke_cli`), and as a real
subprocess (`run_cli`) where the process itself is under test; the real embedded model, real exit codes."""

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from clinrag.app.cli import app
from tests.openai_server import SCRIPTED_SETTINGS, chat_body, ranking_body

runner = CliRunner()


def run_cli(
    *args: str, stdin: str | None = None, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    # Wide enough that no line wraps, whatever the length of the temporary paths in it (longer under xdist).
    environment = {**os.environ, "COLUMNS": "400", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "clinrag", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
    )


def invoke_cli(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command run in this process by typer's CliRunner, with `run_cli`'s result: its exit code, standard
    output and standard error. `env` holds for this call only (the CLI reads its settings from the
    environment on every call); an exception that the CLI does not turn into an exit code is raised here."""
    result = runner.invoke(app, list(args), input=stdin, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["clinrag", *args], result.exit_code, result.stdout, result.stderr)


def usage_value(output: str, name: str) -> int:
    match = re.search(rf"{name}\s*│\s*(\d+)", output)
    assert match, f"no {name!r} row in:\n{output}"
    return int(match.group(1))


@pytest.mark.integration
def test_help_lists_the_commands():
    result = run_cli("--help")  # the real entry point (`python -m clinrag`), in a process of its own
    assert result.returncode == 0
    for command in ("config", "llm", "embed"):
        assert command in result.stdout


@pytest.mark.integration
def test_chat_answers_and_the_rerun_is_a_cache_hit():
    first = invoke_cli("llm", "chat", "List three causes of chest pain.", "--max-tokens", "48")
    assert first.returncode == 0, first.stderr
    assert usage_value(first.stdout, "cache misses") == 1 and usage_value(first.stdout, "model calls") == 1
    assert usage_value(first.stdout, "completion tokens") > 0
    answer = first.stdout.split("usage")[0].strip()
    assert len(answer) > 20
    second = invoke_cli("llm", "chat", "List three causes of chest pain.", "--max-tokens", "48")
    assert usage_value(second.stdout, "cache hits") == 1 and usage_value(second.stdout, "model calls") == 0
    assert second.stdout.split("usage")[0].strip() == answer


@pytest.mark.integration
def test_choose_scores_options_by_likelihood():
    result = invoke_cli("llm", "choose", "What is the capital of France?", "-o", "Berlin", "-o", "Paris")
    assert result.returncode == 0, result.stderr
    assert "choice: Paris" in result.stdout and "loglik" in result.stdout


def _assert_clean_failure(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_empty_prompt():
    _assert_clean_failure(invoke_cli("llm", "chat", "  "), "the prompt is empty")


def test_one_megabyte_prompt_from_stdin():
    _assert_clean_failure(invoke_cli("llm", "chat", "-", stdin="a" * 1_000_000), "1,000,000 characters")


def test_unreachable_base_url():
    env = {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "CLINRAG_LLM_MAX_RETRIES": "1",
        "CLINRAG_LLM_BACKOFF_S": "0.01",
    }
    _assert_clean_failure(invoke_cli("llm", "chat", "hi", env=env), "cannot reach")


def test_invalid_api_key(server):
    server.replies = [(401, {"error": {"message": "Incorrect API key provided"}}, 0)]
    env = {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": server.base_url,
        "CLINRAG_LLM_API_KEY": "sk-wrong",
        **SCRIPTED_SETTINGS,
    }
    _assert_clean_failure(invoke_cli("llm", "chat", "hi", env=env), "API key")


def test_openai_backend_prints_the_server_answer(server):
    server.replies = [(200, chat_body("Pericarditis."), 0)]
    result = invoke_cli("llm", "chat", "One cause of chest pain?", env=_scripted_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Pericarditis.")
    assert usage_value(result.stdout, "prompt tokens") == 11
    assert len(server.requests) == 1


def test_openai_backend_chooses_by_the_servers_ranking(server):
    server.replies = [(200, ranking_body("Paris", "Berlin"), 0)]
    result = invoke_cli(
        "llm", "choose", "Capital of France?", "-o", "Berlin", "-o", "Paris", env=_scripted_env(server)
    )
    assert result.returncode == 0, result.stderr
    assert "scored by ranking" in result.stdout and "choice: Paris" in result.stdout
    assert re.search(r"Paris\s*│.*│\s*0\.667\s*│", result.stdout), result.stdout
    (request,) = server.requests
    assert "ranking" in request["response_format"]["json_schema"]["schema"]["properties"]


def _scripted_env(server) -> dict[str, str]:
    return {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": server.base_url,
        **SCRIPTED_SETTINGS,
    }


def test_config_show_masks_secrets_and_reports_bad_files(tmp_path):
    result = invoke_cli("config", "show", env={"CLINRAG_LLM_API_KEY": "sk-very-secret"})
    assert result.returncode == 0
    assert '"llm_backend": "embedded"' in result.stdout and "sk-very-secret" not in result.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm]\ntimeout_s = -1\n")
    _assert_clean_failure(invoke_cli("--config", str(bad), "config", "show"), "llm_timeout_s")


def test_an_unknown_backend_fails_cleanly_where_the_model_is_built(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[llm]\nbackend = 'gpt-9'\n")
    assert (
        invoke_cli("--config", str(config), "config", "show").returncode == 0
    )  # the name is not checked yet
    _assert_clean_failure(
        invoke_cli("--config", str(config), "llm", "chat", "hi"), "llm_backend: unknown chat backend 'gpt-9'"
    )


@pytest.mark.integration
def test_embed_prints_similarities_from_the_packaged_model():
    result = invoke_cli("embed", "chest pain", "pain in the chest", "fracture of the wrist")
    assert result.returncode == 0, result.stderr
    assert "dimension: 384" in result.stdout
    rows = re.findall(r"^│ (\d): .*?│ ([\d.]+)\s*│ ([\d.]+)\s*│ ([\d.]+)\s*│", result.stdout, re.MULTILINE)
    similarity = {int(i): [float(v) for v in values] for i, *values in rows}
    assert similarity[0][0] == 1.0
    assert similarity[0][1] > similarity[0][2] + 0.3  # a paraphrase is far closer than another complaint


def test_embed_rejects_blank_text():
    _assert_clean_failure(invoke_cli("embed", "chest pain", " "), "index 1")
