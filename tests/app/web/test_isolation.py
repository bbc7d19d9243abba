"""The service facing other people's traffic, over real HTTP on loopback with the real consultation (the
packaged knowledge, the packaged embedder): an empty token is no token; evidence resolves only under the
answer or session that gave it; sessions keep no method alive and methods share their heavy parts; a build
that hangs stalls no one else and every endpoint keeps the deadline; requests' parameters reach only the
files and graphs the operator allowed; bad requests get typed, bounded errors; slow clients are cut off."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from clinrag.app.web.api import create_app
from clinrag.app.web.services import BoundedStore, ConsultService
from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.methods.registry import get_method
from clinrag.methods.resources import ResourcePolicy
from tests.app.test_cli import run_cli
from tests.app.web.conftest import start_server

TOKEN = "an-operator-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TIMEOUT_S = 4.0


@pytest.fixture(scope="module")
def silent_graph() -> Iterator[str]:
    """A graph URI whose port accepts connections and never answers (a listening socket nobody serves)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}"


@pytest.fixture(scope="module")
def guarded(
    web_home: Path, minilm_embedder, silent_graph: str, data_dir: Path
) -> Iterator[tuple[str, ConsultService]]:
    settings = Settings(
        home=web_home,
        api_token=TOKEN,
        api_timeout_s=TIMEOUT_S,
        api_header_timeout_s=1.0,
        api_body_timeout_s=1.0,
        api_graph_uris=[silent_graph],
        api_data_roots=[data_dir / "icraft_md"],
    )
    consult = ConsultService(settings, embedder=lambda _: minilm_embedder, method_capacity=2)
    # built and run once before serving: the first build and the embedder's start outlast the deadline
    consult.method("consult", {}).answer(Case(id="warm", question="I have a fever and a cough."))
    server, thread, url = start_server(create_app(consult))
    yield url, consult
    server.should_exit = True
    thread.join(timeout=10)


@pytest.mark.integration  # `serve` in a process of its own: a refusal that fails cannot serve from here
def test_an_empty_or_blank_token_is_refused_not_taken_for_none(tmp_path: Path) -> None:
    for token in ("", "   "):
        with pytest.raises(ConfigError, match="CLINRAG_API_TOKEN is empty"):
            create_app(ConsultService(Settings(home=tmp_path, api_token=token)))
    served = run_cli("serve", "--host", "0.0.0.0", "--port", "0", env={"CLINRAG_API_TOKEN": ""}, timeout=60)
    assert served.returncode == 2, served.stdout + served.stderr
    assert "CLINRAG_API_TOKEN is empty" in served.stdout + served.stderr


def test_a_short_or_invisible_token_is_refused(tmp_path: Path) -> None:
    """A token guessed in a few requests, or one that looks empty, guards nothing."""
    for token, why in (
        ("x", "1 characters, fewer than 16"),
        ("a-token-of-15ch", "15 characters"),
        ("\u200b" * 20, "invisible"),
        ("a-token-with-a\u200bzero-width-space", "invisible"),
        ("a token with spaces inside", "space character"),
    ):
        with pytest.raises(ConfigError, match=why):
            create_app(ConsultService(Settings(home=tmp_path, api_token=token)))
    assert create_app(ConsultService(Settings(home=tmp_path, api_token="a-token-of-16chr"))) is not None


@pytest.mark.integration
def test_no_allowed_host_or_an_unknown_log_level_is_refused_in_one_line() -> None:
    """Settings that would answer every client 400, and a log level that does not exist, stop `serve`
    with a one-line message and exit code 2, not a traceback."""
    for args, env, message in (
        ((), {"CLINRAG_API_ALLOWED_HOSTS": ""}, "CLINRAG_API_ALLOWED_HOSTS is empty"),
        (("--log-level", "nope"), {}, "nope"),
    ):
        served = run_cli("serve", "--port", "0", *args, env=env, timeout=60)
        output = served.stdout + served.stderr
        assert served.returncode == 2 and message in output and "Traceback" not in output, output


@pytest.mark.integration
def test_a_missing_knowledge_base_or_an_unknown_graph_scheme_stops_serve(tmp_path: Path) -> None:
    for args, message in (
        (("--kb", str(tmp_path / "nonexistent")), "no knowledge base there"),
        (("--allow-graph", "http://x"), "unsupported graph URI 'http://x'"),
    ):
        served = run_cli("serve", "--port", "0", *args, timeout=60)
        output = served.stdout + served.stderr
        assert served.returncode == 2 and message in output and "Traceback" not in output, output


