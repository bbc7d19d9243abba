"""The HTTP API over real HTTP on loopback: consultations with evidence that resolves, progress streamed as
server-sent events, interactive consultations over the disease knowledge, interactive differential sessions
answered from a real DDXPlus patient's profile, and bad input refused with clear 4xx errors."""

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
from tests.app.web.conftest import CASE, CHEAP, EXAMPLE, LiveServer


def consult(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/consult", json={"method": "doctorrag", "text": CASE, **body}, timeout=600)


@pytest.fixture(scope="module")
def consult_ready(live) -> LiveServer:
    """The live server with its `consult` method built once for the module, on the disease model built in
    the session's clinrag home (`consult_home`), where `clinrag serve` in the browser tests finds it too."""
    live.consult.method("consult", {})
    return live


def top_three(report: dict) -> list[str]:
    return [d["name"] for d in report["differential"][:3]]


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
    under = f"{live.url}/v1/answers/{answer['case_id']}/evidence"
    for item in answer["evidence"]:
        resolved = httpx.get(f"{under}/{quote(item['id'], safe='')}")
        assert resolved.status_code == 200 and resolved.json() == item
    missing = httpx.get(f"{under}/kb:nothing-like-this")
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


def test_the_default_method_is_the_grounded_consultation(consult_ready) -> None:
    url = consult_ready.url
    response = httpx.post(f"{url}/v1/consult", json={"text": EXAMPLE}, timeout=600)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["method"] == "consult" and answer["error"] is None
    assert {"Pneumonia", "Acute Bronchitis"} & set(top_three(answer["details"]))
    assert answer["result"]["ddx"][0]["name"] == answer["details"]["differential"][0]["name"]
    cited = {i for s in answer["details"]["sentences"] for i in s["evidence"]}
    assert cited and cited <= {e["id"] for e in answer["evidence"]}
    with httpx.stream("POST", f"{url}/v1/consult/stream", json={"text": EXAMPLE}, timeout=600) as stream:
        last = [line for line in stream.iter_lines() if line.startswith("data: ")][-1]
    assert json.loads(last.removeprefix("data: "))["method"] == "consult"


def test_a_consultation_session_asks_refines_and_does_not_ask_again(consult_ready) -> None:
    url = consult_ready.url
    start = httpx.post(f"{url}/v1/consult/sessions", json={"text": EXAMPLE, "language": "en"}, timeout=600)
    assert start.status_code == 201, start.text
    state = start.json()
    report, session = state["report"], state["session_id"]
    assert {f["name"]: f["status"] for f in report["findings"]} == {
        "fever": "present",
        "productive cough": "present",
        "pleuritic chest pain": "present",
    }
    assert report["age"] == 45 and report["duration"] == "for 3 days" and not report["abstained"]
    assert {"Pneumonia", "Acute Bronchitis"} & set(top_three(report))
    assert report["questions"] and report["next_steps"] and state["text"].strip() and state["answered"] == []
    question = report["questions"][0]
    answered = httpx.post(
        f"{url}/v1/consult/sessions/{session}/answer", json={"concept": question["concept"], "answer": "yes"}
    )
    assert answered.status_code == 200, answered.text
    after = answered.json()
    assert after["answered"] == [{"concept": question["concept"], "answer": "yes"}]
    new = after["report"]
    assert question["concept"] not in {q["concept"] for q in new["questions"]}
    finding = next(f for f in new["findings"] if f["concept"] == question["concept"])
    assert finding["status"] == "present" and finding["text"] == "" and finding["name"] == question["finding"]

    def ranked(r: dict) -> list[tuple[str, float]]:
        return [(d["name"], round(d["probability"], 6)) for d in r["differential"]]

    assert ranked(new) != ranked(report)
    assert httpx.get(f"{url}/v1/consult/sessions/{session}").json() == after
    for item in after["evidence"][:20]:
        resolved = httpx.get(f"{url}/v1/consult/sessions/{session}/evidence/{quote(item['id'], safe='')}")
        assert resolved.status_code == 200 and resolved.json() == item
    doubt = new["questions"][0]["concept"]
    unsure = httpx.post(
        f"{url}/v1/consult/sessions/{session}/answer", json={"concept": doubt, "answer": "unknown"}
    )
    assert unsure.json()["answered"][-1] == {"concept": doubt, "answer": "unknown"}
    statuses = {f["concept"]: f["status"] for f in unsure.json()["report"]["findings"]}
    assert statuses[doubt] == "uncertain" and doubt not in {
        q["concept"] for q in unsure.json()["report"]["questions"]
    }


def test_a_consultation_that_understands_nothing_abstains(consult_ready) -> None:
    state = httpx.post(
        f"{consult_ready.url}/v1/consult/sessions", json={"text": "qwzx vbnm"}, timeout=600
    ).json()
    report = state["report"]
    assert report["abstained"] and report["abstention_reason"] == "no finding the patient has was understood"
    assert report["findings"] == [] and report["differential"] == [] and report["questions"] == []


def test_consultation_sessions_refuse_bad_input(consult_ready) -> None:
    url = consult_ready.url
    session = httpx.post(f"{url}/v1/consult/sessions", json={"text": EXAMPLE}, timeout=600).json()[
        "session_id"
    ]
    answer = f"{url}/v1/consult/sessions/{session}/answer"
    invalid = httpx.post(answer, json={"concept": "hpo:HP:9999999", "answer": "yes"})
    assert invalid.status_code == 422 and "unknown concept 'hpo:HP:9999999'" in invalid.json()["error"]
    maybe = httpx.post(answer, json={"concept": "hpo:HP:0001945", "answer": "maybe"})
    assert maybe.status_code == 422 and "body.answer" in maybe.json()["error"]
    for missing in (
        httpx.get(f"{url}/v1/consult/sessions/nope"),
        httpx.post(
            f"{url}/v1/consult/sessions/nope/answer", json={"concept": "hpo:HP:0001945", "answer": "no"}
        ),
    ):
        assert missing.status_code == 404 and "no session 'nope'" in missing.json()["error"]
    for words in ("", "   \n\t"):
        empty = httpx.post(f"{url}/v1/consult/sessions", json={"text": words})
        assert empty.status_code == 422 and "body.text" in empty.json()["error"]
    bad_params = httpx.post(f"{url}/v1/consult/sessions", json={"text": EXAMPLE, "params": {"questions": 99}})
    assert bad_params.status_code == 422 and "invalid consult parameters" in bad_params.json()["error"]
    no_data = {"text": EXAMPLE, "params": {"sources": "ddxplus:/nonexistent"}}
    assert httpx.post(f"{url}/v1/consult/sessions", json=no_data, timeout=600).status_code == 422


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
        ({"method": "doctorrag", "text": ""}, "the case is empty: give its text, HPO terms or a phenopacket"),
        ({"hpo": ["HP:166"]}, "body.hpo.0: String should match pattern"),
        ({"text": "fever", "surprise": 1}, "body.surprise: Extra inputs are not permitted"),
        ({"method": "doctorrag", "text": "fever", "params": {"k_statements": -1}}, "invalid doctorrag"),
    ],
)
def test_invalid_requests_are_422_with_a_message(live, body, message) -> None:
    response = httpx.post(f"{live.url}/v1/consult", json=body)
    assert response.status_code == 422 and message in response.json()["error"]


