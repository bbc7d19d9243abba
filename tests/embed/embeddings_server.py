"""A real HTTP server on 127.0.0.1 speaking the OpenAI embeddings protocol.

Vectors are computed from the text (letter counts plus a constant, scaled so they are not unit length), so
order, batching and normalisation are checkable. `failures` lists HTTP statuses to answer first, in order."""

from __future__ import annotations

import json
import string
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIMENSION = 27


def letter_vector(text: str) -> np.ndarray:
    """The unnormalised vector the server returns for `text`."""
    counts = [text.lower().count(c) for c in string.ascii_lowercase]
    return 3.0 * np.array([*counts, 1.0], dtype=np.float64)


class EmbeddingsServer:
    def __init__(self, failures: list[int] | None = None) -> None:
        self.failures = list(failures or [])
        self.requests: list[dict] = []
        self.statuses: list[int] = []
        self.reverse_order = True  # answer items in reverse, with their indices, as servers may
        self.override: dict | None = None  # a fixed body to return instead of the computed one
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(
                        {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                    )
                    status = server.failures.pop(0) if server.failures else 200
                    server.statuses.append(status)
                reply = server._reply(body) if status == 200 else {"error": {"message": f"scripted {status}"}}
                payload = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

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

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
