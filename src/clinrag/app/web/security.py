"""Request guards: the bearer token and the request size limit."""

from __future__ import annotations

import hmac
import json

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clinrag.core.errors import ClinragError


class Unauthorized(ClinragError):
    """A request without the configured bearer token."""


TOKEN_COOKIE = "clinrag_token"


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
    the streamed body passes the limit (so a chunked upload cannot exhaust memory)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        refused = False

        async def limited_receive() -> Message:
            # Past the limit the 413 is sent here and the app sees the client gone; its reply is dropped
            # (frameworks turn an exception raised while reading the body into their own 400).
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes and not refused:
                    refused = True
                    await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"error": f"the request body is larger than {self.max_bytes} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
