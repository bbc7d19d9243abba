"""PubMed over E-utilities against the loopback test double (tests/literature/literature_server.py): the
real NCBI service cannot be reached from CI, so the double serves esearch/efetch XML built from the real
PubMedQA records, and the client (httpx, retries, timeouts, Biopython's parser) runs for real."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from pydantic import SecretStr

from clinrag.literature.errors import (
    MalformedResponseError,
    ServiceError,
    SourceHTTPError,
    SourceTimeoutError,
)
from clinrag.literature.http import HttpPolicy
from clinrag.literature.pubmed import INTERVAL_S, PubMedSource
from tests.literature.literature_server import JOURNAL, Fault

TERM = "colonoscopy"  # in 4 of the 500 records


def source(server, *, api_key: str | None = "k-123", **policy) -> PubMedSource:
    return PubMedSource(
        email="dev@example.org",
        api_key=SecretStr(api_key) if api_key else None,
        tool="clinrag-test",
        base_url=server.eutils_url,
        policy=HttpPolicy(**{"timeout_s": 5.0, "max_retries": 0, "backoff_s": 0.0, **policy}),
    )


def labelled_abstract(record: dict) -> str:
    return " ".join(
        f"{label}: {text}" for label, text in zip(record["LABELS"], record["CONTEXTS"], strict=True)
    )


def test_hits_equal_the_records_served(lit_server, pubmedqa_records):
    expected = lit_server.matching_pmids(TERM)[:3]
    assert len(expected) == 3

    hits = asyncio.run(source(lit_server).search(TERM, 3))

    assert [hit.id for hit in hits] == [f"pubmed:{pmid}" for pmid in expected]
    for rank, (hit, pmid) in enumerate(zip(hits, expected, strict=True), 1):
        record = pubmedqa_records[pmid]
        meta = hit.provenance
        assert (hit.kind, hit.source, hit.score) == ("citation", "pubmed", None)
        assert meta["pmid"] == pmid
        assert meta["title"] == record["QUESTION"]
        assert meta["title_is_question"] is False
        assert meta["journal"] == JOURNAL
        assert meta["year"] == record["YEAR"]
        assert meta["url"] == f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/"
        assert meta["rank"] == rank
        full = labelled_abstract(record)
        snippet = meta["snippet"]
        assert full.startswith(snippet) and 0 < len(snippet) <= 600
        assert snippet == full or re.search(r"[.!?]$", snippet)
        assert hit.text == f"{record['QUESTION']} {snippet}"


def test_requests_follow_entrez_etiquette(lit_server):
    expected = lit_server.matching_pmids(TERM)[:2]
    asyncio.run(source(lit_server).search(TERM, 2))

    (search,) = lit_server.of("esearch")
    (fetch,) = lit_server.of("efetch")
    for request in (search, fetch):
        assert request.query["db"] == ["pubmed"]
        assert request.query["tool"] == ["clinrag-test"]
        assert request.query["email"] == ["dev@example.org"]
        assert request.query["api_key"] == ["k-123"]
    assert search.query["term"] == [TERM] and search.query["retmax"] == ["2"]
    assert fetch.query["id"] == [",".join(expected)] and fetch.query["retmode"] == ["xml"]


def test_requests_are_spaced_to_ncbi_rate_limit_without_a_key(lit_server):
    started = time.monotonic()
    asyncio.run(source(lit_server, api_key=None).search(TERM, 2))

    search, fetch = lit_server.of("esearch")[0], lit_server.of("efetch")[0]
    assert "api_key" not in search.query
    # The client spaces departures; arrivals jitter by the connection set-up of the first request, so the
    # bound is taken from the moment the search was started: efetch cannot leave before one full interval.
    assert search.at < fetch.at
    assert fetch.at - started >= INTERVAL_S > 1 / 3  # NCBI: 3 requests per second without a key


def test_no_match_makes_no_efetch(lit_server):
    assert asyncio.run(source(lit_server).search("zzzunmatchedterm", 5)) == []
    assert (lit_server.count("esearch"), lit_server.count("efetch")) == (1, 0)


def test_server_error_is_retried_then_raised(lit_server):
    lit_server.faults["esearch"] = Fault(status=500)

    with pytest.raises(SourceHTTPError) as caught:
        asyncio.run(source(lit_server, max_retries=2).search(TERM, 3))

    assert caught.value.status_code == 500 and caught.value.kind == "http_status"
    assert (lit_server.count("esearch"), lit_server.count("efetch")) == (3, 0)


def test_client_error_is_not_retried(lit_server):
    lit_server.faults["esearch"] = Fault(status=400)

    with pytest.raises(SourceHTTPError):
        asyncio.run(source(lit_server, max_retries=2).search(TERM, 3))
    assert lit_server.count("esearch") == 1


def test_truncated_efetch_xml_is_malformed(lit_server):
    pmids = lit_server.matching_pmids(TERM)[:2]
    whole = lit_server.efetch({"id": [",".join(pmids)]})
    lit_server.faults["efetch"] = Fault(body=whole[: len(whole) // 2])

    with pytest.raises(MalformedResponseError, match="efetch"):
        asyncio.run(source(lit_server).search(TERM, 2))


def test_non_xml_reply_is_malformed(lit_server):
    lit_server.faults["esearch"] = Fault(body=b'{"error":"API rate limit exceeded","count":"11"}')

    with pytest.raises(MalformedResponseError, match="esearch"):
        asyncio.run(source(lit_server).search(TERM, 2))


def test_eutilities_error_element_is_a_service_error(lit_server):
    head = lit_server.esearch({"term": ["zzz"]}).split(b"<eSearchResult>")[0]
    lit_server.faults["esearch"] = Fault(
        body=head + b"<eSearchResult><ERROR>Invalid query</ERROR></eSearchResult>"
    )

    with pytest.raises(ServiceError, match="Invalid query"):
        asyncio.run(source(lit_server).search(TERM, 2))


def test_slow_reply_times_out_per_call(lit_server):
    lit_server.faults["esearch"] = Fault(delay_s=2.0)

    started = time.perf_counter()
    with pytest.raises(SourceTimeoutError):
        asyncio.run(source(lit_server, timeout_s=0.3, max_retries=1).search(TERM, 2))
    elapsed = time.perf_counter() - started

    assert lit_server.count("esearch") == 2  # the timeout was retried once
    assert elapsed < 1.5  # two attempts of 0.3 s and the spacing, not the 2 s the server takes


def test_timeout_bounds_the_whole_reply_not_each_read(lit_server):
    """The reply trickles in (a piece every 0.15 s, 1.5 s in all): no single read waits 0.5 s, yet the call
    as a whole must stop at 0.5 s."""
    lit_server.faults["esearch"] = Fault(trickle_s=0.15)

    started = time.perf_counter()
    with pytest.raises(SourceTimeoutError):
        asyncio.run(source(lit_server, timeout_s=0.5).search(TERM, 2))
    assert time.perf_counter() - started < 1.0

    lit_server.faults["esearch"] = Fault(trickle_s=0.01)  # the same trickle, fast enough: parsed whole
    assert len(asyncio.run(source(lit_server, timeout_s=0.5).search(TERM, 2))) == 2
