"""What the search facade needs from a literature source."""

from __future__ import annotations

from typing import Protocol

from clinrag.core.models import Evidence


class LiteratureSource(Protocol):
    name: str  # short label in results and failures: "pubmed", "wikipedia", "pubmedqa"
    # The service, its base URL and the fixed request options (never credentials): part of the cache key.
    # None: the source is local and its results are not cached.
    identity: str | None

    async def search(self, query: str, limit: int) -> list[Evidence]:
        """Up to `limit` citations, best first; raises a `LiteratureError` when the service fails."""
        ...
