"""The CLI's warm consultation process, for real: `clinrag consult` started as a user starts it, the process
it leaves behind listening on its owner-only socket, the same answer from it, a malformed request refused
without harm, and the process gone once idle."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clinrag.app import warm
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.core.settings import load_settings

TEXT = "I am 45 and have had a fever, a productive cough and chest pain when I breathe for three days."


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(str(path)) == 0


def _gone(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: ask the system
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return finished == pid


@pytest.fixture
def warm_home(consult_home: Path, monkeypatch: pytest.MonkeyPatch):
    """The compiled default knowledge as home, warm processes allowed; any left behind is stopped."""
    monkeypatch.setenv("CLINRAG_HOME", str(consult_home))
    monkeypatch.setenv("CLINRAG_CONSULT_WARM_S", "120")
    yield consult_home
    _stop_warm_processes(consult_home / "run")


def _stop_warm_processes(run: Path) -> None:
    """SIGTERM to every warm process serving a socket under `run` (read from /proc: no pkill needed)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"clinrag.app.warm" in words and any(w.startswith(str(run).encode()) for w in words):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(cmdline.parent.name), signal.SIGTERM)


def _consult_json() -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "clinrag", "consult", TEXT, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_first_consultation_leaves_a_warm_process_that_gives_the_same_answer(warm_home: Path) -> None:
    first = _consult_json()  # answered here; starts the warm process for the next one
    path = warm.warm_socket(load_settings())
    assert path is not None and path.parent == warm_home / "run"
    assert _wait(lambda: _listening(path), 120), "the warm process never listened"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    assert not path.with_suffix(".starting").exists()

    served = warm.ask(path, {}, Case(id="consult", question=TEXT), timeout_s=60)
    assert served is not None
    second = _consult_json()
    for answer in (served.model_dump(mode="json"), second):
        assert answer["text"] == first["text"]
        assert answer["details"]["differential"] == first["details"]["differential"]
    # another user's knowledge (a file path) is never answered from the warm process
    assert not warm.servable({"sources": "ddxplus:/data/ddxplus"})
    assert not warm.servable({"patients": "ddxplus:/data/ddxplus"})
    assert warm.servable({"sources": "packaged:conditions,packaged:ddxplus"})


def test_a_malformed_request_is_answered_with_an_error_and_the_process_lives_on(warm_home: Path) -> None:
    path = warm.warm_socket(load_settings())
    pid = warm.spawn(path, load_settings())
    assert pid is not None
    try:
        assert _wait(lambda: _listening(path), 120)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(30)
            client.connect(str(path))
            payload = b"{not json"
            client.sendall(struct.pack("!I", len(payload)) + payload)
            size = struct.unpack("!I", client.recv(4))[0]
            reply = json.loads(client.recv(size))
        assert "malformed request" in reply["error"]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:  # too big: refused unread
            client.connect(str(path))
            client.sendall(struct.pack("!I", warm.MAX_MESSAGE_BYTES + 1))
            size = struct.unpack("!I", client.recv(4))[0]
            assert "malformed request" in json.loads(client.recv(size))["error"]
        answer = warm.ask(path, {}, Case(id="after", question=TEXT), timeout_s=60)
        assert answer is not None and answer.result is not None
        with pytest.raises(InvalidInputError, match="questions"):  # the error's type crosses the socket
            warm.ask(path, {"questions": 99}, Case(id="bad", question=TEXT), timeout_s=60)
    finally:
        os.kill(pid, signal.SIGTERM)  # stops as when idle: its socket and log go
        assert _wait(lambda: _gone(pid), 30)
        assert not path.exists() and not path.with_suffix(".log").exists()


def test_the_warm_process_stops_when_idle(warm_home: Path) -> None:
    settings = load_settings().model_copy(update={"consult_warm_s": 2.0})
    path = warm.warm_socket(settings)
    pid = warm.spawn(path, settings)
    assert pid is not None
    assert warm.spawn(path, settings) is None  # one already loading: no second one
    assert _wait(lambda: _listening(path), 120)
    assert _wait(lambda: _gone(pid), 60), "the idle warm process did not stop"
    assert not path.exists() and not path.with_suffix(".log").exists()
