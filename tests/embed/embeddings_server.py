"""A real HTTP server on 127.0.0.1 speaking the OpenAI embeddings protocol.

Vectors are computed from the text (letter counts plus a constant, scaled so they are not unit length), so
order, batching and normalisation are checkable. `failures` lists HTTP statuses to answer first, in order."""

from __future__ import annotations

import string

import numpy as np

from tests.openai_server import LoopbackServer

DIMENSION = 27


def letter_vector(text: str) -> np.ndarray:
    """The unnormalised vector the server returns for `text`."""
    counts = [text.lower().count(c) for c in string.ascii_lowercase]
    return 3.0 * np.array([*counts, 1.0], dtype=np.float64)


class EmbeddingsServer(LoopbackServer):
    def __init__(self, failures: list[int] | None = None) -> None:
        self.failures = list(failures or [])
        self.statuses: list[int] = []
        self.reverse_order = True  # answer items in reverse, with their indices, as servers may
        self.override: dict | None = None  # a fixed body to return instead of the computed one
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        status = self.failures.pop(0) if self.failures else 200
        self.statuses.append(status)
        reply = self._reply(body) if status == 200 else {"error": {"message": f"scripted {status}"}}
        return status, reply, 0.0

    def _reply(self, body: dict) -> dict:
        if self.override is not None:
            return self.override
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": letter_vector(text).tolist()}
            for i, text in enumerate(inputs)
        ]
        if self.reverse_order:
            data.reverse()
        return {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
        }
