"""Schemathesis against the live server's OpenAPI spec: every operation, requests generated from the schema
(valid and invalid bodies, paths and parameters), and no answer may be a server error (5xx).

Consultations are pinned to `knn-vote` (no model: similar patients by embedding), so the fuzzer explores
the request space instead of waiting minutes on the embedded model per generated text; the model-backed
paths are exercised by test_api.py. Consultation sessions need no model: they are fuzzed as generated (on the
disease model built in the session's clinrag home)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

FAST_METHOD = "knn-vote"
OPERATIONS = [
    "GET /healthz",
    "POST /v1/consult",
    "POST /v1/consult/stream",
    "POST /v1/consult/sessions",
    "GET /v1/consult/sessions/{session_id}",
    "POST /v1/consult/sessions/{session_id}/answer",
    "POST /v1/ddx/sessions",
    "GET /v1/ddx/sessions/{session_id}",
    "POST /v1/ddx/sessions/{session_id}/answer",
    "GET /v1/answers/{answer_id}/evidence/{evidence_id}",
    "GET /v1/consult/sessions/{session_id}/evidence/{evidence_id}",
]


@pytest.fixture(scope="module")
def operations(live):
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    return {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in schema.get_all_operations())}


def test_the_spec_covers_the_api(operations) -> None:
    assert set(operations) == set(OPERATIONS)


@pytest.mark.parametrize("name", OPERATIONS)
def test_no_generated_request_gets_a_server_error(operations, name) -> None:
    statuses: list[int] = []

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=operations[name].as_strategy())
    def run(case) -> None:
        if isinstance(case.body, dict) and name in ("POST /v1/consult", "POST /v1/consult/stream"):
            case.body["method"] = FAST_METHOD
        response = case.call(timeout=120)
        statuses.append(response.status_code)
        assert response.status_code < 500, f"{response.status_code} for {case.as_curl_command()}"

    run()
    assert statuses  # the fuzzer did send requests
