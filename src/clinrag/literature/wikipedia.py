"""Wikipedia: the pages whose titles match a query (core REST title search), then each page's summary from
the REST API (`GET /api/rest_v1/page/summary/<title>`), as citations."""

from __future__ import annotations

import asyncio
import json
from typing import TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from clinrag.core.models import Evidence
from clinrag.literature.errors import MalformedResponseError, SourceHTTPError
from clinrag.literature.http import HttpPolicy, get_bytes
from clinrag.literature.text import snippet

WIKIPEDIA_BASE = "https://en.wikipedia.org"
M = TypeVar("M", bound=BaseModel)


class _TitleMatch(BaseModel):
    key: str
    title: str


class _TitleSearch(BaseModel):
    pages: list[_TitleMatch]


class _DesktopUrls(BaseModel):
    page: str


class _ContentUrls(BaseModel):
    desktop: _DesktopUrls


class _Summary(BaseModel):
    type: str = "standard"
    title: str
    extract: str = ""
    description: str | None = None
    pageid: int | None = None
    revision: str | None = None
    timestamp: str | None = None
    content_urls: _ContentUrls | None = None


def _parse(model: type[M], body: bytes, what: str) -> M:
    try:
        return model.model_validate(json.loads(body))
    except (ValueError, ValidationError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise MalformedResponseError(f"{what}: {str(exc).splitlines()[0]}") from exc


class WikipediaSource:
    """Disambiguation pages and pages without an extract are left out; a title whose summary is gone (404)
    is skipped, any other failure fails the source."""

    name = "wikipedia"

    def __init__(
        self,
        *,
        base_url: str = WIKIPEDIA_BASE,
        language: str = "en",
        policy: HttpPolicy | None = None,
        user_agent: str = "clinrag",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.language = language
        self.policy = policy or HttpPolicy()
        self.user_agent = user_agent  # Wikimedia asks for a descriptive User-Agent with a contact
        self.identity = f"wikipedia|{self.base_url}|{language}"

    async def search(self, query: str, limit: int) -> list[Evidence]:
        async with httpx.AsyncClient(
            timeout=self.policy.timeout_s,
            headers={"User-Agent": self.user_agent, "Accept": "application/json"},
            follow_redirects=True,  # the summary endpoint redirects a title to its canonical page
        ) as client:
            body = await get_bytes(
                client,
                f"{self.base_url}/w/rest.php/v1/search/title",
                {"q": query, "limit": limit},
                self.policy,
            )
            matches = _parse(_TitleSearch, body, "title search").pages[:limit]
            summaries = await asyncio.gather(*(self._summary(client, match.key) for match in matches))
        kept = [s for s in summaries if s is not None and s.type != "disambiguation" and s.extract.strip()]
        return [self._evidence(summary, rank, query) for rank, summary in enumerate(kept, 1)]

    async def _summary(self, client: httpx.AsyncClient, key: str) -> _Summary | None:
        url = f"{self.base_url}/api/rest_v1/page/summary/{quote(key.replace(' ', '_'), safe='')}"
        try:
            body = await get_bytes(client, url, None, self.policy)
        except SourceHTTPError as error:
            if error.status_code == 404:
                return None
            raise
        return _parse(_Summary, body, f"summary of {key!r}")

    def _evidence(self, summary: _Summary, rank: int, query: str) -> Evidence:
        key = summary.title.replace(" ", "_")
        url = (
            summary.content_urls.desktop.page
            if summary.content_urls
            else f"{self.base_url}/wiki/{quote(key, safe='')}"
        )
        extract = snippet(summary.extract)
        return Evidence(
            id=f"wikipedia:{self.language}:{key}",
            kind="citation",
            text=f"{summary.title}: {extract}",
            source=f"wikipedia:{self.language}",
            provenance={
                "title": summary.title,
                "description": summary.description,
                "pageid": summary.pageid,
                "revision": summary.revision,
                "timestamp": summary.timestamp,
                "url": url,
                "snippet": extract,
                "rank": rank,
                "query": query,
            },
        )
