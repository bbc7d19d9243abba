"""How `clinrag serve` runs the app on uvicorn: the connection limits that no ASGI middleware can see,
because they apply before a request exists."""

from __future__ import annotations

import asyncio

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from clinrag.core.settings import Settings


class HeadDeadlineProtocol(H11Protocol):
    """HTTP/1.1 (h11) that closes a connection whose client has not sent a whole request head within
    `head_timeout_s` of connecting or of the last response, so clients that open connections and trickle
    bytes (or send nothing) cannot hold them for ever."""

    head_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._await_head()

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:  # a request is being answered
            self._stop_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()


def server_config(
    app: object, settings: Settings, host: str, port: int, log_level: str = "info"
) -> uvicorn.Config:
    """uvicorn's configuration for the app: h11 with the head deadline, at most `api_max_connections`
    connections at once (503 beyond), and a deadline for the requests still running at shutdown."""
    protocol = type(
        "HeadDeadline", (HeadDeadlineProtocol,), {"head_timeout_s": settings.api_header_timeout_s}
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        limit_concurrency=settings.api_max_connections,
        # a request still running at shutdown (a graph that never answers) is cut after this, so a service
        # manager's stop ends cleanly instead of escalating to SIGKILL (and orphaning the graph server)
        timeout_graceful_shutdown=settings.api_shutdown_timeout_s,
        log_level=log_level.lower(),
        access_log=False,
    )