@pytest.mark.integration
def test_serving_every_address_needs_the_names_clients_use() -> None:
    served = run_cli(
        "serve", "--host", "0.0.0.0", "--port", "0", env={"CLINRAG_API_TOKEN": TOKEN}, timeout=60
    )
    assert served.returncode == 2 and "CLINRAG_API_ALLOWED_HOSTS" in served.stdout + served.stderr


def test_unauthenticated_requests_are_refused(guarded) -> None:
    url, _ = guarded
    assert httpx.post(f"{url}/v1/consult", json={"text": "fever"}).status_code == 401
    assert httpx.get(f"{url}/openapi.json").status_code == 401


def _finding(answer: dict, name: str) -> dict:
    return next(e for e in answer["evidence"] if e["id"].startswith("finding:") and name in e["text"].lower())


def test_evidence_resolves_only_under_the_answer_that_gave_it(guarded) -> None:
    url, _ = guarded
    first = httpx.post(
        f"{url}/v1/consult", json={"text": "I have had a high fever and a cough."}, headers=AUTH
    )
    second = httpx.post(f"{url}/v1/consult", json={"text": "A cough, but no fever at all."}, headers=AUTH)
    assert first.status_code == second.status_code == 200, first.text + second.text
    a, b = first.json(), second.json()
    mine, theirs = _finding(a, "fever"), _finding(b, "fever")
    assert mine["id"] == theirs["id"] and mine["text"] != theirs["text"]  # the same concept, other words
    item = quote(mine["id"], safe="")
    resolved = httpx.get(f"{url}/v1/answers/{a['case_id']}/evidence/{item}", headers=AUTH)
    assert resolved.status_code == 200 and resolved.json() == mine
    assert httpx.get(f"{url}/v1/answers/{b['case_id']}/evidence/{item}", headers=AUTH).json() == theirs
    assert httpx.get(f"{url}/v1/evidence/{item}", headers=AUTH).status_code == 404  # no global look-up
    guessed = httpx.get(f"{url}/v1/answers/api-{'0' * 32}/evidence/{item}", headers=AUTH)
    assert guessed.status_code == 404 and "fever" not in guessed.text


def test_a_sessions_evidence_resolves_only_under_that_session(guarded) -> None:
    url, _ = guarded
    starts = [
        httpx.post(f"{url}/v1/consult/sessions", json={"text": text}, headers=AUTH, timeout=60)
        for text in ("I have a fever and a sore throat.", "No fever. My throat is sore.")
    ]
    assert [s.status_code for s in starts] == [201, 201], [s.text for s in starts]
    (a, b) = (s.json() for s in starts)
    mine = _finding(a, "fever")
    path = f"evidence/{quote(mine['id'], safe='')}"
    assert httpx.get(f"{url}/v1/consult/sessions/{a['session_id']}/{path}", headers=AUTH).json() == mine
    other = httpx.get(f"{url}/v1/consult/sessions/{b['session_id']}/{path}", headers=AUTH).json()
    assert mine["text"].startswith("fever: present") and other["text"].startswith("fever: absent")


def test_sessions_with_distinct_parameters_keep_memory_bounded(guarded) -> None:
    """Memory is what Python and numpy hold (tracemalloc), not the process's RSS: the allocator's arenas
    keep freed pages for a while, so RSS moves by tens of MB from one request to the next."""
    url, consult = guarded

    def start(rate: float) -> str:
        body = {"text": "I have a fever and a cough.", "params": {"mention_rate": rate}}
        started = httpx.post(f"{url}/v1/consult/sessions", json=body, headers=AUTH, timeout=60)
        assert started.status_code == 201, started.text
        return started.json()["session_id"]

    def held() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        before = held()
        sessions = [start(0.05)]
        one_method = held() - before
        sessions += [start(0.05 + 0.025 * n) for n in range(1, 13)]
        grown = held() - before - one_method
    finally:
        tracemalloc.stop()
    # twelve more methods were built and two are kept (the first among them at most): kept, the twelve
    # would hold twelve times one method's memory
    assert one_method > 1_000_000 and grown < 2 * one_method, (one_method, grown)
    # each session is still answered, by its own parameters, though only 2 methods are kept
    for session in sessions:
        assert httpx.get(f"{url}/v1/consult/sessions/{session}", headers=AUTH).status_code == 200
    one, other = (consult.method("consult", {"mention_rate": r}) for r in (0.05, 0.35))
    assert one is not other and one.consultant.extractors("en") is other.consultant.extractors("en")
    assert one.consultant.differential.model is other.consultant.differential.model


