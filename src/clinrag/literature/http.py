"""One HTTP GET under the literature policy: a hard per-call timeout, a retry budget with backoff for
transient failures (timeouts, connection errors, 429, 5xx), optional request spacing, and typed errors."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from clinrag.literature.errors import (
    LiteratureError,
    SourceConnectionError,
    SourceHTTPError,
    SourceTimeoutError,
)

Params = Mapping[str, str | int]
_SPACING_LOCK = threading.Lock()
_NEXT_FREE: dict[str, float] = {}  # spacing key -> the monotonic time of its next free request slot


@dataclass(frozen=True)
class HttpPolicy:
    """`timeout_s` bounds each call as a whole (connect + send + the complete reply), not each socket read;
    a call is tried at most 1 + `max_retries` times."""

    timeout_s: float = 10.0
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff with jitter: backoff · 2^attempt, scaled by a factor in [0.5, 1]."""
        return min(self.max_backoff_s, self.backoff_s * 2**attempt) * random.uniform(0.5, 1.0)


class RequestSpacing:
    """At most one request per `interval_s` per key, across threads and event loops (a service's rate
    limit applies to the whole process): each caller reserves the next free slot and sleeps until it."""

    def __init__(self, key: str, interval_s: float) -> None:
        self.key = key
        self.interval_s = interval_s

    async def wait(self) -> None:
        with _SPACING_LOCK:
            now = time.monotonic()
            slot = max(now, _NEXT_FREE.get(self.key, 0.0))
            _NEXT_FREE[self.key] = slot + self.interval_s
        if slot > now:
            await asyncio.sleep(slot - now)


def _retryable(error: LiteratureError) -> bool:
    if isinstance(error, SourceHTTPError):
        return error.status_code == 429 or error.status_code >= 500
    return isinstance(error, SourceTimeoutError | SourceConnectionError)


async def _once(client: httpx.AsyncClient, url: str, params: Params | None, timeout_s: float) -> bytes:
    try:
        response = await asyncio.wait_for(client.get(url, params=params), timeout_s)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise SourceTimeoutError(f"GET {url} took longer than {timeout_s:g} s") from exc
    except httpx.HTTPError as exc:  # connection refused, reset, DNS, protocol errors
        raise SourceConnectionError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc
    if response.status_code >= 400:
        raise SourceHTTPError(f"GET {url} answered HTTP {response.status_code}", response.status_code)
    return response.content


async def get_bytes(
    client: httpx.AsyncClient,
    url: str,
    params: Params | None,
    policy: HttpPolicy,
    spacing: RequestSpacing | None = None,
) -> bytes:
    """The body of a successful GET; the last error once the retry budget is spent."""
    for attempt in range(policy.max_retries + 1):
        if spacing is not None:
            await spacing.wait()
        try:
            return await _once(client, url, params, policy.timeout_s)
        except LiteratureError as error:
            if attempt == policy.max_retries or not _retryable(error):
                raise
        await asyncio.sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # the loop returns or raises
