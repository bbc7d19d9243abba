"""Token / call accounting, shared by the model layer and by answers."""

from __future__ import annotations

import threading

from pydantic import BaseModel


class Usage(BaseModel):
    """What a piece of work cost: model calls, tokens, wall time, cache hits and misses."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            wall_time_s=self.wall_time_s + other.wall_time_s,
            cache_hits=self.cache_hits + other.cache_hits,
            cache_misses=self.cache_misses + other.cache_misses,
        )


class UsageMeter:
    """A thread-safe running total of `Usage`, fed by every model call a component makes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = Usage()

    def add(self, usage: Usage) -> None:
        with self._lock:
            self._total = self._total + usage

    @property
    def total(self) -> Usage:
        with self._lock:
            return self._total.model_copy()