def test_the_kept_store_is_bounded_by_count_bytes_and_idle_time() -> None:
    now = [0.0]
    store: BoundedStore[str] = BoundedStore(3, 100, 60.0, size=len, clock=lambda: now[0])
    for key in "abcd":
        store.put(key, "x" * 10)
    assert len(store) == 3 and store.get("a") is None  # the least recently used went first
    store.put("big", "y" * 80)
    assert store.bytes <= 100 and store.get("big") is not None
    with pytest.raises(InvalidInputError):
        store.put("huge", "z" * 101)
    now[0] = 61.0
    assert store.get("big") is None and len(store) == 0  # idle past the time to live


def test_a_graph_that_never_answers_stalls_no_one_else(guarded, silent_graph) -> None:
    url, _ = guarded
    hanging: list[tuple[int, float]] = []

    def ask_the_silent_graph() -> None:
        body = {"method": "graph-infer", "text": "fever and cough", "task": "diagnosis"}
        began = time.monotonic()
        reply = httpx.post(
            f"{url}/v1/consult", json={**body, "params": {"graph": silent_graph}}, headers=AUTH, timeout=60
        )
        hanging.append((reply.status_code, time.monotonic() - began))

    thread = threading.Thread(target=ask_the_silent_graph)
    thread.start()
    time.sleep(0.5)
    took = []
    for _ in range(5):
        began = time.monotonic()
        reply = httpx.post(f"{url}/v1/consult", json={"text": "I have a fever."}, headers=AUTH, timeout=60)
        took.append(time.monotonic() - began)
        assert reply.status_code == 200, reply.text
    thread.join(timeout=60)
    assert max(took) < 2.0, took
    ((status, waited),) = hanging
    assert status == 504 and waited < TIMEOUT_S + 2


def test_every_endpoint_keeps_the_deadline(web_home: Path, minilm_embedder) -> None:
    settings = Settings(home=web_home, api_timeout_s=0.5)
    server, thread, url = start_server(
        create_app(ConsultService(settings, embedder=lambda _: minilm_embedder))
    )
    try:
        began = time.monotonic()  # the session's method is not built yet: its build outlasts the deadline
        started = httpx.post(f"{url}/v1/consult/sessions", json={"text": "I have a fever."}, timeout=120)
        assert started.status_code == 504 and time.monotonic() - began < 2.5
        assert "longer than 0.5 s" in started.json()["error"]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_parameters_reach_only_what_the_operator_allowed(guarded) -> None:
    url, _ = guarded
    for params in ({"patients": "icraft:/etc/passwd"}, {"kb": "/etc"}, {"sources": "ddxplus:/etc"}):
        refused = httpx.post(
            f"{url}/v1/consult/sessions", json={"text": "fever", "params": params}, headers=AUTH
        )
        assert refused.status_code == 422 and "CLINRAG_API_DATA_ROOTS" in refused.json()["error"]
        assert "lines" not in refused.text and "passwd" not in refused.json()["error"]
    with socket.socket() as listener:  # a graph server that would answer: the request never reaches it
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.5)
        uri = f"redis://127.0.0.1:{listener.getsockname()[1]}"
        body = {"method": "graph-infer", "text": "fever", "task": "diagnosis", "params": {"graph": uri}}
        refused = httpx.post(f"{url}/v1/consult", json=body, headers=AUTH)
        assert refused.status_code == 422 and "CLINRAG_API_GRAPH_URIS" in refused.json()["error"]
        with pytest.raises(TimeoutError):
            listener.accept()


