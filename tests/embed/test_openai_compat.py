"""The OpenAI-compatible embedder against a real HTTP server on loopback."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from clinrag.core.errors import ConfigError, InvalidInputError, ModelRequestError, ModelUnavailableError
from clinrag.core.remote import RetryPolicy
from clinrag.embed.openai_compat import OpenAIEmbedder
from tests.embed.embeddings_server import DIMENSION, EmbeddingsServer, letter_vector

FAST_RETRY = RetryPolicy(max_retries=2, backoff_s=0.01)


def expected(texts: list[str]) -> np.ndarray:
    vectors = np.array([letter_vector(t) for t in texts])
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def make(server: EmbeddingsServer, **kwargs) -> OpenAIEmbedder:
    params = {"model": "served-embedder", "base_url": server.base_url, "retry": FAST_RETRY, "batch_size": 4}
    return OpenAIEmbedder(**(params | kwargs))


def test_retries_a_500_then_returns_normalised_vectors(embeddings_server: EmbeddingsServer) -> None:
    embeddings_server.failures = [500]
    texts = ["chest pain", "shortness of breath"]
    vectors = make(embeddings_server).encode(texts)
    assert embeddings_server.statuses == [500, 200]
    assert embeddings_server.requests[0]["input"] == embeddings_server.requests[1]["input"] == texts
    assert vectors.dtype == np.float32
    assert vectors.shape == (2, DIMENSION)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


def test_request_carries_model_float_format_and_key(embeddings_server: EmbeddingsServer) -> None:
    make(embeddings_server, api_key="secret-key").encode(["fever"])
    request = embeddings_server.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["model"] == "served-embedder"
    assert request["encoding_format"] == "float"
    assert request["auth"] == "Bearer secret-key"


def test_batches_and_keeps_order(embeddings_server: EmbeddingsServer) -> None:
    texts = [f"symptom {word}" for word in "abcdefghij"]
    vectors = make(embeddings_server, batch_size=4).encode(texts)
    assert [len(r["input"]) for r in embeddings_server.requests] == [4, 4, 2]
    assert [t for r in embeddings_server.requests for t in r["input"]] == texts  # no reordering remotely
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)


def test_dimension_is_learnt_from_the_first_reply(embeddings_server: EmbeddingsServer) -> None:
    embedder = make(embeddings_server)
    embedder.encode(["cough"])
    assert embedder.dimension == DIMENSION
    assert len(embeddings_server.requests) == 1  # no probe: the dimension came with the first reply


def test_dimension_asked_first_sends_one_probe(embeddings_server: EmbeddingsServer) -> None:
    embedder = make(embeddings_server)
    assert embedder.dimension == DIMENSION
    assert embedder.encode([]).shape == (0, DIMENSION)
    assert len(embeddings_server.requests) == 1


def test_given_dimension_is_checked(embeddings_server: EmbeddingsServer) -> None:
    embedder = make(embeddings_server, dimension=1536)
    assert embedder.encode([]).shape == (0, 1536)
    assert embeddings_server.requests == []
    with pytest.raises(ModelUnavailableError, match="27-dimensional"):
        embedder.encode(["cough"])


def test_unreachable_server_is_model_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more: every attempt is refused.
    embedder = OpenAIEmbedder(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", retry=RetryPolicy(max_retries=1, backoff_s=0.01)
    )
    with pytest.raises(ModelUnavailableError, match="cannot reach"):
        embedder.encode(["chest pain"])


def test_persistent_5xx_gives_up_after_the_retries(embeddings_server: EmbeddingsServer) -> None:
    embeddings_server.failures = [503, 503, 503, 503]
    with pytest.raises(ModelUnavailableError, match="HTTP 503"):
        make(embeddings_server).encode(["chest pain"])
    assert embeddings_server.statuses == [503, 503, 503]  # 1 try + 2 retries


def test_client_error_is_not_retried(embeddings_server: EmbeddingsServer) -> None:
    embeddings_server.failures = [400]
    with pytest.raises(ModelRequestError, match="HTTP 400"):
        make(embeddings_server).encode(["chest pain"])
    assert embeddings_server.statuses == [400]


def one_item(index: int, embedding: object) -> dict:
    return {
        "object": "list",
        "model": "m",
        "data": [{"object": "embedding", "index": index, "embedding": embedding}],
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"object": "list", "data": [], "model": "m"}, "returned 0 embeddings for 1"),
        (one_item(0, [0.0, 0.0]), "zero or non-finite"),
        (one_item(5, [1.0]), "inconsistent indices"),
        (one_item(0, "AAAA"), "malformed"),  # base64 although float was asked for
        (one_item(0, [[1.0], [2.0]]), "malformed embeddings of shape"),
    ],
)
def test_malformed_replies_are_typed_errors(
    embeddings_server: EmbeddingsServer, body: dict, message: str
) -> None:
    embeddings_server.override = body
    with pytest.raises(ModelUnavailableError, match=message):
        make(embeddings_server).encode(["chest pain"])


def test_validation_happens_before_any_request(embeddings_server: EmbeddingsServer) -> None:
    with pytest.raises(InvalidInputError, match="index 0"):
        make(embeddings_server).encode(["", "fever"])
    assert embeddings_server.requests == []


def test_invalid_construction(embeddings_server: EmbeddingsServer) -> None:
    with pytest.raises(ConfigError):
        make(embeddings_server, model="")
    with pytest.raises(ConfigError):
        make(embeddings_server, dimension=0)
    with pytest.raises(ConfigError):
        make(embeddings_server, batch_size=0)
