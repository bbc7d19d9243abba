"""The command line as a user runs it: a real subprocess, the real embedded model, real exit codes."""

import os
import re
import subprocess
import sys

from tests.openai_server import SCRIPTED_SETTINGS, chat_body, ranking_body


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


def usage_value(output: str, name: str) -> int:
    match = re.search(rf"{name}\s*│\s*(\d+)", output)
    assert match, f"no {name!r} row in:\n{output}"
    return int(match.group(1))


def test_help_lists_the_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("config", "llm", "embed"):
        assert command in result.stdout


def test_chat_answers_and_the_rerun_is_a_cache_hit():
    first = run_cli("llm", "chat", "List three causes of chest pain.", "--max-tokens", "48")
    assert first.returncode == 0, first.stderr
    assert usage_value(first.stdout, "cache misses") == 1 and usage_value(first.stdout, "model calls") == 1
    assert usage_value(first.stdout, "completion tokens") > 0
    answer = first.stdout.split("usage")[0].strip()
    assert len(answer) > 20
    second = run_cli("llm", "chat", "List three causes of chest pain.", "--max-tokens", "48")
    assert usage_value(second.stdout, "cache hits") == 1 and usage_value(second.stdout, "model calls") == 0
    assert second.stdout.split("usage")[0].strip() == answer


def test_choose_scores_options_by_likelihood():
    result = run_cli("llm", "choose", "What is the capital of France?", "-o", "Berlin", "-o", "Paris")
    assert result.returncode == 0, result.stderr
    assert "choice: Paris" in result.stdout and "loglik" in result.stdout


def _assert_clean_failure(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_empty_prompt():
    _assert_clean_failure(run_cli("llm", "chat", "  "), "the prompt is empty")


def test_one_megabyte_prompt_from_stdin():
    _assert_clean_failure(run_cli("llm", "chat", "-", stdin="a" * 1_000_000), "1,000,000 characters")


def test_unreachable_base_url():
    env = {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "CLINRAG_LLM_MAX_RETRIES": "1",
        "CLINRAG_LLM_BACKOFF_S": "0.01",
    }
    _assert_clean_failure(run_cli("llm", "chat", "hi", env=env), "cannot reach")


def test_invalid_api_key(server):
    server.replies = [(401, {"error": {"message": "Incorrect API key provided"}}, 0)]
    env = {
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_MODEL": "m",
        "CLINRAG_LLM_BASE_URL": server.base_url,
        "CLINRAG_LLM_API_KEY": "sk-wrong",
        **SCRIPTED_SETTINGS,
    }
    _assert_clean_failure(run_cli("llm", "chat", "hi", env=env), "API key")


def test_openai_backend_prints_the_server_answer(server):
    server.replies = [(200, chat_body("Pericarditis."), 0)]
    result = run_cli("llm", "chat", "One cause of chest pain?", env=_scripted_env(server))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Pericarditis.")
    assert usage_value(result.stdout, "prompt tokens") == 11
    assert len(server.requests) == 1


def test_openai_backend_chooses_by_the_servers_ranking(server):
    server.replies = [(200, ranking_body("Paris", "Berlin"), 0)]
    result = run_cli(
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
    result = run_cli("config", "show", env={"CLINRAG_LLM_API_KEY": "sk-very-secret"})
    assert result.returncode == 0
    assert '"llm_backend": "embedded"' in result.stdout and "sk-very-secret" not in result.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm]\nbackend = 'gpt-9'\n")
    _assert_clean_failure(run_cli("--config", str(bad), "config", "show"), "llm_backend")


def test_embed_prints_similarities_from_the_packaged_model():
    result = run_cli("embed", "chest pain", "pain in the chest", "fracture of the wrist")
    assert result.returncode == 0, result.stderr
    assert "dimension: 384" in result.stdout
    rows = re.findall(r"^│ (\d): .*?│ ([\d.]+)\s*│ ([\d.]+)\s*│ ([\d.]+)\s*│", result.stdout, re.MULTILINE)
    similarity = {int(i): [float(v) for v in values] for i, *values in rows}
    assert similarity[0][0] == 1.0
    assert similarity[0][1] > similarity[0][2] + 0.3  # a paraphrase is far closer than another complaint


def test_embed_rejects_blank_text():
    _assert_clean_failure(run_cli("embed", "chest pain", " "), "index 1")
