"""Calls to OpenAI-compatible servers (chat and embeddings): client construction, retries with
exponential backoff on 429 / 5xx / timeouts / connection errors (honouring a bounded `Retry-After`), and
mapping of SDK errors to typed errors whose messages never carry a URL's credentials; a base URL's query
string is sent as query parameters, and credentials in it are refused."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import openai

from clinrag.core.errors import ConfigError, ModelAuthError, ModelRequestError, ModelUnavailableError
from clinrag.core.settings import redact_url

T = TypeVar("T")

_RETRYABLE = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 60.0  # a server's Retry-After is honoured up to this

    def delay(self, attempt: int, exc: Exception | None = None) -> float:
        """The server's `Retry-After` (bounded) when it sent one, else exponential backoff with jitter:
        backoff · 2^attempt, scaled by a factor in [0.5, 1]."""
        asked = retry_after(exc) if exc is not None else None
        if asked is not None:
            return min(self.max_retry_after_s, asked)
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * random.uniform(0.5, 1.0)


def retry_after(exc: Exception) -> float | None:
    """Seconds a 429/503 reply asked to wait (`Retry-After`: seconds or an HTTP date), else None."""
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def redact_text(text: str) -> str:
    """`text` with the credentials of every URL in it masked (see `redact_url`)."""
    return _URL.sub(lambda m: redact_url(m[0]), text)


def split_base_url(base_url: str) -> tuple[str, dict[str, str]]:
    """A server's base URL without its query string, and that query as parameters of every request (the
    SDK would splice it into the path: `/v1/?api_key=…chat/completions`).

    A user name or password in the URL is refused: the HTTP client would send it as Basic auth in place of
    the configured API key, so the key belongs in CLINRAG_*_API_KEY."""
    try:
        parts = urlsplit(base_url)
        has_userinfo = parts.username is not None
    except ValueError as exc:
        raise ConfigError(f"invalid server URL {redact_url(base_url)}: {exc}") from exc
    if has_userinfo:
        raise ConfigError(
            f"the server URL {redact_url(base_url)} carries credentials (user:password@): remove them and "
            "give the key as CLINRAG_LLM_API_KEY / CLINRAG_EMBED_API_KEY / CLINRAG_JUDGE_API_KEY"
        )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query="", fragment="")), query


def make_clients(
    base_url: str | None, api_key: str | None, timeout_s: float
) -> tuple[openai.OpenAI, openai.AsyncOpenAI]:
    """Sync and async SDK clients with the SDK's own retries off (we retry, so the policy is ours)."""
    url, query = split_base_url(base_url) if base_url else (None, {})
    # Local servers (vLLM, llama.cpp, Ollama) accept any key; the SDK insists on one being set.
    key = api_key or "not-needed"
    kwargs = {
        "base_url": url,
        "api_key": key,
        "timeout": timeout_s,
        "max_retries": 0,
        "default_query": query or None,
    }
    return openai.OpenAI(**kwargs), openai.AsyncOpenAI(**kwargs)


def _typed(exc: Exception, where: str) -> Exception:
    typed = _typed_unredacted(exc, where)
    return type(typed)(redact_text(str(typed)))


def _typed_unredacted(exc: Exception, where: str) -> Exception:
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ModelAuthError(f"{where} refused the API key ({exc.status_code}): check CLINRAG_*_API_KEY")
    if isinstance(exc, openai.APITimeoutError):
        return ModelUnavailableError(f"{where} timed out")
    if isinstance(exc, openai.APIConnectionError):
        return ModelUnavailableError(f"cannot reach {where}: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIStatusError):
        kind = (
            ModelUnavailableError
            if exc.status_code in (429,) or exc.status_code >= 500
            else ModelRequestError
        )
        return kind(f"{where} answered HTTP {exc.status_code}: {_short(exc.message)}")
    return ModelUnavailableError(f"{where} failed: {exc}")


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, where: str) -> T:
    for attempt in range(policy.max_retries + 1):
        try:
            return fn()
        except _RETRYABLE as exc:
            if attempt == policy.max_retries:
                raise _typed(exc, where) from exc
            time.sleep(policy.delay(attempt, exc))
        except openai.OpenAIError as exc:
            raise _typed(exc, where) from exc
    raise AssertionError("unreachable")


async def acall_with_retries(fn: Callable[[], Awaitable[T]], policy: RetryPolicy, where: str) -> T:
    for attempt in range(policy.max_retries + 1):
        try:
            return await fn()
        except _RETRYABLE as exc:
            if attempt == policy.max_retries:
                raise _typed(exc, where) from exc
            await asyncio.sleep(policy.delay(attempt, exc))
        except openai.OpenAIError as exc:
            raise _typed(exc, where) from exc
    raise AssertionError("unreachable")
