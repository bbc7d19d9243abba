"""Dense index on real MedMCQA explanations embedded with the packaged MiniLM model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from clinrag.core.errors import ConfigError, DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.index import dense as dense_module
from clinrag.index.dense import DenseConfig, DenseIndex
from clinrag.index.hits import Hit
from clinrag.index.lexical import LexicalIndex
from tests.index.conftest import Corpus

HNSW = DenseConfig(exact_threshold=50, hnsw_m=16, ef_construction=64, ef_search=64)


def _exact(corpus: Corpus) -> DenseIndex:
    index = DenseIndex(corpus.embedder, corpus.vectors.shape[1])
    index.add(corpus.vectors, corpus.ids)
    return index


def _ids(results: list[list[Hit]]) -> list[list[str]]:
    return [[hit.id for hit in hits] for hits in results]


def _brute_force(corpus: Corpus, queries: np.ndarray, k: int) -> list[list[str]]:
    scores = queries @ corpus.vectors.T
    return [[corpus.ids[i] for i in np.argsort(-row, kind="stable")[:k]] for row in scores]


def test_exact_search_is_cosine_top_k(corpus: Corpus) -> None:
    index = _exact(corpus)
    assert index.structure == "flat" and len(index) == len(corpus.ids)
    results = index.search(corpus.question_vectors, 10)
    assert _ids(results) == _brute_force(corpus, corpus.question_vectors, 10)
    for hits, query in zip(results, corpus.question_vectors, strict=True):
        expected = corpus.vectors[corpus.ids.index(hits[0].id)] @ query
        assert hits[0].score == pytest.approx(float(expected), abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_statement_finds_itself_with_cosine_one(corpus: Corpus) -> None:
    index = _exact(corpus)
    for row in (0, 57, 199):
        (hits,) = index.search(corpus.vectors[row : row + 1], 1)
        assert hits[0].id == corpus.ids[row]
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_hnsw_agrees_with_exact_on_real_queries(corpus: Corpus) -> None:
    approximate = DenseIndex(corpus.embedder, corpus.vectors.shape[1], HNSW)
    approximate.add(corpus.vectors, corpus.ids)
    assert approximate.structure == "hnsw"
    exact = _ids(_exact(corpus).search(corpus.question_vectors, 10))
    found = _ids(approximate.search(corpus.question_vectors, 10))
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found, exact, strict=True)])
    assert recall >= 0.95


def test_crossing_the_threshold_rebuilds_as_hnsw_and_keeps_everything(corpus: Corpus) -> None:
    index = DenseIndex(corpus.embedder, corpus.vectors.shape[1], DenseConfig(exact_threshold=100))
    index.add(corpus.vectors[:100], corpus.ids[:100])
    assert index.structure == "flat"
    index.add(corpus.vectors[100:], corpus.ids[100:])
    assert index.structure == "hnsw"
    assert index.ids == corpus.ids
    np.testing.assert_allclose(index.vectors(corpus.ids[98:102]), corpus.vectors[98:102], atol=1e-6)
    for row in (3, 99, 100, 239):  # items from before and after the rebuild are found
        (hits,) = index.search(corpus.vectors[row : row + 1], 1)
        assert hits[0].id == corpus.ids[row]


@pytest.mark.parametrize(
    ("source_id", "paraphrase"),
    [
        (
            "c6365cce-507c-40f6-90a2-46b867f47b6e",
            "Kinesin carries cargo quickly forward along the axon, dynein moves it back to the cell body.",
        ),
        (
            "47f8f5d9-4611-4a68-9e8f-2993951ccc95",
            "The sixth cranial nerve is the only one that runs through the middle of the cavernous sinus.",
        ),
        (
            "1f93c541-baaf-40f2-bf91-31be29732da2",
            "For anaphylaxis give epinephrine 0.5 mg into the muscle and repeat after ten minutes if needed.",
        ),
    ],
)
def test_paraphrase_finds_its_source(
    corpus: Corpus, minilm_embedder, source_id: str, paraphrase: str
) -> None:
    (hits,) = _exact(corpus).search(minilm_embedder.encode([paraphrase]), 3)
    assert hits[0].id == source_id


def test_search_within_restricts_and_stays_exact(corpus: Corpus) -> None:
    index = DenseIndex(corpus.embedder, corpus.vectors.shape[1], HNSW)
    index.add(corpus.vectors, corpus.ids)
    allowed = corpus.ids[::7]
    results = index.search(corpus.question_vectors[:10], 5, within=set(allowed))
    allowed_vectors = corpus.vectors[::7]
    for hits, query in zip(results, corpus.question_vectors[:10], strict=True):
        order = np.argsort(-(allowed_vectors @ query), kind="stable")[:5]
        assert [h.id for h in hits] == [allowed[i] for i in order]
    assert index.search(corpus.question_vectors[:2], 5, within=[]) == [[], []]
    with pytest.raises(InvalidInputError, match="not in the index"):
        index.search(corpus.question_vectors[:1], 5, within=["no-such-id"])


def test_empty_index_and_small_index(corpus: Corpus) -> None:
    index = DenseIndex(corpus.embedder, corpus.vectors.shape[1])
    assert index.search(corpus.question_vectors[:3], 5) == [[], [], []]
    index.add(corpus.vectors[:4], corpus.ids[:4])
    (hits,) = index.search(corpus.question_vectors[:1], 10)
    assert sorted(h.id for h in hits) == sorted(corpus.ids[:4])


def test_invalid_vectors_and_ids_are_rejected(corpus: Corpus) -> None:
    index = _exact(corpus)
    fresh = DenseIndex(corpus.embedder, 384)
    with pytest.raises(InvalidInputError, match="duplicate id 'x'"):
        fresh.add(corpus.vectors[:2], ["x", "x"])
    with pytest.raises(InvalidInputError, match="duplicate id"):
        index.add(corpus.vectors[:1], [corpus.ids[5]])
    with pytest.raises(InvalidInputError, match="dimension 383, the index expects 384"):
        fresh.add(corpus.vectors[:2, :383], ["a", "b"])
    with pytest.raises(InvalidInputError, match="dimension 383"):
        index.search(corpus.question_vectors[:1, :383], 3)
    with pytest.raises(InvalidInputError, match="float32"):
        fresh.add(corpus.vectors[:2].astype(np.float64), ["a", "b"])
    with pytest.raises(InvalidInputError, match="L2-normalised"):
        fresh.add(corpus.vectors[:2] * 2, ["a", "b"])
    broken = corpus.vectors[:2].copy()
    broken[1, 0] = np.nan
    with pytest.raises(InvalidInputError, match="row 1 contains NaN"):
        fresh.add(broken, ["a", "b"])
    with pytest.raises(InvalidInputError, match="2 ids for 3 rows"):
        fresh.add(corpus.vectors[:3], ["a", "b"])
    with pytest.raises(InvalidInputError, match="2-D"):
        index.search(corpus.question_vectors[0], 3)
    with pytest.raises(InvalidInputError, match="k must be a positive integer"):
        index.search(corpus.question_vectors[:1], 0)
    assert len(fresh) == 0  # nothing was added by a rejected call
    with pytest.raises(ConfigError):
        DenseConfig(hnsw_m=0)


@pytest.mark.parametrize("config", [DenseConfig(), HNSW], ids=["flat", "hnsw"])
def test_save_load_round_trip(corpus: Corpus, tmp_path: Path, config: DenseConfig) -> None:
    index = DenseIndex(corpus.embedder, corpus.vectors.shape[1], config)
    index.add(corpus.vectors, corpus.ids)
    index.save(tmp_path / "dense")
    loaded = DenseIndex.load(tmp_path / "dense", expect_embedder=corpus.embedder, expect_dimension=384)
    assert loaded.structure == index.structure
    assert loaded.config == config
    assert loaded.ids == corpus.ids
    assert loaded.search(corpus.question_vectors, 10) == index.search(corpus.question_vectors, 10)
    manifest = json.loads((tmp_path / "dense" / "manifest.json").read_text())
    assert manifest["kind"] == "dense" and manifest["count"] == len(corpus.ids)
    assert manifest["embedder"] == corpus.embedder and manifest["dimension"] == 384


def test_mismatched_index_refuses_to_load(corpus: Corpus, tmp_path: Path) -> None:
    _exact(corpus).save(tmp_path / "dense")
    with pytest.raises(IndexMismatchError, match=rf"'{re.escape(corpus.embedder)}'.*'other-embedder'"):
        DenseIndex.load(tmp_path / "dense", expect_embedder="other-embedder")
    with pytest.raises(IndexMismatchError, match=r"dimension 384.*768"):
        DenseIndex.load(tmp_path / "dense", expect_dimension=768)
    lexical = LexicalIndex()
    lexical.add(["a"], ["text"])
    lexical.save(tmp_path / "lexical")
    with pytest.raises(IndexMismatchError, match="'lexical' index, not a 'dense'"):
        DenseIndex.load(tmp_path / "lexical")
    with pytest.raises(DataFormatError, match="no index directory"):
        DenseIndex.load(tmp_path / "missing")


def test_corrupt_vector_file_is_a_data_format_error(corpus: Corpus, tmp_path: Path) -> None:
    _exact(corpus).save(tmp_path / "dense")
    (tmp_path / "dense" / "vectors.faiss").write_bytes(b"garbage")
    with pytest.raises(DataFormatError, match="cannot read"):
        DenseIndex.load(tmp_path / "dense")


def test_failed_save_keeps_the_previous_index(
    corpus: Corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "dense"
    old = DenseIndex(corpus.embedder, 384)
    old.add(corpus.vectors[:50], corpus.ids[:50])
    old.save(target)
    expected = old.search(corpus.question_vectors, 5)

    def fail_midway(index, path: str) -> None:
        Path(path).write_bytes(b"\x00" * 1000)  # part of a file, then the disk fills up
        raise OSError("No space left on device")

    monkeypatch.setattr(dense_module.faiss, "write_index", fail_midway)
    bigger = _exact(corpus)
    with pytest.raises(OSError, match="No space left"):
        bigger.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dense"]  # no staging directory left over
    loaded = DenseIndex.load(target, expect_embedder=corpus.embedder, expect_dimension=384)
    assert len(loaded) == 50
    assert loaded.search(corpus.question_vectors, 5) == expected
