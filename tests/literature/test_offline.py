"""The offline literature index over the real PubMedQA file (500 PubMed abstracts keyed by PMID)."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections import Counter

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.index.tokenize import Tokenizer
from clinrag.literature.offline import PubMedQAIndex

_WORD = re.compile(r"[a-z]{8,}")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def indexed_words(record: dict) -> set[str]:
    return words(" ".join([record["QUESTION"], *record["CONTEXTS"]]))


def distinctive_queries(records: dict, count: int) -> list[tuple[str, str]]:
    """(pmid, query) for the first `count` records having three long words that no other record's question
    or abstract contains, computed by plain word counting (independently of the index's tokenizer)."""
    frequency = Counter(word for record in records.values() for word in indexed_words(record))
    chosen = []
    for pmid, record in records.items():
        rare = sorted(w for w in indexed_words(record) if frequency[w] == 1)
        if len(rare) >= 3:
            chosen.append((pmid, " ".join(rare[:3])))
        if len(chosen) == count:
            break
    return chosen


def test_every_record_is_indexed(offline_index, pubmedqa_records):
    assert len(offline_index) == len(pubmedqa_records) == 500
    assert set(offline_index.articles) == set(pubmedqa_records)


def test_distinctive_words_find_their_abstract(offline_index, pubmedqa_records):
    queries = distinctive_queries(pubmedqa_records, 25)
    assert len(queries) == 25
    for pmid, query in queries:
        hits = asyncio.run(offline_index.search(query, 5))
        assert hits[0].id == f"pubmed:{pmid}", query


def test_hits_are_real_pmids_with_their_record(offline_index, pubmedqa_records):
    hits = asyncio.run(offline_index.search("laparoscopic cholecystectomy complications", 10))

    assert len(hits) == 10
    assert [h.provenance["rank"] for h in hits] == list(range(1, 11))
    assert all(a.score >= b.score > 0 for a, b in itertools.pairwise(hits))
    for hit in hits:
        pmid = hit.id.removeprefix("pubmed:")
        record = pubmedqa_records[pmid]
        meta = hit.provenance
        assert (hit.kind, hit.source) == ("citation", "pubmedqa")
        assert meta["pmid"] == pmid
        assert meta["url"] == f"https://pubmed.ncbi.nlm.nih.gov/{pmid}/"
        assert meta["title"] == record["QUESTION"] and meta["title_is_question"] is True
        assert meta["journal"] is None and meta["year"] == record["YEAR"]
        first = f"{record['LABELS'][0]}: {record['CONTEXTS'][0]}"
        assert first.startswith(meta["snippet"]) or meta["snippet"].startswith(first)


def test_conclusions_are_not_indexed(offline_index, pubmedqa_records):
    """PubMedQA's long answer (the abstract's conclusion, its answer) is neither indexed nor cited: a term
    that occurs only in conclusions finds nothing. Terms are compared after the index's stemming, so that
    "accessible" in a conclusion and "access" in an abstract count as the same term."""
    tokenize = Tokenizer("en")
    indexed = {
        t for r in pubmedqa_records.values() for t in tokenize(" ".join([r["QUESTION"], *r["CONTEXTS"]]))
    }
    conclusion_words = {
        w for r in pubmedqa_records.values() for w in re.findall(r"\w+", r.get("LONG_ANSWER") or "")
    }
    conclusion_only = sorted(w for w in conclusion_words if tokenize(w) and not set(tokenize(w)) & indexed)
    assert len(conclusion_only) > 50
    assert [t for t in conclusion_only if asyncio.run(offline_index.search(t, 3))] == []
    for record in pubmedqa_records.values():
        if record.get("LONG_ANSWER"):
            break
    hits = asyncio.run(offline_index.search(record["QUESTION"], 1))
    assert record["LONG_ANSWER"][:80] not in hits[0].text


def test_a_query_without_known_terms_finds_nothing(offline_index):
    assert asyncio.run(offline_index.search("qwertyuiop zxcvbnm", 5)) == []


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(DataFormatError):
        PubMedQAIndex.from_file(tmp_path / "missing.json")
