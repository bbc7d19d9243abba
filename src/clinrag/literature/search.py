"""The literature facade: every configured source at once, under one total deadline, best effort.

`search` returns by the deadline whatever arrived; a source that failed or had not finished is recorded as
a typed `SourceFailure`, never raised, so a caller (the graph pipeline) is never blocked past the deadline
and never fails because a service did."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Evidence
from clinrag.literature.cache import LiteratureCache, cache_key
from clinrag.literature.errors import LiteratureError
from clinrag.literature.models import LiteratureResult, SourceFailure, SourceRun
from clinrag.literature.source import LiteratureSource

# How long cancelled sources get to unwind once the deadline has passed (not counted against the caller's
# deadline budget beyond this).
CANCEL_GRACE_S = 0.05


class LiteratureSearch:
    def __init__(
        self,
        sources: Sequence[LiteratureSource],
        *,
        deadline_s: float = 20.0,
        cache: LiteratureCache | None = None,
    ) -> None:
        if not deadline_s > 0:
            raise InvalidInputError(f"the literature deadline must be positive, got {deadline_s}")
        names = [source.name for source in sources]
        if len(names) != len(set(names)):
            raise InvalidInputError(f"literature source names must be unique, got {names}")
        self.sources = list(sources)
        self.deadline_s = deadline_s
        self.cache = cache

    @property
    def source_names(self) -> list[str]:
        return [source.name for source in self.sources]

    async def search(self, query: str, limit: int = 5) -> LiteratureResult:
        """Up to `limit` citations from each source, deduplicated by id (a PMID found by two sources is
        kept once, from the first source in configuration order)."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError("a literature query must be a non-empty string")
        if limit < 1:
            raise InvalidInputError(f"the literature limit must be at least 1, got {limit}")
        query = query.strip()
        started = time.perf_counter()
        tasks = [asyncio.create_task(self._run(source, query, limit)) for source in self.sources]
        if tasks:
            await asyncio.wait(tasks, timeout=self.deadline_s)
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=CANCEL_GRACE_S)
        result = LiteratureResult(query=query, limit=limit, deadline_s=self.deadline_s)
        seen: set[str] = set()
        for source, task in zip(self.sources, tasks, strict=True):
            if not task.done() or task.cancelled():
                result.failures.append(self._missed_deadline(source, started))
                result.runs.append(SourceRun(source=source.name, ok=False, elapsed_s=self._since(started)))
                continue
            run, evidence, failure = task.result()
            result.runs.append(run)
            if failure is not None:
                result.failures.append(failure)
            for item in evidence:
                if item.id not in seen:
                    seen.add(item.id)
                    result.evidence.append(item)
        result.elapsed_s = self._since(started)
        return result

    def search_sync(self, query: str, limit: int = 5) -> LiteratureResult:
        """`search` from synchronous code (not from inside a running event loop)."""
        return asyncio.run(self.search(query, limit))

    async def _run(
        self, source: LiteratureSource, query: str, limit: int
    ) -> tuple[SourceRun, list[Evidence], SourceFailure | None]:
        started = time.perf_counter()
        key = cache_key(source.identity, query, {"limit": limit}) if source.identity else None
        if self.cache is not None and key is not None:
            cached = self.cache.get(key)
            if cached is not None:
                run = SourceRun(
                    source=source.name, ok=True, hits=len(cached), cached=True, elapsed_s=self._since(started)
                )
                return run, cached, None
        try:
            evidence = await source.search(query, limit)
        except Exception as exc:  # best effort: every failure becomes a record, none reaches the caller
            elapsed = self._since(started)
            failure = SourceFailure(
                source=source.name,
                kind=exc.kind if isinstance(exc, LiteratureError) else "unexpected",
                error_type=type(exc).__name__,
                message=str(exc) or repr(exc),
                elapsed_s=elapsed,
                status_code=exc.status_code if isinstance(exc, LiteratureError) else None,
            )
            return SourceRun(source=source.name, ok=False, elapsed_s=elapsed), [], failure
        if self.cache is not None and key is not None:
            self.cache.put(key, evidence)
        run = SourceRun(source=source.name, ok=True, hits=len(evidence), elapsed_s=self._since(started))
        return run, evidence, None

    def _missed_deadline(self, source: LiteratureSource, started: float) -> SourceFailure:
        return SourceFailure(
            source=source.name,
            kind="deadline",
            error_type="DeadlineExceeded",
            message=f"{source.name} had not answered within the {self.deadline_s:g} s deadline",
            elapsed_s=self._since(started),
        )

    @staticmethod
    def _since(started: float) -> float:
        return time.perf_counter() - started
