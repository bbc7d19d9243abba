"""Reciprocal-rank fusion: hand-checked scores and order, deterministic ties, and fusing real rankings."""

from __future__ import annotations

from fractions import Fraction

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.index.dense import DenseIndex
from clinrag.index.fusion import rrf
from clinrag.index.hits import Hit
from clinrag.index.lexical import LexicalIndex
from tests.index.conftest import Corpus


def _ranking(*ids: str) -> list[Hit]:
    # Input scores are deliberately misleading: RRF must use positions only.
    return [Hit(item, float(position)) for position, item in enumerate(ids)]


def test_hand_checked_example() -> None:
    dense = _ranking("a", "b", "c")
    lexical = _ranking("b", "c", "d")
    fused = rrf([dense, lexical], k=60)
    # a: 1/61; b: 1/62 + 1/61; c: 1/63 + 1/62; d: 1/63
    assert [h.id for h in fused] == ["b", "c", "a", "d"]
    expected = {
        "a": Fraction(1, 61),
        "b": Fraction(1, 62) + Fraction(1, 61),
        "c": Fraction(1, 63) + Fraction(1, 62),
        "d": Fraction(1, 63),
    }
    for hit in fused:
        assert hit.score == pytest.approx(float(expected[hit.id]), rel=1e-12)


def test_small_k_lets_top_ranks_dominate() -> None:
    # k = 60: second place in both lists (2/62) beats first place in one (1/61). k = 0: first place once
    # (1/1) ties with second place twice (1/2 + 1/2), and the tie goes to the better best rank.
    first_once = _ranking("x", "y")
    second_twice = _ranking("z", "y")
    assert rrf([first_once, second_twice], k=60)[0].id == "y"
    assert [h.id for h in rrf([first_once, second_twice], k=0)][:2] == ["x", "z"]


def test_ties_are_broken_deterministically() -> None:
    one = _ranking("q", "p")
    two = _ranking("p", "q")
    assert [h.id for h in rrf([one, two])] == ["p", "q"]  # same ranks {1, 2}: by id
    assert rrf([one, two]) == rrf([two, one])
    # Equal scores from three lists summed in different orders are still exactly equal.
    a = _ranking("m", "n", "o")
    b = _ranking("n", "o", "m")
    c = _ranking("o", "m", "n")
    fused = rrf([a, b, c])
    assert fused[0].score == fused[1].score == fused[2].score
    assert [h.id for h in fused] == ["m", "n", "o"]
    assert rrf([c, a, b]) == fused


def test_duplicates_limit_and_edge_cases() -> None:
    fused = rrf([_ranking("a", "b", "a")], k=1)
    assert fused == [Hit("a", 0.5), Hit("b", pytest.approx(1 / 3))]
    assert [h.id for h in rrf([_ranking("a", "b", "c")], limit=2)] == ["a", "b"]
    assert rrf([_ranking("a")], limit=0) == []
    assert rrf([]) == [] and rrf([[], []]) == []
    with pytest.raises(InvalidInputError, match="non-negative"):
        rrf([_ranking("a")], k=-1)
    with pytest.raises(InvalidInputError, match="limit"):
        rrf([_ranking("a")], limit=-1)


def test_fusing_dense_and_bm25_on_real_text(corpus: Corpus, minilm_embedder) -> None:
    dense = DenseIndex(corpus.embedder, corpus.vectors.shape[1])
    dense.add(corpus.vectors, corpus.ids)
    lexical = LexicalIndex()
    lexical.add(corpus.ids, corpus.texts)
    query = "Which nerve passes through the centre of the cavernous sinus?"
    (dense_hits,) = dense.search(minilm_embedder.encode([query]), 10)
    lexical_hits = lexical.search(query, 10)
    fused = rrf([dense_hits, lexical_hits], limit=10)
    assert fused[0].id == "47f8f5d9-4611-4a68-9e8f-2993951ccc95"  # "Abducent nerve: ... cavernous sinus"
    assert {h.id for h in fused} <= {h.id for h in dense_hits} | {h.id for h in lexical_hits}
