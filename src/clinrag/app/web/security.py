"""Request guards: the bearer token, the Host and Origin of a request, its size and its time."""

from __future__ import annotations

import asyncio
import hmac
import json
import unicodedata
from collections.abc import Sequence
from urllib.parse import urlsplit

from fastapi import Request
from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clinrag.core.errors import ClinragError, ConfigError


class Unauthorized(ClinragError):
    """A request without the configured bearer token."""


TOKEN_COOKIE = "clinrag_token"
# A token a client could guess in a few thousand requests is no guard (a 1-character one fell in 37): at
# least this many characters, printable ones (a zero-width space or a control character looks empty)
MIN_TOKEN_CHARS = 16
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def configured_token(secret: SecretStr | None) -> str | None:
    """The bearer token the server requires, None for none. A token that is empty or blank is refused
    rather than read as "no token": set by mistake, it would switch authentication off."""
    if secret is None:
        return None
    token = secret.get_secret_value()
    if not token.strip():
        raise ConfigError(
            "CLINRAG_API_TOKEN is empty: set a real token, or unset it to serve on loopback only"
        )
    if token != token.strip():
        raise ConfigError("CLINRAG_API_TOKEN begins or ends with white space: set it without")
    if any(unicodedata.category(char)[0] in "CZ" for char in token):
        raise ConfigError(
            "CLINRAG_API_TOKEN holds a control, invisible or space character: use printable characters only"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"CLINRAG_API_TOKEN has {len(token)} characters, fewer than {MIN_TOKEN_CHARS}: use a random one, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return token


def token_matches(given: str, token: str) -> bool:
    """Compared in constant time."""
    return hmac.compare_digest(given.strip().encode(), token.encode())


def check_token(request: Request, token: str | None) -> None:
    """Raise `Unauthorized` unless the request carries `Authorization: Bearer <token>` or, from a browser that
    entered it on the token page, the token cookie (no token configured: every request passes)."""
    if token is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token_matches(given, token):
        return
    if token_matches(request.cookies.get(TOKEN_COOKIE, ""), token):
        return
    raise Unauthorized("a valid bearer token is required: send 'Authorization: Bearer <token>'")


class BodyLimit:
    """Refuses request bodies over `max_bytes` with 413: at once when Content-Length says so, else as soon as
    the streamed body passes the limit (so a chunked upload cannot exhaust memory). A body that has not
    wholly arrived `timeout_s` after the request began gets 408 and its connection is closed, so a client
    that announces a body and never sends it holds no connection for the whole request deadline."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send, 413, f"the request body is larger than {self.max_bytes} bytes")
            return
        received = 0
        refused = False
        body_done = False
        deadline = asyncio.get_running_loop().time() + self.timeout_s

        async def limited_receive() -> Message:
            # Past a limit the error is sent here and the app sees the client gone; its reply is dropped
            # (frameworks turn an exception raised while reading the body into their own 400).
            nonlocal received, refused, body_done
            if body_done:  # after the body: waiting for a disconnect is not bounded here
                return await receive()
            try:
                left = deadline - asyncio.get_running_loop().time()
                message = await asyncio.wait_for(receive(), timeout=max(left, 0.0))
            except TimeoutError:
                return await refuse(408, f"the request body did not arrive within {self.timeout_s:g} s")
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                body_done = not message.get("more_body", False)
                if received > self.max_bytes:
                    return await refuse(413, f"the request body is larger than {self.max_bytes} bytes")
            return message

        async def refuse(status: int, error: str) -> Message:
            nonlocal refused
            if not refused:
                refused = True
                await self._refuse(send, status, error)
            return {"type": "http.disconnect"}

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)

    @staticmethod
    async def _refuse(send: Send, status: int, error: str) -> None:
        await _reply(send, status, error, "BodyLimit")


async def _reply(send: Send, status: int, error: str, detail: str) -> None:
    """A JSON error in the API's shape, sent by a guard before (or instead of) the app."""
    body = json.dumps({"error": error, "detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def host_name(authority: str) -> str:
    """The host of a Host header or an Origin's authority, without port or IPv6 brackets, lower case."""
    host = urlsplit(f"//{authority}").hostname
    return (host or "").lower()


class SecurityHeaders:
    """Headers every response carries so a browser keeps the pages to themselves: no framing by another
    site (clickjacking), scripts only from this server (the pages' two files; htmx runs no inline code
    here), no guessing of content types, no address of the page sent on to another site. Inline style
    attributes stay allowed: the probability bars are drawn with them."""

    HEADERS = (
        (
            b"content-security-policy",
            b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            b"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
        ),
        (b"x-frame-options", b"DENY"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    )

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in self.HEADERS if name not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


class HostGuard:
    """Answers only requests whose Host is one of `allowed_hosts` ("*": any), so a page whose DNS name an
    attacker rebinds to this server's address cannot read it (400 otherwise). A request that changes
    something (POST, …) coming from a browser page of another origin — its Origin is not this Host, or the
    browser says it is cross-site — is refused with 403, so another site cannot post forms to the server."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.any_host = "*" in allowed_hosts
        self.allowed = {host.strip().strip("[]").lower() for host in allowed_hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers") or []
        }
        host = headers.get("host", "")
        if not self.any_host and host_name(host) not in self.allowed:
            message = "this server does not answer to that Host (CLINRAG_API_ALLOWED_HOSTS)"
            await _reply(send, 400, message, "HostGuard")
            return
        if scope["method"] in UNSAFE_METHODS and self._cross_site(headers, host):
            await _reply(send, 403, "a request from another site's page is refused", "HostGuard")
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _cross_site(headers: dict[str, str], host: str) -> bool:
        if headers.get("sec-fetch-site") == "cross-site":
            return True
        origin = headers.get("origin")
        if origin is None:
            return False  # not a browser's cross-origin request (browsers send Origin on those)
        return origin == "null" or urlsplit(origin).netloc.lower() != host.lower()


class RequestDeadline:
    """Bounds every request's time to its first response byte: past `seconds`, the handler is cancelled and
    the client gets 504. A streamed response, once started, is bounded by its producer."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        deadline = asyncio.timeout(self.seconds)
        try:
            async with deadline:

                async def timed_send(message: Message) -> None:
                    nonlocal started
                    if message["type"] == "http.response.start":
                        started = True
                        deadline.reschedule(None)
                    await send(message)

                await self.app(scope, receive, timed_send)
        except TimeoutError:
            if not deadline.expired():
                raise  # the handler's own time-out, not this deadline
            if not started:
                await _reply(send, 504, f"the request took longer than {self.seconds:g} s", "RequestTimeout")