def test_a_patient_given_as_hpo_terms_or_a_phenopacket(live, data_dir) -> None:
    marfan = {"hpo": ["HP:0001166", "HP:0001083", "HP:0000767", "HP:0002616"], "excluded_hpo": ["HP:0001249"]}
    answer = httpx.post(f"{live.url}/v1/consult", json=marfan, timeout=120).json()
    assert answer["result"]["ddx"][0]["code"] == "OMIM:154700", answer["result"]["ddx"][:3]
    findings = {f["concept"]: f["status"] for f in answer["details"]["findings"]}
    assert findings["hpo:HP:0001166"] == "present" and findings["hpo:HP:0001249"] == "absent"
    cited = " ".join(e["text"] for e in answer["evidence"] if e["id"].startswith("graph:Marfan syndrome|"))
    assert "PMID:" in cited  # the publications behind the annotations
    packet = json.loads(next((data_dir / "phenopackets" / "AAGAB").glob("*.json")).read_text())
    answer = httpx.post(f"{live.url}/v1/consult", json={"phenopacket": packet}, timeout=120).json()
    assert answer["result"]["ddx"] and answer["details"]["findings"]
    broken = httpx.post(f"{live.url}/v1/consult", json={"phenopacket": {"subject": 1}}, timeout=120)
    assert broken.status_code == 422 and "phenopacket" in broken.json()["error"]


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
    auth = {"Authorization": "Bearer s3cret-operator-token"}
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
        url,
        json={"method": "doctorrag", "text": CASE + " (timeout test)", "params": {"refine_iterations": 1}},
        headers=auth,
    )
    assert slow.status_code == 504 and "longer than 0.5 s" in slow.json()["error"]
    assert httpx.get(f"{secured.url}/healthz").status_code == 200  # health needs no token


def test_logs_name_the_request_but_not_the_patient_text(live, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="clinrag.api"):
        consult(live.url, params=CHEAP)
    (record,) = [r for r in caplog.records if r.name == "clinrag.api"]
    assert "method=doctorrag" in record.getMessage() and "status=200" in record.getMessage()
    assert "papules" not in record.getMessage()


@pytest.mark.integration  # `serve` in a process of its own: a refusal that fails cannot serve from here
def test_serving_beyond_loopback_needs_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    result = run_cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode != 0 and "needs a bearer token" in result.stdout + result.stderr
