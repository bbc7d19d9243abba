"""The HTTP API over real HTTP on loopback: consultations with evidence that resolves, progress streamed as
server-sent events, interactive differential sessions answered from a real DDXPlus patient's profile, and
bad input refused with clear 4xx errors."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

import httpx
import pytest

from clinrag.app.serve_commands import is_loopback
from clinrag.eval.sampling import sample_cases
from clinrag.methods.meddx.structured_patient import StructuredPatient, evidence_catalogue
from tests.app.test_cli import run_cli
from tests.app.web.conftest import CASE, CHEAP


def consult(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/consult", json={"method": "doctorrag", "text": CASE, **body}, timeout=600)


def test_health_names_the_methods(live) -> None:
    health = httpx.get(f"{live.url}/healthz").json()
    assert health["status"] == "ok" and health["ddx"] is True
    assert {"doctorrag", "meddx", "meddx-experience"} <= set(health["methods"])


def test_consult_returns_the_answer_with_evidence_that_resolves(live) -> None:
    response = consult(live.url, params=CHEAP)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["text"].strip() and answer["error"] is None
    kinds = {e["kind"] for e in answer["evidence"]}
    assert kinds == {"statement", "patient"}
    assert answer["trace"]["steps"][0]["name"] == "retrieve"
    for item in answer["evidence"]:
        resolved = httpx.get(f"{live.url}/v1/evidence/{quote(item['id'], safe='')}")
        assert resolved.status_code == 200 and resolved.json() == item
    missing = httpx.get(f"{live.url}/v1/evidence/kb:nothing-like-this")
    assert missing.status_code == 404 and "no evidence" in missing.json()["error"]


def test_stream_sends_each_step_then_the_answer(live) -> None:
    events = []
    body = {"method": "doctorrag", "text": CASE, "params": CHEAP}
    with httpx.stream("POST", f"{live.url}/v1/consult/stream", json=body, timeout=600) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    kinds = [k for k, _ in events]
    assert kinds[-1] == "answer" and set(kinds[:-1]) == {"step"}
    answer = events[-1][1]
    assert [data["name"] for _, data in events[:-1]] == [s["name"] for s in answer["trace"]["steps"]]


def test_an_interactive_differential_reaches_the_patients_diagnosis(live, ddxplus_interactive) -> None:
    # The server's patient base is the whole release, this patient included, as a deployed server's would be.
    case = sample_cases(ddxplus_interactive.cases, 1, seed=3)[0]
    patient = StructuredPatient(case, evidence_catalogue(case.meta["evidence_catalogue"]))
    complaint = patient.initial_evidence
    start = httpx.post(
        f"{live.url}/v1/ddx/sessions",
        json={"sex": case.patient.demographics.sex, "complaint": complaint},
    )
    assert start.status_code == 201, start.text
    state = start.json()
    session = state["session_id"]
    tops = []
    while not state["done"]:
        question = state["question"]
        reply = patient.ask(question["evidence"])  # the person answers from this patient's profile
        body = {"answer": "yes" if reply.present else "no", "values": sorted(reply.values)}
        state = httpx.post(f"{live.url}/v1/ddx/sessions/{session}/answer", json=body).json()
        tops.append(state["differential"][0]["probability"])
    assert state["questions_asked"] == len(tops) and state["stop_reason"] in ("confident", "max_questions")
    assert state["differential"][0]["name"] == case.gold.answer
    assert httpx.get(f"{live.url}/v1/ddx/sessions/{session}").json() == state
    ended = httpx.post(f"{live.url}/v1/ddx/sessions/{session}/answer", json={"answer": "no"})
    assert ended.status_code == 422 and "ended" in ended.json()["error"]


def test_ddx_sessions_start_from_words_and_refuse_bad_answers(live) -> None:
    state = httpx.post(f"{live.url}/v1/ddx/sessions", json={"complaint": "I have been coughing"}).json()
    assert state["dialogue"][0] == {"question": "Do you have a cough?", "answer": "Yes"}
    session = state["session_id"]
    bad = {"answer": "yes", "values": ["V_nonexistent"]}
    refused = httpx.post(f"{live.url}/v1/ddx/sessions/{session}/answer", json=bad)
    assert refused.status_code == 422 and "V_nonexistent" in refused.json()["error"]
    unknown = httpx.post(f"{live.url}/v1/ddx/sessions/nope/answer", json={"answer": "no"})
    assert unknown.status_code == 404 and "no session" in unknown.json()["error"]
    nonsense = httpx.post(f"{live.url}/v1/ddx/sessions", json={"complaint": "qwzx vbnm"})
    assert nonsense.status_code == 422 and "no symptom matches" in nonsense.json()["error"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"method": "no-such-method", "text": "fever"}, "unknown method 'no-such-method'; valid methods:"),
        ({"method": "doctorrag", "text": ""}, "body.text: String should have at least 1 character"),
        ({"text": "fever", "surprise": 1}, "body.surprise: Extra inputs are not permitted"),
        ({"method": "doctorrag", "text": "fever", "params": {"k_statements": -1}}, "invalid doctorrag"),
    ],
)
def test_invalid_requests_are_422_with_a_message(live, body, message) -> None:
    response = httpx.post(f"{live.url}/v1/consult", json=body)
    assert response.status_code == 422 and message in response.json()["error"]


def test_malformed_json_is_422(live) -> None:
    response = httpx.post(
        f"{live.url}/v1/consult", content=b'{"text": "fever",', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and "JSON decode error" in response.json()["error"]


def test_token_body_limit_and_timeout(secured) -> None:
    url = f"{secured.url}/v1/consult"
    missing = httpx.post(url, json={"text": "fever"})
    assert missing.status_code == 401 and "bearer token" in missing.json()["error"]
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(url, json={"text": "fever"}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    auth = {"Authorization": "Bearer s3cret"}
    huge = httpx.post(url, json={"text": "x" * 10_000}, headers=auth)
    assert huge.status_code == 413 and "larger than 4096 bytes" in huge.json()["error"]

    def chunks():  # no Content-Length: the limit applies to the streamed body
        yield b'{"text": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}'

    streamed = httpx.post(url, content=chunks(), headers={**auth, "content-type": "application/json"})
    assert streamed.status_code == 413
    slow = httpx.post(
        url, json={"text": CASE + " (timeout test)", "params": {"refine_iterations": 1}}, headers=auth
    )
    assert slow.status_code == 504 and "longer than 0.5 s" in slow.json()["error"]
    assert httpx.get(f"{secured.url}/healthz").status_code == 200  # health needs no token


def test_logs_name_the_request_but_not_the_patient_text(live, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="clinrag.api"):
        consult(live.url, params=CHEAP)
    (record,) = [r for r in caplog.records if r.name == "clinrag.api"]
    assert "method=doctorrag" in record.getMessage() and "status=200" in record.getMessage()
    assert "papules" not in record.getMessage()


def test_serving_beyond_loopback_needs_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    result = run_cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode != 0 and "needs a bearer token" in result.stdout + result.stderr
