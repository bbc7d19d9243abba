"""Fixtures for the embedding layer: real MedQA text, the packaged ONNX model, a local embeddings server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinrag.embed.minilm_onnx import MiniLMOnnxEmbedder
from clinrag.knowledge.chunking import split_sentences
from tests.conftest import shared_data
from tests.embed.embeddings_server import EmbeddingsServer


@pytest.fixture(scope="session")
def medqa_questions(data_dir: Path) -> list[str]:
    """The questions of the MedQA (USMLE, 4 options) test split, read from the shared data at test time."""
    path = shared_data(data_dir / "medqa" / "us_4options_test.jsonl", "the MedQA test file")
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line)["question"] for line in lines if line.strip()]


@pytest.fixture(scope="session")
def medqa_sentences(medqa_questions: list[str]) -> list[str]:
    return [s for q in medqa_questions for s in split_sentences(q)]


@pytest.fixture(scope="session")
def minilm() -> MiniLMOnnxEmbedder:
    """The real packaged int8 model, loaded once per session (batch 8 so small inputs span batches)."""
    return MiniLMOnnxEmbedder(batch_size=8)


@pytest.fixture
def embeddings_server() -> Iterator[EmbeddingsServer]:
    server = EmbeddingsServer()
    yield server
    server.close()
