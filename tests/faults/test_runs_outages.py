"""Outages are not results: `direct` on MedQA against a scripted OpenAI-compatible server on loopback
(tests/openai_server.py: the faults a real server will not produce on demand) that goes down mid-run,
answers malformed 200s, or a closed port. Before: every remaining case was stored as an error
result, the run exited 0 and a rerun never retried them. After: they are left for the next run.

One outage, several cases in flight (concurrency 4, the server failing the four requests in flight, then
answering again): before, the four failures counted as four outages in a row and stopped the run although
the server was back. After: they count as one; the run answers the other cases and leaves those four for the
next run (exit code 1), which answers exactly them. A server that stays down still stops the run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clinrag.core.errors import RunStoppedError
from clinrag.core.settings import load_settings
from clinrag.eval.results import RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from tests.app.test_cli import invoke_cli
from tests.openai_server import SCRIPTED_SETTINGS, SCRIPTED_SETTINGS_KWARGS, ScriptedServer, chat_body

OK = (200, chat_body("A"), 0.0)
DOWN = (500, {"error": {"message": "upstream died"}}, 0.0)
IN_FLIGHT = 4
# Requests that wait together, then fail: the server is down while they are in flight.
DOWN_IN_FLIGHT = (500, {"error": {"message": "upstream died"}}, 0.5)


def _runner(data_dir: Path, base_url: str, retries: int = 1) -> EvalRunner:
    settings = load_settings(
        data_dir=data_dir,
        llm_backend="openai",
        llm_base_url=base_url,
        llm_model="served-model",
        llm_max_retries=retries,
        llm_backoff_s=0.0,
        llm_timeout_s=2.0,
        **SCRIPTED_SETTINGS_KWARGS,
    )
    return EvalRunner(settings, progress=False)


def _request(out: Path, **extra) -> RunRequest:
    return RunRequest(dataset="medqa", method="direct", out=out, limit=6, concurrency=1, **extra)


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_server_going_down_mid_run_stops_it_and_the_rerun_retries(
    data_dir: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    # Two cases answered, then HTTP 500 for good (each case: one try and one retry).
    server.replies = [OK, OK, DOWN]
    with pytest.raises(RunStoppedError, match="3 cases in a row"):
        _runner(data_dir, server.base_url).run(_request(tmp_path / "run"))
    results = RunDirectory(tmp_path / "run").results()
    assert len(results) == 2 and all(r.answer.error is None for r in results)
    # The server is back: the rerun answers exactly the four cases the outage left.
    server.replies = [OK]
    served = len(server.requests)
    outcome = _runner(data_dir, server.base_url).run(_request(tmp_path / "run"))
    assert (outcome.skipped, outcome.ran, outcome.unanswered) == (2, 4, 0)
    assert len(server.requests) - served == 4
    assert outcome.summary.n_finished == 6 and outcome.summary.n_errors == 0


def test_a_closed_port_stores_nothing(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(RunStoppedError, match="ModelUnavailableError: cannot reach"):
        _runner(data_dir, _closed_port_url()).run(_request(tmp_path / "run"))
    assert RunDirectory(tmp_path / "run").results() == []


@pytest.mark.parametrize(
    "reply",
    [(200, {}, 0.0), (200, {"choices": []}, 0.0), (200, {"choices": [{"message": {"content": 7}}]}, 0.0)],
    ids=["empty-object", "no-choices", "content-not-text"],
)
def test_a_malformed_200_is_a_typed_outage_not_a_traceback(
    data_dir: Path, server: ScriptedServer, tmp_path: Path, reply
) -> None:
    # Before: `choices[0]` on the reply raised an untyped error that aborted the run with a traceback.
    server.replies = [reply]
    with pytest.raises(RunStoppedError, match="ModelReplyError"):
        _runner(data_dir, server.base_url).run(_request(tmp_path / "run"))
    assert RunDirectory(tmp_path / "run").results() == []


def test_a_lone_outage_leaves_its_case_for_the_next_run(
    data_dir: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    # The 3rd case fails (try and retry), the others are answered: the run finishes but says one is left.
    server.replies = [OK, OK, DOWN, DOWN, OK]
    outcome = _runner(data_dir, server.base_url).run(_request(tmp_path / "run"))
    assert (outcome.ran, outcome.unanswered, outcome.summary.n_finished) == (6, 1, 5)
    again = _runner(data_dir, server.base_url).run(_request(tmp_path / "run"))
    assert (again.skipped, again.ran, again.unanswered) == (5, 1, 0)


def test_a_method_failure_is_still_a_result(data_dir: Path, server: ScriptedServer, tmp_path: Path) -> None:
    server.replies = [(200, chat_body("I cannot tell."), 0.0)]
    outcome = _runner(data_dir, server.base_url).run(_request(tmp_path / "run"))
    assert outcome.summary.n_finished == 6 and outcome.summary.n_errors == 6 and outcome.unanswered == 0


EVAL_RUN = ("eval", "run", "--method", "direct", "--dataset", "medqa")


def _cli_env(data_dir: Path, base_url: str) -> dict[str, str]:
    return {
        "CLINRAG_DATA_DIR": str(data_dir),
        "CLINRAG_LLM_BACKEND": "openai",
        "CLINRAG_LLM_BASE_URL": base_url,
        "CLINRAG_LLM_MODEL": "served-model",
        "CLINRAG_LLM_MAX_RETRIES": "0",
        **SCRIPTED_SETTINGS,
    }


def test_cli_exits_non_zero_with_a_clear_message_on_an_outage(data_dir: Path, tmp_path: Path) -> None:
    result = invoke_cli(
        *EVAL_RUN, "--out", str(tmp_path / "run"), "--limit", "4", "--concurrency", "1", "--max-outages", "2",
        env=_cli_env(data_dir, _closed_port_url()),
    )  # fmt: skip
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert "RunStoppedError: stopped after 2 cases in a row" in output


def test_sigterm_with_a_model_call_in_flight_stops_promptly(
    data_dir: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    server.replies = [(200, chat_body("A"), 60.0)]  # each call would take a minute
    command = [sys.executable, "-m", "clinrag", *EVAL_RUN, "--limit", "4", "--concurrency", "1"]
    command += ["--out", str(tmp_path / "run")]
    env = {**os.environ, **_cli_env(data_dir, server.base_url)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.requests, "the run never called the model"
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert time.monotonic() - sent < 10
    assert process.returncode == 130
    assert "cancelling the 1 cases in flight" in " ".join(stderr.split())
    assert RunDirectory(tmp_path / "run").results() == []


def _in_flight(out: Path, limit: int) -> RunRequest:
    return RunRequest(dataset="medqa", method="direct", out=out, limit=limit, concurrency=IN_FLIGHT)


def test_the_cases_in_flight_during_an_outage_count_once(
    data_dir: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    server.replies = [DOWN_IN_FLIGHT] * IN_FLIGHT + [OK]
    outcome = _runner(data_dir, server.base_url, 0).run(_in_flight(tmp_path / "run", 8))
    assert server.max_in_flight == IN_FLIGHT
    assert (outcome.ran, outcome.unanswered, outcome.summary.n_finished) == (8, 4, 4)
    served = len(server.requests)
    again = _runner(data_dir, server.base_url, 0).run(_in_flight(tmp_path / "run", 8))
    assert (again.skipped, again.ran, again.unanswered) == (4, 4, 0)
    assert len(server.requests) - served == 4
    ids = [r.case_id for r in RunDirectory(tmp_path / "run").results()]
    assert len(ids) == len(set(ids)) == 8


def test_a_server_that_stays_down_stops_the_run_after_three_outages(
    data_dir: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    server.replies = [DOWN_IN_FLIGHT]
    with pytest.raises(RunStoppedError, match="3 cases in a row failed"):
        _runner(data_dir, server.base_url, 0).run(_in_flight(tmp_path / "run", 40))
    # Three outages, each seen by the cases in flight with it: at most 4 + 4 + 4 requests, not all 40.
    assert 3 < len(server.requests) <= 3 * IN_FLIGHT
    assert RunDirectory(tmp_path / "run").results() == []


def test_cli_goes_on_after_one_outage_and_says_what_is_left(
    data_dir: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    server.replies = [DOWN_IN_FLIGHT] * IN_FLIGHT + [OK]
    done = invoke_cli(
        *EVAL_RUN, "--out", str(tmp_path / "run"), "--limit", "8", "--concurrency", str(IN_FLIGHT),
        env=_cli_env(data_dir, server.base_url),
    )  # fmt: skip
    output = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, output
    assert "4 cases are unanswered" in output and "RunStoppedError" not in output
