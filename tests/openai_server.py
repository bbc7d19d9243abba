"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol from a script of replies.

It is the stand-in for faults and for controlled replies only: timeouts, 429s and 5xx, malformed replies, and
replies a test must script exactly (a given ranking, a given plan). The client side (SDK, retries, error
mapping, concurrency limit) runs for real against it over loopback. The production path against a real server
(llama.cpp's, serving the packaged model) is tested in tests/llm/test_real_server.py (fixture `llama_server`
in tests/conftest.py).

A scripted server cannot answer the capability probe (`clinrag.llm.server_probe`) meaningfully, and the
probe's requests would consume the script, so models on it fix both choices: `scripted_model`, or
`SCRIPTED_SETTINGS` (environment form) / `SCRIPTED_SETTINGS_KWARGS` (`Settings` form) where the model is built
from settings."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from clinrag.llm.openai_compat import OpenAICompatible

# The structured-output form and scoring mode fixed for models on a scripted server (no probe).
SCRIPTED_SETTINGS = {"CLINRAG_LLM_STRUCTURED_OUTPUT": "json_schema", "CLINRAG_LLM_SCORING": "ranking"}
SCRIPTED_SETTINGS_KWARGS = {"llm_structured_output": "json_schema", "llm_scoring": "ranking"}


def scripted_model(server: LoopbackServer, **overrides: Any) -> OpenAICompatible:
    """A model on `server` with the structured-output form and scoring mode fixed, so that no probe request
    consumes the script; `overrides` replace any argument (model name, key, modes) or add others."""
    params: dict[str, Any] = {
        "model": "m",
        "base_url": server.base_url,
        "api_key": "k",
        "structured_output": "json_schema",
        "scoring": "ranking",
    }
    return OpenAICompatible(**{**params, **overrides})


def ranking_body(*names: str) -> dict:
    """A chat reply ranking `names`, best first, as option scoring in `ranking` mode asks."""
    return chat_body(json.dumps({"ranking": list(names)}))


def chat_body(
    text: str, *, logprobs: list[tuple[str, float]] | None = None, model: str = "served-model"
) -> dict:
    choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs is not None:
        top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in logprobs]
        choice["logprobs"] = {
            "content": [
                {"token": logprobs[0][0], "logprob": logprobs[0][1], "bytes": None, "top_logprobs": top}
            ]
        }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (ephemeral port). Every POST is recorded in `requests` and answered
    by `respond(body) -> (status, reply, delay_s)`, which subclasses define."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(
                        {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                    )
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    status, reply, delay = server.respond(body)
                try:
                    time.sleep(delay)
                    payload = json.dumps(reply).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        raise NotImplementedError

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class ScriptedServer(LoopbackServer):
    """Chat replies from a script: (status, body, delay_s) tuples served in order; the last one repeats."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict, float]] = []
        super().__init__()

    def respond(self, body: dict) -> tuple[int, dict, float]:
        return self.replies[min(len(self.requests) - 1, len(self.replies) - 1)]
