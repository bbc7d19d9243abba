"""The best-effort facade over PubMed and Wikipedia, both served by the loopback test double
(tests/literature/literature_server.py, built from the real PubMedQA records) because the real services
cannot be reached from CI, and over the offline PubMedQA index."""

from __future__ import annotations

import time

import pytest
from pydantic import SecretStr

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer
from clinrag.literature.cache import LiteratureCache
from clinrag.literature.http import HttpPolicy
from clinrag.literature.pubmed import PubMedSource
from clinrag.literature.search import LiteratureSearch
from clinrag.literature.wikipedia import WikipediaSource
from tests.literature.literature_server import Fault

TERM = "colonoscopy"


def sources(server, timeout_s: float = 5.0) -> list:
    policy = HttpPolicy(timeout_s=timeout_s, max_retries=0, backoff_s=0.0)
    return [
        PubMedSource(
            email="dev@example.org", api_key=SecretStr("k"), base_url=server.eutils_url, policy=policy
        ),
        WikipediaSource(base_url=server.origin, policy=policy),
    ]


def test_both_sources_contribute(lit_server):
    result = LiteratureSearch(sources(lit_server), deadline_s=10).search_sync(TERM, 2)

    pmids = lit_server.matching_pmids(TERM)[:2]
    titles = lit_server.matching_titles(TERM)[:2]
    assert [e.id for e in result.evidence] == [
        *(f"pubmed:{p}" for p in pmids),
        *(f"wikipedia:en:{t.replace(' ', '_')}" for t in titles),
    ]
    assert result.failures == []
    assert [(r.source, r.ok, r.hits, r.cached) for r in result.runs] == [
        ("pubmed", True, 2, False),
        ("wikipedia", True, len(titles), False),
    ]


def test_cache_serves_a_repeated_query_without_http(lit_server, tmp_path):
    cache = LiteratureCache(tmp_path / "literature.sqlite")
    first = LiteratureSearch(sources(lit_server), deadline_s=10, cache=cache).search_sync(TERM, 3)
    served = len(lit_server.requests)
    assert served == 2 + 1 + len(lit_server.matching_titles(TERM)[:3])  # esearch, efetch, titles, summaries

    # A new facade over the same cache file: the entries are on disk.
    again = LiteratureSearch(sources(lit_server), deadline_s=10, cache=LiteratureCache(cache.path))
    second = again.search_sync(TERM, 3)

    assert len(lit_server.requests) == served
    assert second.evidence == first.evidence
    assert all(run.cached and run.ok for run in second.runs)

    again.search_sync(TERM, 2)  # another limit is another request
    assert len(lit_server.requests) > served


def test_cache_entries_expire_after_the_ttl(lit_server, tmp_path):
    cache = LiteratureCache(tmp_path / "literature.sqlite", ttl_s=0.3)
    search = LiteratureSearch(sources(lit_server)[:1], deadline_s=10, cache=cache)
    search.search_sync(TERM, 2)
    search.search_sync(TERM, 2)
    assert lit_server.count("esearch") == 1
    time.sleep(0.4)
    result = search.search_sync(TERM, 2)
    assert lit_server.count("esearch") == 2 and not result.runs[0].cached


def test_failures_are_not_cached(lit_server, tmp_path):
    cache = LiteratureCache(tmp_path / "literature.sqlite")
    search = LiteratureSearch(sources(lit_server)[:1], deadline_s=10, cache=cache)
    lit_server.faults["esearch"] = Fault(status=500)
    assert search.search_sync(TERM, 2).failures
    del lit_server.faults["esearch"]
    assert len(search.search_sync(TERM, 2).evidence) == 2
    assert lit_server.count("esearch") == 2


def test_slow_source_times_out_and_the_other_still_answers(lit_server):
    lit_server.faults["esearch"] = Fault(delay_s=3.0)
    search = LiteratureSearch(sources(lit_server, timeout_s=0.5), deadline_s=2.0)

    started = time.perf_counter()
    result = search.search_sync(TERM, 2)
    elapsed = time.perf_counter() - started

    assert elapsed < 2.0
    [failure] = result.failures
    assert (failure.source, failure.kind, failure.error_type) == ("pubmed", "timeout", "SourceTimeoutError")
    assert 0.5 <= failure.elapsed_s < 1.5
    wiki = [f"wikipedia:en:{t.replace(' ', '_')}" for t in lit_server.matching_titles(TERM)[:2]]
    assert wiki and [e.id for e in result.evidence] == wiki


