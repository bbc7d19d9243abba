"""Calls to OpenAI-compatible servers (chat and embeddings): client construction, retries with
exponential backoff on 429 / 5xx / timeouts / connection errors, and mapping of SDK errors to typed errors."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import openai

from clinrag.core.errors import ModelAuthError, ModelRequestError, ModelUnavailableError

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

    def delay(self, attempt: int) -> float:
        """Exponential backoff with jitter: backoff · 2^attempt, scaled by a factor in [0.5, 1]."""
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * random.uniform(0.5, 1.0)


def make_clients(
    base_url: str | None, api_key: str | None, timeout_s: float
) -> tuple[openai.OpenAI, openai.AsyncOpenAI]:
    """Sync and async SDK clients with the SDK's own retries off (we retry, so the policy is ours)."""
    # Local servers (vLLM, llama.cpp, Ollama) accept any key; the SDK insists on one being set.
    key = api_key or "not-needed"
    kwargs = {"base_url": base_url, "api_key": key, "timeout": timeout_s, "max_retries": 0}
    return openai.OpenAI(**kwargs), openai.AsyncOpenAI(**kwargs)


def _typed(exc: Exception, where: str) -> Exception:
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
            time.sleep(policy.delay(attempt))
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
            await asyncio.sleep(policy.delay(attempt))
        except openai.OpenAIError as exc:
            raise _typed(exc, where) from exc
    raise AssertionError("unreachable")
