"""The SQLite embedding cache in front of the real ONNX model (and a real HTTP embeddings server)."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.remote import RetryPolicy
from clinrag.embed.base import Embedder
from clinrag.embed.cache import CachedEmbedder, EmbeddingCache, text_key
from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.embed.openai_compat import OpenAIEmbedder
from tests.embed.embeddings_server import EmbeddingsServer


class Counting(Embedder):
    """The real model, with a record of every batch that reaches it."""

    def __init__(self, inner: MiniLMOnnxEmbedder) -> None:
        super().__init__(inner.batch_size)
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.batches: list[list[str]] = []
        self._lock = threading.Lock()

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.batches.append(list(texts))
        return self.inner._embed_batch(texts)

    @property
    def texts_seen(self) -> list[str]:
        return [t for batch in self.batches for t in batch]


@pytest.fixture
def counting(minilm: MiniLMOnnxEmbedder) -> Counting:
    return Counting(minilm)


def test_second_encode_makes_no_inner_call(
    counting: Counting, tmp_path: Path, medqa_sentences: list[str]
) -> None:
    texts = medqa_sentences[:20]
    cached = CachedEmbedder(counting, tmp_path / "embed.sqlite")
    first = cached.encode(texts)
    assert sorted(counting.texts_seen) == sorted(texts)
    assert (cached.hits, cached.misses) == (0, 20)
    counting.batches.clear()
    second = cached.encode(texts)
    assert counting.batches == []
    assert (cached.hits, cached.misses) == (20, 20)
    np.testing.assert_array_equal(first, second)
    assert second.dtype == np.float32 and second.shape == (20, 384)
    np.testing.assert_allclose(first, counting.inner.encode(texts), atol=1e-5)


def test_cache_persists_across_instances(
    minilm: MiniLMOnnxEmbedder, tmp_path: Path, medqa_sentences: list[str]
) -> None:
    texts = medqa_sentences[:10]
    path = tmp_path / "embed.sqlite"
    first = CachedEmbedder(Counting(minilm), path).encode(texts)
    fresh_inner = Counting(minilm)
    reopened = CachedEmbedder(fresh_inner, path)
    np.testing.assert_array_equal(reopened.encode(texts), first)
    assert fresh_inner.batches == []
    assert reopened.hits == 10
    assert len(reopened.cache) == 10


def test_only_misses_reach_the_model_and_order_is_kept(
    counting: Counting, tmp_path: Path, medqa_sentences: list[str]
) -> None:
    cached = CachedEmbedder(counting, tmp_path / "embed.sqlite")
    known = medqa_sentences[:6]
    cached.encode(known)
    counting.batches.clear()
    new = medqa_sentences[6:10]
    mixed = [new[0], known[2], new[1], new[1], known[0], new[2], new[3], known[5]]
    vectors = cached.encode(mixed)
    assert sorted(counting.texts_seen) == sorted(new)  # the repeat of new[1] is computed once
    assert (cached.hits, cached.misses) == (0 + 4, 6 + 4)  # 3 cached + 1 repeat; 4 computed
    np.testing.assert_allclose(vectors, counting.inner.encode(mixed), atol=1e-5)
    np.testing.assert_array_equal(vectors[2], vectors[3])


def test_key_is_sha256_of_the_exact_text() -> None:
    assert text_key("chest pain") == "1bce3b700f26488e08cd6974ea39eeb31e87235ac8cc68b33315f3b91fd25b64"
    assert text_key("fièvre") == "965518df8610468bd365de73a545b2885ddae60980d4494745b684bf07039fea"
    assert text_key("chest pain ") != text_key("chest pain")


def test_rows_are_keyed_by_embedder_name_and_stored_as_float32(counting: Counting, tmp_path: Path) -> None:
    path = tmp_path / "embed.sqlite"
    vector = CachedEmbedder(counting, path).encode(["chest pain"])[0]
    db = sqlite3.connect(path)
    rows = db.execute("SELECT model, text_sha256, vector FROM embeddings").fetchall()
    assert [(m, k) for m, k, _ in rows] == [("all-MiniLM-L6-v2-onnx-int8", text_key("chest pain"))]
    np.testing.assert_array_equal(np.frombuffer(rows[0][2], dtype="<f4"), vector)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache = EmbeddingCache(path)
    assert cache.get_many("another-model", [text_key("chest pain")]) == {}


def test_invalid_input_is_rejected_before_any_work(counting: Counting, tmp_path: Path) -> None:
    cached = CachedEmbedder(counting, tmp_path / "embed.sqlite")
    with pytest.raises(InvalidInputError, match="index 1"):
        cached.encode(["chest pain", " "])
    assert counting.batches == []
    assert len(cached.cache) == 0
    assert cached.encode([]).shape == (0, 384)


def test_threads_share_one_cache(counting: Counting, tmp_path: Path, medqa_sentences: list[str]) -> None:
    cached = CachedEmbedder(counting, tmp_path / "embed.sqlite")
    pool_texts = medqa_sentences[:40]
    jobs = [pool_texts[i : i + 15] for i in range(0, 40, 5)]  # overlapping slices
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(cached.encode, jobs))
    for job, got in zip(jobs, results, strict=True):
        np.testing.assert_allclose(got, counting.inner.encode(job), atol=1e-5)
    assert len(cached.cache) == len(set(pool_texts))
    assert cached.hits + cached.misses == sum(len(job) for job in jobs)
    counting.batches.clear()
    cached.encode(pool_texts)
    assert counting.batches == []


def test_remote_embedder_needs_no_request_when_everything_is_cached(
    embeddings_server: EmbeddingsServer, tmp_path: Path
) -> None:
    def remote() -> OpenAIEmbedder:
        return OpenAIEmbedder(
            model="served-embedder",
            base_url=embeddings_server.base_url,
            retry=RetryPolicy(max_retries=0),
            batch_size=2,
        )

    path = tmp_path / "embed.sqlite"
    texts = ["fever and cough", "night sweats", "weight loss"]
    first = CachedEmbedder(remote(), path).encode(texts)
    assert len(embeddings_server.requests) == 2
    reopened = CachedEmbedder(remote(), path)  # its dimension is not known yet: no probe is needed
    np.testing.assert_array_equal(reopened.encode(texts), first)
    assert len(embeddings_server.requests) == 2
    assert reopened.hits == 3