def test_a_path_is_inside_a_root_only_when_it_really_is(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    policy = ResourcePolicy([root])
    config = get_method("doctorrag").config
    policy.check(config.from_params({"kb": str(root / "kb")}))
    for path in (outside, root / "escape" / "kb", root / ".." / "outside"):
        with pytest.raises(InvalidInputError, match="CLINRAG_API_DATA_ROOTS"):
            policy.check(config.from_params({"kb": str(path)}))
    packaged = get_method("consult").config.from_params({"sources": "packaged:hpo-diseases"})
    policy.check(packaged)  # a packaged source names no path


def test_pages_of_other_sites_and_rebound_names_are_refused(guarded) -> None:
    url, _ = guarded
    rebound = httpx.get(f"{url}/healthz", headers={"Host": "attacker.example"})
    assert rebound.status_code == 400
    form = {"text": "fever", "method": "knn-vote"}
    posted = httpx.post(f"{url}/ui/consult", data=form, headers={**AUTH, "Origin": "http://attacker.example"})
    assert posted.status_code == 403
    fetched = httpx.post(f"{url}/v1/consult", json=form, headers={**AUTH, "Sec-Fetch-Site": "cross-site"})
    assert fetched.status_code == 403
    own = httpx.post(f"{url}/ui/consult", data=form, headers={**AUTH, "Origin": url})
    assert own.status_code == 200
    # no other site may frame a page or run a script in it; a refusal says so too
    for response in (own, rebound, httpx.get(f"{url}/ui", headers=AUTH)):
        assert response.headers["x-frame-options"] == "DENY"
        policy = response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self';" in policy
        assert response.headers["x-content-type-options"] == "nosniff"


def test_deep_huge_or_mistyped_parameters_are_bounded_invalid_input(guarded) -> None:
    url, _ = guarded
    for levels, problem in ((50_000, "characters"), (5_000, "nest")):
        deep = "[" * levels + "]" * levels
        page = httpx.post(f"{url}/ui/consult", data={"text": "fever", "params": deep}, headers=AUTH)
        assert page.status_code == 200 and 'data-status="422"' in page.text and problem in page.text
    body = '{"text": "fever", "params": {"a": ' + deep + "}}"
    api = httpx.post(f"{url}/v1/consult", content=body, headers={**AUTH, "content-type": "application/json"})
    assert api.status_code == 422
    boolean = httpx.post(
        f"{url}/v1/consult", json={"text": "fever", "params": {"questions": True}}, headers=AUTH
    )
    assert boolean.status_code == 422 and "expected a number" in boolean.json()["error"]
    scheme = {"method": "graph-infer", "text": "fever", "params": {"graph": "http://127.0.0.1:1"}}
    unsupported = httpx.post(f"{url}/v1/consult", json=scheme, headers=AUTH)
    assert unsupported.status_code == 422 and "unsupported graph URI" in unsupported.json()["error"]
    many = {"text": "fever", "params": {f"unknown_{i}_{'x' * 40}": 1 for i in range(99)}}
    reply = httpx.post(f"{url}/v1/consult", json=many, headers=AUTH)
    assert reply.status_code == 422 and len(reply.content) < 5_000 and "more" in reply.json()["error"]


def test_clients_that_hold_a_connection_without_a_request_are_cut_off(guarded) -> None:
    url, _ = guarded
    host, port = url.removeprefix("http://").split(":")
    with (
        socket.create_connection((host, int(port))) as idle,
        socket.create_connection((host, int(port))) as slow,
    ):
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a head that never ends
        for connection in (idle, slow):
            connection.settimeout(5)
            began = time.monotonic()
            assert connection.recv(1024) == b""  # closed by the server, not timed out here
            assert time.monotonic() - began < 4


def test_a_body_that_never_arrives_is_cut_off_before_the_request_deadline(guarded) -> None:
    """A request announcing 100 bytes of body and sending none (or half) gets 408 once the body deadline
    passes, well before the request deadline (504), and its connection is closed."""
    url, _ = guarded
    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/consult HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    for sent in (b"", b'{"text": "fev'):
        with socket.create_connection((host, int(port))) as client:
            client.settimeout(TIMEOUT_S + 2)
            began = time.monotonic()
            client.sendall(head + sent)
            reply = b""
            while chunk := client.recv(4096):
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
            assert b"did not arrive within 1 s" in reply
            assert time.monotonic() - began < TIMEOUT_S
    assert httpx.post(f"{url}/v1/consult", json={"text": "fever"}, headers=AUTH).status_code == 200


@pytest.mark.integration
def test_serve_stops_within_its_shutdown_deadline_while_a_request_hangs(
    silent_graph: str, tmp_path: Path
) -> None:
    """SIGTERM while a request waits on a graph that never answers: `serve` cuts it after
    CLINRAG_API_SHUTDOWN_TIMEOUT_S and exits, instead of waiting for the graph (a service manager would
    otherwise escalate to SIGKILL and orphan the packaged graph server)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "CLINRAG_HOME": str(tmp_path / "home"),
        "CLINRAG_API_GRAPH_URIS": silent_graph,
        "CLINRAG_API_SHUTDOWN_TIMEOUT_S": "2",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "clinrag", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.5)
        hanging = {"method": "graph-infer", "text": "fever", "params": {"graph": silent_graph}}

        def ask() -> None:
            with contextlib.suppress(httpx.HTTPError):  # cut at shutdown
                httpx.post(f"{url}/v1/consult", json=hanging, timeout=120)

        client = threading.Thread(target=ask, daemon=True)
        client.start()
        time.sleep(2)  # the request is waiting on the graph
        began = time.monotonic()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
        assert time.monotonic() - began < 15
    finally:
        if server.poll() is None:
            server.kill()
