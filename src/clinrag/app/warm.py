"""A warm consultation process for the CLI. Starting `clinrag consult` costs seconds (spaCy, the compiled
phrase tables, the differential's tables) before a 25 ms answer; the first consultation therefore starts, in
the background, a process that keeps the consultation loaded and listens on a Unix socket under
`CLINRAG_HOME/run/` (the folder 0700, the socket 0600, a peer of another user refused), and the next ones ask
it. It serves exactly the code, packaged data and settings it was started with (the socket's name is their
fingerprint), only the packaged knowledge (a user's files may change under it), and it exits after
`consult_warm_s` seconds without a consultation (0: never started)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

import clinrag
from clinrag.core import errors
from clinrag.core.errors import ClinragError
from clinrag.core.models import Answer, Case
from clinrag.core.settings import Settings

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # a case (its text and codes) or an answer, as JSON
READ_TIMEOUT_S = 10.0  # a client sends its whole request at once
UNIX_PATH_MAX = 100  # sun_path holds 104–108 bytes, depending on the system
STARTING_S = 300.0  # a warm process still loading after this long is taken for dead
FINGERPRINTED = {".py", ".json", ".jsonl", ".tsv", ".md", ".gz"}  # the package's code and data


def warm_socket(settings: Settings) -> Path | None:
    """Where the warm process of this code, data and settings listens; None where a socket cannot be."""
    if settings.consult_warm_s <= 0 or not hasattr(socket, "AF_UNIX"):
        return None
    digest = hashlib.sha256()
    digest.update(sys.executable.encode())
    digest.update(settings_payload(settings))
    package = Path(clinrag.__file__).parent
    for path in sorted(package.rglob("*")):
        if (
            path.suffix in {".py", ".json", ".jsonl", ".tsv", ".md", ".gz"}
            and "__pycache__" not in path.parts
        ):
            stat = path.stat()
            digest.update(f"{path.relative_to(package)}:{stat.st_mtime_ns}:{stat.st_size}".encode())
    path = settings.home / "run" / f"consult-{digest.hexdigest()[:16]}.sock"
    return path if len(str(path)) <= UNIX_PATH_MAX else None


def settings_payload(settings: Settings) -> bytes:
    """The settings as JSON with their secrets (a masked API key would not reach the model server)."""
    values = {
        name: value.get_secret_value() if isinstance(value, SecretStr) else value for name, value in settings
    }
    return json.dumps(values, default=str, sort_keys=True).encode()


def servable(params: dict[str, Any]) -> bool:
    """Whether the warm process may answer a consultation with these parameters: the packaged knowledge only,
    no patient base or statement base read from the user's files."""
    sources = params.get("sources", "")
    named = [part.strip() for part in sources.split(",") if part.strip()]
    return all(part.startswith("packaged:") for part in named) and not {"patients", "kb"} & set(params)


def ask(path: Path, params: dict[str, Any], case: Case, timeout_s: float) -> Answer | None:
    """The warm process's answer, or None when none is listening (or it failed: the caller answers)."""
    request = json.dumps({"params": params, "case": case.model_dump(mode="json")}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout_s)
            client.connect(str(path))
            _send(client, request)
            reply = json.loads(_receive(client))
    except (OSError, ValueError):
        return None
    if "error" in reply:
        kind = getattr(errors, reply.get("kind", ""), ClinragError)
        raise (kind if isinstance(kind, type) and issubclass(kind, ClinragError) else ClinragError)(
            reply["error"]
        )
    return Answer.model_validate(reply["answer"])


def spawn(path: Path, settings: Settings) -> int | None:
    """Start the warm process in the background (its own session, so it outlives this command), unless one
    is already loading (None then); the settings go through its standard input, never its command line. Its
    log holds no patient text, and goes when it stops."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    starting = path.with_suffix(".starting")
    try:
        if time.time() - starting.stat().st_mtime < STARTING_S:
            return None
        starting.unlink()
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(starting, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return None  # another consultation is starting it at this moment
    log = os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "clinrag.app.warm", str(path)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        assert child.stdin is not None
        child.stdin.write(settings_payload(settings))
        child.stdin.close()
    finally:
        os.close(log)
    return child.pid


def serve(path: Path, settings: Settings) -> None:
    """Load the consultation, then answer one consultation per connection until `consult_warm_s` pass
    without one."""
    from clinrag.methods.base import MethodContext
    from clinrag.methods.consult import ConsultConfig, ConsultMethod, build

    context = MethodContext(settings=settings)
    methods: dict[str, ConsultMethod] = {}

    def method(params: dict[str, Any]) -> ConsultMethod:
        key = json.dumps(params, sort_keys=True)
        if key not in methods:
            methods[key] = build(context, ConsultConfig.from_params(params))
        return methods[key]

    method({})  # the default consultation is loaded before the socket is there to be asked
    with _listening(path) as server:
        path.with_suffix(".starting").unlink(missing_ok=True)
        server.settimeout(settings.consult_warm_s)
        while True:
            try:
                connection, _ = server.accept()
            except TimeoutError:
                return
            with connection:
                _answer(connection, method)


def _answer(connection: socket.socket, method) -> None:
    if not _same_user(connection):
        return
    connection.settimeout(READ_TIMEOUT_S)
    try:
        request = json.loads(_receive(connection))
        params = request["params"]
        if not servable(params):
            raise ClinragError("the warm consultation answers the packaged knowledge only")
        case = Case.model_validate(request["case"])
        answer = method(params).answer(case)
        reply = {"answer": answer.model_dump(mode="json")}
    except ClinragError as exc:
        reply = {"error": str(exc), "kind": type(exc).__name__}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reply = {"error": f"malformed request to the warm consultation ({type(exc).__name__})"}
    with contextlib.suppress(OSError):  # the client went away: it answers by itself
        _send(connection, json.dumps(reply).encode())


class _listening:
    """The bound socket (0600, in a 0700 folder), removed on exit; a live one at the path is left alone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def __enter__(self) -> socket.socket:
        if self.path.exists():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                if probe.connect_ex(str(self.path)) == 0:
                    raise SystemExit(0)  # another warm process serves this already
            self.path.unlink()
        previous = os.umask(0o177)
        try:
            self.server.bind(str(self.path))
        finally:
            os.umask(previous)
        self.server.listen(8)
        return self.server

    def __exit__(self, *exc: object) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)


def _same_user(connection: socket.socket) -> bool:
    """A peer of another user is refused (where the system tells; the socket's mode refuses it anyway)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", credentials)
    return uid == os.getuid()


def _send(connection: socket.socket, payload: bytes) -> None:
    connection.sendall(struct.pack("!I", len(payload)) + payload)


def _receive(connection: socket.socket) -> bytes:
    (size,) = struct.unpack("!I", _exactly(connection, 4))
    if size > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {size} bytes")
    return _exactly(connection, size)


def _exactly(connection: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("closed mid-message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class _Stopped(BaseException):
    """SIGTERM: the process stops as when idle (its socket and log go)."""


def _stop(*_: object) -> None:
    raise _Stopped


if __name__ == "__main__":
    socket_path = Path(sys.argv[1])
    signal.signal(signal.SIGTERM, _stop)
    try:
        serve(socket_path, Settings(**json.loads(sys.stdin.buffer.read())))
    except _Stopped:
        pass
    finally:
        socket_path.with_suffix(".starting").unlink(missing_ok=True)
    socket_path.with_suffix(".log").unlink(missing_ok=True)  # a failure's traceback stays
