"""Wikipedia summaries against the loopback test double (tests/literature/literature_server.py): the real
REST API cannot be reached from CI; the double serves the title-search and page-summary JSON formats, with
pages titled by the PubMedQA records' MeSH headings (their extracts are real abstract paragraphs)."""

from __future__ import annotations

import asyncio

import pytest

from clinrag.literature.errors import MalformedResponseError, SourceHTTPError
from clinrag.literature.http import HttpPolicy
from clinrag.literature.text import snippet
from clinrag.literature.wikipedia import WikipediaSource
from tests.literature.literature_server import Fault

QUERY = "colon"


def source(server, **policy) -> WikipediaSource:
    return WikipediaSource(
        base_url=server.origin,
        policy=HttpPolicy(**{"timeout_s": 5.0, "max_retries": 0, "backoff_s": 0.0, **policy}),
        user_agent="clinrag-test (dev@example.org)",
    )


def test_hits_equal_the_pages_served(lit_server):
    titles = lit_server.matching_titles(QUERY)[:4]
    assert len(titles) == 4

    hits = asyncio.run(source(lit_server).search(QUERY, 4))

    assert [hit.provenance["title"] for hit in hits] == titles
    for rank, (hit, title) in enumerate(zip(hits, titles, strict=True), 1):
        key = title.replace(" ", "_")
        extract = lit_server.pages[title]
        assert hit.id == f"wikipedia:en:{key}"
        assert (hit.kind, hit.source) == ("citation", "wikipedia:en")
        assert hit.provenance["url"] == f"{lit_server.origin}/wiki/{key.replace(',', '%2C')}"
        assert hit.provenance["rank"] == rank
        assert extract.startswith(hit.provenance["snippet"]) and len(hit.provenance["snippet"]) <= 600
        assert hit.text == f"{title}: {snippet(extract)}"
    assert lit_server.count("title") == 1 and lit_server.count("summary") == 4
    assert all(r.headers["User-Agent"] == "clinrag-test (dev@example.org)" for r in lit_server.requests)


def test_a_title_without_a_summary_is_skipped(lit_server, monkeypatch):
    real = lit_server.matching_titles
    monkeypatch.setattr(lit_server, "matching_titles", lambda q: ["No such page", *real(q)])

    hits = asyncio.run(source(lit_server).search(QUERY, 3))

    assert [hit.provenance["title"] for hit in hits] == real(QUERY)[:2]
    assert lit_server.count("summary") == 3


def test_malformed_summary_json_fails_the_source(lit_server):
    lit_server.faults["summary"] = Fault(body=b'{"title": "Colon", "extract": ')

    with pytest.raises(MalformedResponseError, match="summary"):
        asyncio.run(source(lit_server).search(QUERY, 2))


def test_summary_without_required_fields_is_malformed(lit_server):
    lit_server.faults["summary"] = Fault(body=b'{"type": "standard", "extract": "no title"}')

    with pytest.raises(MalformedResponseError):
        asyncio.run(source(lit_server).search(QUERY, 2))


def test_server_error_on_a_summary_fails_the_source(lit_server):
    lit_server.faults["summary"] = Fault(status=503)

    with pytest.raises(SourceHTTPError) as caught:
        asyncio.run(source(lit_server, max_retries=1).search(QUERY, 1))
    assert caught.value.status_code == 503
    assert lit_server.count("summary") == 2
