"""What an OpenAI-compatible server can do, found by asking it once and kept under the home.

Servers that all call themselves OpenAI-compatible differ in what matters here: how a JSON schema must be
sent for the server to enforce it, whether chat replies carry token log-probabilities, and whether the plain
completions endpoint echoes the prompt's log-probabilities, and how fast. The probe tries each with a tiny
request and decides by the replies, never by the server's name.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Literal

import openai
from pydantic import BaseModel, ValidationError

from clinrag.core.remote import RetryPolicy, call_with_retries

# How a JSON schema reaches a server: OpenAI's `json_schema` response format (also vLLM, Ollama),
# llama.cpp's `json_object` with a `schema` field, vLLM's `guided_json` parameter, or plain `json_object`
# (valid JSON, schema in the prompt only), or nothing.
StructuredForm = Literal["json_schema", "json_object_schema", "guided_json", "json_object", "none"]
ENFORCING_FORMS: tuple[StructuredForm, ...] = ("json_schema", "json_object_schema", "guided_json")

# A value no model writes unless the schema forces it: an enforcing form is one whose reply is exactly this.
_PROBE_VALUE = "kumquat-7"
_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": [_PROBE_VALUE]}},
    "required": ["answer"],
    "additionalProperties": False,
}
# About 100 tokens of ordinary text, to time the echo of a prompt against its plain evaluation.
_PROBE_TEXT = " ".join(["The patient reports a dry cough, mild fever and tiredness for three days."] * 7)
# Statuses that say the server is busy or down, not that it refuses the request's form.
_TRANSIENT = {408, 429, 502, 503, 504}


class ServerCapabilities(BaseModel):
    structured: StructuredForm
    chat_logprobs: bool  # chat replies carry top log-probabilities of the generated tokens
    echo: bool  # /v1/completions echoes log-probabilities of the prompt's tokens
    echo_ms_per_token: float | None = None  # the extra time echoing costs, per prompt token
    probed_at: float = 0.0


def structured_params(form: StructuredForm, schema: dict[str, Any]) -> dict[str, Any]:
    """The request fields that carry `schema` in `form` (extra body fields for vLLM's)."""
    if form == "json_schema":
        return {
            "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
        }
    if form == "json_object_schema":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if form == "guided_json":
        return {"extra_body": {"guided_json": schema}}
    if form == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


class ServerProbe:
    """Probes one server for one model with the caller's SDK client, keeping results in `cache_path` (a JSON
    object keyed by server and model)."""

    def __init__(self, client: openai.OpenAI, model: str, server: str, cache_path: Path | None) -> None:
        self.client = client
        self.model = model
        self.key = hashlib.sha256(f"{server}\x00{model}".encode()).hexdigest()[:16]
        self.server = server
        self.cache_path = cache_path

    def capabilities(self) -> ServerCapabilities:
        cached = self._cached()
        if cached is not None:
            return cached
        found = self.probe()
        self._store(found)
        return found

    def probe(self) -> ServerCapabilities:
        structured = next((form for form in ENFORCING_FORMS if self._enforces(form)), None)
        if structured is None:
            structured = "json_object" if self._accepts_json_object() else "none"
        echo_cost = self._echo_cost()
        return ServerCapabilities(
            structured=structured,
            chat_logprobs=self._chat_logprobs(),
            echo=echo_cost is not None,
            echo_ms_per_token=echo_cost,
            probed_at=time.time(),
        )

    # --- the probes: a refusal (HTTP 4xx/5xx) or a reply without the feature means "not supported"; a server
    # that cannot be reached raises, so nothing is cached from an outage.

    def _chat(self, **params: Any) -> Any:
        messages = [{"role": "user", "content": "Name one fruit."}]
        base = {"model": self.model, "messages": messages, "temperature": 0.0, "max_tokens": 16}
        return self._call(lambda: self.client.chat.completions.create(**{**base, **params}))

    def _call(self, fn: Any) -> Any:
        try:
            return call_with_retries(fn, RetryPolicy(max_retries=2), f"the model server at {self.server}")
        except Exception as exc:
            refused = exc.__cause__
            if isinstance(refused, openai.APIStatusError) and refused.status_code not in _TRANSIENT:
                return None
            raise

    def _enforces(self, form: StructuredForm) -> bool:
        reply = self._chat(**structured_params(form, _PROBE_SCHEMA), max_tokens=24)
        try:
            return json.loads(reply.choices[0].message.content) == {"answer": _PROBE_VALUE}
        except (AttributeError, IndexError, TypeError, ValueError):
            return False

    def _accepts_json_object(self) -> bool:
        reply = self._chat(**structured_params("json_object", _PROBE_SCHEMA))
        return reply is not None

    def _chat_logprobs(self) -> bool:
        reply = self._chat(max_tokens=1, logprobs=True, top_logprobs=5)
        try:
            return bool(reply.choices[0].logprobs.content[0].top_logprobs)
        except (AttributeError, IndexError, TypeError):
            return False

    def _echo_cost(self) -> float | None:
        """Milliseconds per prompt token that echoing adds to a prompt's evaluation, or None when the server
        does not echo log-probabilities."""

        def complete(**params: Any) -> tuple[Any, float]:
            started = time.perf_counter()
            base = {"model": self.model, "prompt": _PROBE_TEXT, "max_tokens": 1, "temperature": 0.0}
            reply = self._call(lambda: self.client.completions.create(**{**base, **params}))
            return reply, time.perf_counter() - started

        plain, plain_s = complete()
        if plain is None:
            return None
        echoed, echo_s = complete(echo=True, logprobs=0)
        try:
            logprobs = echoed.choices[0].logprobs.token_logprobs
            prompt_tokens = int(echoed.usage.prompt_tokens)
        except (AttributeError, IndexError, TypeError, ValueError):
            return None
        if not logprobs or sum(value is not None for value in logprobs) < prompt_tokens // 2:
            return None  # the server ignored echo or logprobs
        return max(0.0, echo_s - plain_s) * 1000 / max(prompt_tokens, 1)

    # --- the cache

    def _entries(self) -> dict[str, Any]:
        if self.cache_path is None or not self.cache_path.is_file():
            return {}
        try:
            entries = json.loads(self.cache_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return {}  # a damaged cache is probed again and rewritten
        return entries if isinstance(entries, dict) else {}

    def _cached(self) -> ServerCapabilities | None:
        entry = self._entries().get(self.key)
        try:
            return ServerCapabilities.model_validate(entry["capabilities"]) if entry else None
        except (KeyError, TypeError, ValidationError):
            return None

    def _store(self, found: ServerCapabilities) -> None:
        if self.cache_path is None:
            return
        entries = self._entries()
        entries[self.key] = {"server": self.server, "model": self.model, "capabilities": found.model_dump()}
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.cache_path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(json.dumps(entries, indent=1), encoding="utf-8")
        staging.chmod(0o600)  # like every file in the home: owner-only
        os.replace(staging, self.cache_path)
