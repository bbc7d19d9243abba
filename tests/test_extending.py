"""Extending clinrag from outside: the example package under tests/extending adds a method, a dataset and a
chat backend, one file each, found through its entry points (README "Extending clinrag"). Run as a user
would: the CLI in a fresh process with the package on its path, on real MedQA questions and, for the backend,
over real HTTP to the scripted loopback server (tests/openai_server.py), whose reply the test controls."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest

from clinrag.core.errors import ConfigError
from clinrag.core.settings import load_settings
from clinrag.eval.results import RunDirectory
from clinrag.llm.factory import build_chat_model
from clinrag.methods.registry import method_names
from tests.app.test_cli import run_cli
from tests.openai_server import SCRIPTED_SETTINGS, chat_body, ranking_body

EXAMPLE = Path(__file__).parent / "extending"


def run_with_example(*args: str, env: dict | None = None):
    path = os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")]))
    return run_cli(*args, env={"PYTHONPATH": path, **(env or {})})


@pytest.mark.integration
def test_a_method_and_a_dataset_from_a_package_are_listed_and_run(data_dir: Path, tmp_path: Path) -> None:
    methods, datasets = run_with_example("eval", "methods"), run_with_example("eval", "datasets")
    assert "shortest-option" in methods.stdout and "mcq-jsonl" in datasets.stdout
    assert "shortest-option" not in method_names()  # only where the package is installed

    rows = [json.loads(line) for line in (data_dir / "medqa" / "us_4options_test.jsonl").open()][:6]
    questions = tmp_path / "mcq.jsonl"
    questions.write_text(
        "".join(
            json.dumps(
                {"id": f"q{i}", "question": r["question"], "options": r["options"], "answer": r["answer_idx"]}
            )
            + "\n"
            for i, r in enumerate(rows)
        )
    )
    out = tmp_path / "run"
    result = run_with_example(
        "eval", "run", "--method", "shortest-option", "--dataset", "mcq-jsonl", "--data", str(questions),
        "--param", "power=2", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    chosen = {r.case_id: r.answer.result.choice for r in RunDirectory(out).results()}
    assert chosen == {
        f"q{i}": min(r["options"], key=lambda k: len(r["options"][k])) for i, r in enumerate(rows)
    }
    bad = run_with_example(
        "eval", "run", "--method", "shortest-option", "--dataset", "mcq-jsonl", "--data", str(questions),
        "--param", "power=-1", "--out", str(tmp_path / "bad"),
    )  # fmt: skip
    assert bad.returncode == 2 and "power" in bad.stderr and "Traceback" not in bad.stderr


def test_a_chat_backend_from_a_package_answers_over_http(server) -> None:
    server.replies = [(200, chat_body("Pleurisy."), 0.0)]
    port = str(urlparse(server.base_url).port)
    env = {
        "CLINRAG_LLM_BACKEND": "local-server",
        "CLINRAG_LLM_BASE_URL": port,
        "CLINRAG_CACHE_ENABLED": "false",
        **SCRIPTED_SETTINGS,
    }
    result = run_with_example("llm", "chat", "One cause of pleuritic chest pain?", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Pleurisy.") and len(server.requests) == 1
    # The backend takes the structured-output form and scoring mode from the settings.
    server.requests.clear()
    server.replies = [(200, ranking_body("Pleurisy", "Angina"), 0.0)]
    chosen = run_with_example(
        "llm", "choose", "Pleuritic chest pain?", "-o", "Angina", "-o", "Pleurisy", env=env
    )
    assert chosen.returncode == 0, chosen.stderr
    assert "scored by ranking" in chosen.stdout and "choice: Pleurisy" in chosen.stdout
    [request] = server.requests
    assert "ranking" in request["response_format"]["json_schema"]["schema"]["properties"]
    with pytest.raises(ConfigError, match="unknown chat backend 'local-server'"):
        build_chat_model(load_settings(llm_backend="local-server"))  # not installed in this process