def test_deadline_bounds_the_whole_search(lit_server):
    lit_server.faults["efetch"] = Fault(delay_s=3.0)
    search = LiteratureSearch(sources(lit_server, timeout_s=10.0), deadline_s=0.8)

    started = time.perf_counter()
    result = search.search_sync(TERM, 2)
    elapsed = time.perf_counter() - started

    assert elapsed < 0.8 + 0.3
    [failure] = result.failures
    assert (failure.source, failure.kind) == ("pubmed", "deadline")
    assert failure.elapsed_s >= 0.8
    assert [run.ok for run in result.runs] == [False, True]
    assert [e.source for e in result.evidence] == ["wikipedia:en"] * len(lit_server.matching_titles(TERM)[:2])
    assert result.evidence


def test_http_500_and_malformed_xml_are_recorded_not_raised(lit_server, offline_index):
    lit_server.faults["esearch"] = Fault(status=500)
    lit_server.faults["title"] = Fault(body=b"<html>Service Unavailable</html>")
    search = LiteratureSearch([*sources(lit_server), offline_index], deadline_s=10)

    result = search.search_sync(TERM, 2)

    by_source = {f.source: f for f in result.failures}
    assert set(by_source) == {"pubmed", "wikipedia"}
    assert (by_source["pubmed"].kind, by_source["pubmed"].status_code) == ("http_status", 500)
    assert by_source["wikipedia"].kind == "malformed"
    assert [e.source for e in result.evidence] == ["pubmedqa", "pubmedqa"]  # the offline index still answers


def test_malformed_efetch_xml_is_recorded(lit_server):
    lit_server.faults["efetch"] = Fault(body=b'<?xml version="1.0"?><PubmedArticleSet><PubmedArticle>')
    result = LiteratureSearch(sources(lit_server)[:1], deadline_s=10).search_sync(TERM, 2)
    [failure] = result.failures
    assert (failure.kind, failure.error_type) == ("malformed", "MalformedResponseError")
    assert result.evidence == []


def test_the_same_article_from_two_sources_is_kept_once(lit_server, offline_index, pubmedqa_records):
    pmid = next(iter(pubmedqa_records))
    query = pubmedqa_records[pmid]["QUESTION"].rstrip("?")
    lit_server.matching_pmids = lambda term: [pmid]  # the live service finds that article too
    search = LiteratureSearch([sources(lit_server)[0], offline_index], deadline_s=10)

    result = search.search_sync(query, 3)

    ids = [e.id for e in result.evidence]
    assert ids[0] == f"pubmed:{pmid}" and result.evidence[0].source == "pubmed"
    assert len(ids) == len(set(ids)) and len(ids) == 3  # offline's copy of the article dropped
    Answer(case_id="c", method="m", evidence=result.evidence)  # evidence ids must be unique in an answer


class _Broken:
    name = "broken"
    identity = None

    async def search(self, query: str, limit: int):
        raise KeyError("a bug in a source")


def test_an_unexpected_error_is_recorded(offline_index):
    result = LiteratureSearch([_Broken(), offline_index], deadline_s=5).search_sync("colonoscopy", 1)
    [failure] = result.failures
    assert (failure.source, failure.kind, failure.error_type) == ("broken", "unexpected", "KeyError")
    assert len(result.evidence) == 1


def test_invalid_queries_are_refused():
    search = LiteratureSearch([], deadline_s=1)
    with pytest.raises(InvalidInputError):
        search.search_sync("  ", 3)
    with pytest.raises(InvalidInputError):
        search.search_sync("colonoscopy", 0)
    assert search.search_sync("colonoscopy", 3).evidence == []  # no source configured: nothing, no error


def test_the_real_services_are_out_of_reach_and_fail_as_recorded_failures():
    # the default base URLs (NCBI, Wikipedia) with the network blocked: both fail fast, typed, never raised
    policy = HttpPolicy(timeout_s=2.0, max_retries=0, backoff_s=0.0)
    real = [PubMedSource(email="dev@example.org", policy=policy), WikipediaSource(policy=policy)]
    result = LiteratureSearch(real, deadline_s=5).search_sync(TERM, 2)
    assert result.evidence == []
    assert sorted(f.source for f in result.failures) == sorted(s.name for s in real)
    assert all(f.kind != "deadline" for f in result.failures)
