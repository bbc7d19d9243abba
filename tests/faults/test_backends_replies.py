"""Backend replies against a scripted OpenAI-compatible server on loopback (tests/openai_server.py: faults a
real server will not produce on demand): Retry-After is honoured (bounded), malformed 200s become typed errors
for chat and embeddings, and no message repeats a URL's password."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from clinrag.core.errors import ConfigError, ModelReplyError
from clinrag.core.remote import RetryPolicy, redact_text
from clinrag.embed.openai_compat import OpenAIEmbedder
from clinrag.llm.base import ChatRequest, Message
from clinrag.llm.openai_compat import OpenAICompatible
from tests.openai_server import ScriptedServer, chat_body, scripted_model


class HeaderServer(ScriptedServer):
    """A scripted server whose error replies carry a Retry-After header."""

    def __init__(self, retry_after: str) -> None:
        self.retry_after = retry_after
        self.status = 200
        super().__init__()
        handler = self._httpd.RequestHandlerClass
        send_header = handler.send_header
        server = self

        def with_retry_after(handler_self, name: str, value: str) -> None:
            send_header(handler_self, name, value)
            if name == "Content-Type" and server.status != 200:
                send_header(handler_self, "Retry-After", server.retry_after)

        handler.send_header = with_retry_after

    def respond(self, body: dict) -> tuple[int, dict, float]:
        reply = super().respond(body)
        self.status = reply[0]
        return reply


def _model(server: ScriptedServer, cap: float = 60.0) -> OpenAICompatible:
    return scripted_model(server, retry=RetryPolicy(max_retries=1, backoff_s=0.0, max_retry_after_s=cap))


def _ask() -> ChatRequest:
    return ChatRequest(messages=[Message(role="user", content="hi")])


@pytest.mark.integration
@pytest.mark.parametrize("header", ["1.5", "date"])
def test_retry_after_is_honoured_in_seconds_or_as_a_date(header: str) -> None:
    value = (
        format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True) if header == "date" else header
    )
    server = HeaderServer(value)
    try:
        server.replies = [(429, {"error": {"message": "slow down"}}, 0.0), (200, chat_body("fine"), 0.0)]
        started = time.monotonic()
        # Before: the retry came after the exponential backoff (here 0 s), ignoring the header.
        assert _model(server).complete(_ask()).text == "fine"
        assert time.monotonic() - started >= 0.9
    finally:
        server.close()


@pytest.mark.integration
def test_retry_after_is_bounded() -> None:
    server = HeaderServer("3600")
    try:
        server.replies = [(503, {"error": {"message": "busy"}}, 0.0), (200, chat_body("fine"), 0.0)]
        started = time.monotonic()
        assert _model(server, cap=0.2).complete(_ask()).text == "fine"
        assert time.monotonic() - started < 5
    finally:
        server.close()


@pytest.mark.parametrize("body", [{}, {"choices": None}, {"choices": [{"finish_reason": "stop"}]}])
def test_a_malformed_chat_reply_is_a_typed_error(server: ScriptedServer, body: dict) -> None:
    server.replies = [(200, body, 0.0)]
    with pytest.raises(ModelReplyError, match="model server"):
        _model(server).complete(_ask())


@pytest.mark.parametrize("body", [{}, {"data": [{"embedding": "nope"}]}, {"data": [{"embedding": [None]}]}])
def test_a_malformed_embeddings_reply_is_a_typed_error(server: ScriptedServer, body: dict) -> None:
    server.replies = [(200, body, 0.0)]
    embedder = OpenAIEmbedder(model="e", base_url=server.base_url, retry=RetryPolicy(max_retries=0))
    with pytest.raises(ModelReplyError, match="embeddings server"):
        embedder.encode(["a finding"])


def test_messages_do_not_repeat_a_urls_password() -> None:
    url = "http://alice:s3cret@127.0.0.1:9/v1"
    # credentials in a base URL are refused (the HTTP client would send them in place of the key)
    with pytest.raises(ConfigError) as caught:
        OpenAICompatible(model="m", base_url=url, retry=RetryPolicy(max_retries=0))
    assert "s3cret" not in str(caught.value) and "alice:***@" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        OpenAIEmbedder(model="e", base_url=url, retry=RetryPolicy(max_retries=0))
    assert "s3cret" not in str(caught.value)
    assert redact_text("see https://u:p@h/x and ftp://v:w@k") == "see https://u:***@h/x and ftp://v:***@k"
