"""The API over real HTTP on loopback: a client's method name cannot forge a log line, `knn-vote` answers
from the server's patient base, the UI pages and the API docs need the token, and a body that is not UTF-8
is refused in the usual error shape."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from clinrag.app.web.api import create_app
from clinrag.app.web.services import ConsultService
from clinrag.core.settings import Settings
from clinrag.patients.defaults import open_patient_base
from tests.app.web.conftest import start_server

TOKEN = "s3cret-operator-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
VIGNETTE = (
    "A 34-year-old woman has itchy, red, scaly plaques on the elbows and knees with silvery scales, worse "
    "in winter. What is the diagnosis?"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, minilm_embedder) -> Iterator[str]:
    settings = Settings(home=tmp_path_factory.mktemp("api-home"), api_token=TOKEN)
    base = open_patient_base(
        settings, minilm_embedder, dataset="icraft", data_path=data_dir / "icraft_md" / "craft_md.jsonl"
    )
    consult = ConsultService(settings, patient_base=base, embedder=lambda _: minilm_embedder)
    uvicorn_server, thread, url = start_server(create_app(consult))
    yield url
    uvicorn_server.should_exit = True
    thread.join(timeout=10)


def test_a_newline_in_the_method_cannot_forge_a_log_line(server: str, caplog) -> None:
    forged = "knn-vote\nconsult method=doctorrag status=200"  # within the 64-character limit
    with caplog.at_level(logging.INFO, logger="clinrag.api"):
        response = httpx.post(
            f"{server}/v1/consult", json={"method": forged, "text": "fever"}, headers=AUTH, timeout=60
        )
    assert response.status_code == 422
    (record,) = [r for r in caplog.records if r.name == "clinrag.api"]
    message = record.getMessage()
    assert "\n" not in message and "\r" not in message
    assert "method=knn-vote\\nconsult" in message and "status=422" in message


def test_knn_vote_answers_from_the_patient_base(server: str) -> None:
    body = {"method": "knn-vote", "text": VIGNETTE, "task": "diagnosis"}
    response = httpx.post(f"{server}/v1/consult", json=body, headers=AUTH, timeout=120)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["error"] is None
    assert answer["result"]["ddx"] and answer["result"]["ddx"][0]["probability"] > 0
    assert {e["kind"] for e in answer["evidence"]} == {"patient"}


@pytest.mark.parametrize("path", ["/", "/advanced", "/ddx", "/docs", "/openapi.json"])
def test_pages_and_docs_need_the_token(server: str, path: str) -> None:
    refused = httpx.get(f"{server}{path}")
    assert refused.status_code == 401
    assert "clinrag" not in refused.text.lower() or "token" in refused.text.lower()
    assert httpx.get(f"{server}{path}", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert httpx.get(f"{server}{path}", headers=AUTH).status_code == 200


def test_a_browser_enters_the_token_once(server: str) -> None:
    with httpx.Client(base_url=server, follow_redirects=False) as browser:
        assert browser.get("/advanced").status_code == 401
        wrong = browser.post("/ui/token", data={"token": "nope", "next": "/advanced"})
        assert wrong.status_code == 401 and not browser.cookies
        entered = browser.post("/ui/token", data={"token": TOKEN, "next": "/advanced"})
        assert entered.status_code == 303 and entered.headers["location"] == "/advanced"
        assert "httponly" in entered.headers["set-cookie"].lower()
        assert browser.get("/advanced").status_code == 200
        assert browser.get("/docs").status_code == 200
        offsite = browser.post("/ui/token", data={"token": TOKEN, "next": "//evil.example/"})
        assert offsite.headers["location"] == "/"


def test_a_body_that_is_not_utf8_gets_the_usual_error_shape(server: str) -> None:
    response = httpx.post(
        f"{server}/v1/consult",
        content=b'{"text": "fever \xff\xfe cough"}',
        headers={**AUTH, "content-type": "application/json"},
    )
    assert response.status_code == 422
    body = response.json()
    assert set(body) == {"error", "detail"} and "UTF-8 JSON" in body["error"]
