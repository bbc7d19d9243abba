"""Concept-constrained retrieval (DoctorRAG eq. 1) on real MedMCQA explanations with MiniLM vectors."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from clinrag.core.errors import IndexMismatchError, InvalidInputError
from clinrag.index.baseline import MaskedSearch, masked_search
from clinrag.index.concept import (
    EMPTY_INDEX,
    NO_QUERY_TAGS,
    NO_SHARED_TAGS,
    ConceptIndex,
    ConceptResult,
)
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.hits import Hit
from tests.index.conftest import Corpus

HNSW = DenseConfig(exact_threshold=20, hnsw_m=16, ef_construction=64, ef_search=64)
CHAPTERS = range(1, 23)


def _random_tags(count: int, seed: int) -> list[set[int]]:
    """0–3 chapters per statement, a tenth untagged, low chapters more frequent (as in a real KB)."""
    rng = random.Random(seed)
    weights = [1 / c for c in CHAPTERS]
    tags = []
    for _ in range(count):
        size = rng.choices([0, 1, 2, 3], weights=[0.1, 0.5, 0.25, 0.15])[0]
        tags.append(set(rng.choices(list(CHAPTERS), weights=weights, k=size)))
    return tags


def _random_queries(corpus: Corpus, count: int, seed: int) -> tuple[np.ndarray, list[set[int]]]:
    """Real question vectors paired with random 1–2 tag sets, some with chapters no statement has."""
    rng = random.Random(seed)
    rows = [rng.randrange(len(corpus.questions)) for _ in range(count)]
    tags = [set(rng.sample(list(CHAPTERS), rng.choice([1, 1, 2]))) for _ in range(count)]
    return corpus.question_vectors[rows], tags


def _build(corpus: Corpus, tags: list[set[int]], config: DenseConfig | None = None) -> ConceptIndex:
    index = ConceptIndex(corpus.embedder, corpus.vectors.shape[1], config)
    index.add(corpus.vectors, corpus.ids, tags)
    return index


def _assert_same_top_k(found: list[Hit], expected: list[Hit], tolerance: float = 1e-5) -> None:
    """Same scores position by position; ids equal except where two scores are within float noise."""
    assert len(found) == len(expected)
    np.testing.assert_allclose([h.score for h in found], [h.score for h in expected], atol=tolerance)
    if expected:
        clear = {h.id for h in expected if h.score > expected[-1].score + tolerance}
        assert clear <= {h.id for h in found}


@pytest.mark.parametrize("tagging", ["subjects", "random"])
def test_exact_concept_search_equals_masked_search(corpus: Corpus, tagging: str) -> None:
    tags = corpus.subject_tags if tagging == "subjects" else _random_tags(len(corpus.ids), seed=1)
    index = _build(corpus, tags)
    queries, query_tags = _random_queries(corpus, 300, seed=2)
    results = index.search(queries, query_tags, 10)
    reference = masked_search(corpus.vectors, corpus.ids, tags, queries, query_tags, 10)
    tag_of = dict(zip(corpus.ids, tags, strict=True))
    constrained = 0
    for result, expected, qt in zip(results, reference, query_tags, strict=True):
        _assert_same_top_k(result.hits, expected)
        for hit in result.hits:  # eq. 1: never a statement without a shared tag
            assert tag_of[hit.id] & qt
        assert not result.fallback_used
        constrained += bool(result.hits)
    assert constrained > 100  # the property was exercised on many non-empty results


def test_hnsw_sub_indexes_respect_tags_and_recall(corpus: Corpus) -> None:
    tags = _random_tags(len(corpus.ids), seed=3)
    index = _build(corpus, tags, HNSW)
    sizes = index.sub_index_sizes()
    assert any(size > HNSW.exact_threshold for size in sizes.values())
    queries, query_tags = _random_queries(corpus, 300, seed=4)
    reference = MaskedSearch(corpus.vectors, corpus.ids, tags).search(queries, query_tags, 10)
    results = index.search(queries, query_tags, 10)
    shared = total = 0
    for result, expected, qt in zip(results, reference, query_tags, strict=True):
        assert all(index.tags_of(h.id) & qt for h in result.hits)
        assert len({h.id for h in result.hits}) == len(result.hits)  # multi-tag statements de-duplicated
        shared += len({h.id for h in result.hits} & {h.id for h in expected})
        total += len(expected)
    assert shared / total >= 0.95


def test_multi_tag_statements_are_in_every_sub_index_of_their_tags(corpus: Corpus) -> None:
    tags = [{2, 9}, {9}, set(), {2}] + [{5}] * (len(corpus.ids) - 4)
    index = _build(corpus, tags)
    assert index.tags == [2, 5, 9]
    assert index.sub_index_sizes() == {2: 2, 5: len(corpus.ids) - 4, 9: 2, None: 1}
    assert index.tags_of(corpus.ids[0]) == {2, 9}
    (result,) = index.search(corpus.vectors[:1], [{2, 9}], 10)
    assert result.hits[0].id == corpus.ids[0]
    assert sorted(h.id for h in result.hits) == sorted([corpus.ids[0], corpus.ids[1], corpus.ids[3]])
    assert result.searched_tags == (2, 9) and result.reason is None


def test_fallback_policies_and_recorded_reasons(corpus: Corpus) -> None:
    tags = corpus.subject_tags  # chapters 1, 5, 7, 8, 11–16, 19, 20 occur; the rest of the subjects untagged
    untagged = {i for i, t in zip(corpus.ids, tags, strict=True) if not t}
    assert untagged and 3 not in set().union(*tags)
    index = _build(corpus, tags)
    everything = DenseIndex(corpus.embedder, 384)
    everything.add(corpus.vectors, corpus.ids)
    queries = corpus.question_vectors[[0, 1, 2, 2]]
    query_tags = [set(), {3}, {3, 7}, {7}]

    strict = index.search(queries, query_tags, 5, fallback="none")
    assert [r.hits for r in strict[:2]] == [[], []]
    assert (strict[0].reason, strict[0].fallback_used) == (NO_QUERY_TAGS, False)
    assert (strict[1].reason, strict[1].unmatched_tags, strict[1].searched_tags) == (NO_SHARED_TAGS, (3,), ())
    # A query with one unknown and one known tag is constrained to the known one, without fallback.
    assert strict[2].hits and strict[2].searched_tags == (7,) and strict[2].unmatched_tags == (3,)
    assert strict[2].reason is None and strict[2].hits == strict[3].hits

    loose = index.search(queries, query_tags, 5, fallback="unconstrained")
    unconstrained = everything.search(queries[:2], 5)
    for result, expected in zip(loose[:2], unconstrained, strict=True):
        assert result.fallback_used and result.searched_untagged
        assert result.searched_tags == tuple(index.tags)
        _assert_same_top_k(result.hits, expected)
    assert (loose[0].reason, loose[1].reason) == (NO_QUERY_TAGS, NO_SHARED_TAGS)
    assert not loose[2].fallback_used and loose[2].hits == strict[2].hits
    # The fallback reaches untagged statements, which eq. 1 never returns.
    assert any(h.id in untagged for r in loose[:2] for h in r.hits)
    assert not any(h.id in untagged for r in strict for h in r.hits)

    record = json.loads(json.dumps(loose[1].to_trace()))
    assert record["reason"] == NO_SHARED_TAGS and record["fallback_used"] is True
    assert record["query_tags"] == [3] and record["fallback"] == "unconstrained"
    assert [h["id"] for h in record["hits"]] == [h.id for h in loose[1].hits]


def test_empty_index_reports_it(corpus: Corpus) -> None:
    index = ConceptIndex(corpus.embedder, 384)
    (result,) = index.search(corpus.question_vectors[:1], [{1}], 5, fallback="unconstrained")
    assert result == ConceptResult([], (1,), (), (1,), False, "unconstrained", False, EMPTY_INDEX)


def test_invalid_inputs(corpus: Corpus) -> None:
    index = _build(corpus, corpus.subject_tags)
    fresh = ConceptIndex(corpus.embedder, 384)
    with pytest.raises(InvalidInputError, match="duplicate id"):
        fresh.add(corpus.vectors[:2], ["x", "x"], [{1}, {2}])
    with pytest.raises(InvalidInputError, match="duplicate id"):
        index.add(corpus.vectors[:1], corpus.ids[:1], [{1}])
    with pytest.raises(InvalidInputError, match="dimension 100, the index expects 384"):
        fresh.add(corpus.vectors[:2, :100], ["a", "b"], [{1}, {2}])
    with pytest.raises(InvalidInputError, match="not an int tag"):
        fresh.add(corpus.vectors[:2], ["a", "b"], [{1}, {"I00"}])
    with pytest.raises(InvalidInputError, match="not an int tag"):
        fresh.add(corpus.vectors[:1], ["a"], [{True}])
    with pytest.raises(InvalidInputError, match="1 tags for 2 rows"):
        fresh.add(corpus.vectors[:2], ["a", "b"], [{1}])
    with pytest.raises(InvalidInputError, match="fallback must be one of"):
        index.search(corpus.question_vectors[:1], [{1}], 5, fallback="everything")
    with pytest.raises(InvalidInputError, match="2 query tags for 1 rows"):
        index.search(corpus.question_vectors[:1], [{1}, {2}], 5)
    with pytest.raises(InvalidInputError, match="ef_search"):
        index.search(corpus.question_vectors[:1], [{1}], 5, ef_search=0)
    with pytest.raises(InvalidInputError, match="no statement with id"):
        index.tags_of("missing")
    assert len(fresh) == 0 and fresh.tags == []


def test_save_load_round_trip(corpus: Corpus, tmp_path: Path) -> None:
    tags = _random_tags(len(corpus.ids), seed=5)
    index = _build(corpus, tags, HNSW)
    index.save(tmp_path / "concept")
    loaded = ConceptIndex.load(tmp_path / "concept", expect_embedder=corpus.embedder, expect_dimension=384)
    assert loaded.tags == index.tags
    assert loaded.sub_index_sizes() == index.sub_index_sizes()
    assert all(loaded.tags_of(i) == frozenset(t) for i, t in zip(corpus.ids, tags, strict=True))
    queries, query_tags = _random_queries(corpus, 50, seed=6)
    for fallback in ("none", "unconstrained"):
        query_tags_with_empty = [*query_tags[:-1], set()]
        assert loaded.search(queries, query_tags_with_empty, 10, fallback=fallback) == index.search(
            queries, query_tags_with_empty, 10, fallback=fallback
        )
    layout = {p.name for p in (tmp_path / "concept").iterdir()}
    assert {"manifest.json", "statements.json", "untagged"} | {f"tag_{t}" for t in index.tags} == layout


def test_mismatched_concept_index_refuses_to_load(corpus: Corpus, tmp_path: Path) -> None:
    _build(corpus, corpus.subject_tags).save(tmp_path / "concept")
    with pytest.raises(
        IndexMismatchError, match=rf"'{re.escape(corpus.embedder)}'.*'text-embedding-3-small'"
    ):
        ConceptIndex.load(tmp_path / "concept", expect_embedder="text-embedding-3-small")
    with pytest.raises(IndexMismatchError, match=r"dimension 384.*1536"):
        ConceptIndex.load(tmp_path / "concept", expect_dimension=1536)
    with pytest.raises(IndexMismatchError, match="'concept' index, not a 'dense'"):
        DenseIndex.load(tmp_path / "concept")
