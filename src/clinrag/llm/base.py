"""The `ChatModel` contract and the request / response types every backend speaks."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from clinrag.core.errors import InvalidInputError
from clinrag.core.usage import Usage


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """Everything that determines a completion; its hash is the cache and replay key."""

    messages: list[Message]
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    stop: list[str] = Field(default_factory=list)
    json_schema: dict[str, Any] | None = None
    seed: int | None = None

    @classmethod
    def of(cls, prompt: str, *, system: str | None = None, **params: Any) -> ChatRequest:
        messages = [Message(role="system", content=system)] if system else []
        messages.append(Message(role="user", content=prompt))
        return cls(messages=messages, **params)

    def content_key(self, op: str, options: Sequence[str] = ()) -> str:
        """A stable hash of what is asked, independent of which backend answers it. Keys are not sorted:
        the order of a JSON schema's properties is the order the model must produce them in."""
        payload = {"op": op, "request": self.model_dump(mode="json"), "options": list(options)}
        canonical = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Completion(BaseModel):
    text: str
    model: str
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cached: bool = False


class OptionScores(BaseModel):
    """Scores of candidate replies. `logprobs[i]` is the summed log-likelihood of option i (None when the
    backend could not score it: outside a server's top logprobs). `method` says how they were obtained:
    `loglik` in-process, `echo` or `top_logprobs` from a server's log-probabilities, `ranking` from the
    model's ranked list by the rank rule (`llm/server_scoring.py`)."""

    options: list[str]
    logprobs: list[float | None]
    token_counts: list[int]
    method: Literal["loglik", "echo", "top_logprobs", "ranking"]
    usage: Usage = Field(default_factory=Usage)
    cached: bool = False

    def normalized(self, mode: Literal["sum", "mean"] = "sum") -> list[float]:
        """Per-option scores. `sum` is the likelihood of the whole reply (the default); `mean` divides by the
        token count, which stops long options being penalised for length but favours them instead."""
        scores = []
        for logprob, count in zip(self.logprobs, self.token_counts, strict=True):
            if logprob is None:
                scores.append(-math.inf)
            else:
                scores.append(logprob / max(count, 1) if mode == "mean" else logprob)
        return scores

    def best(self, mode: Literal["sum", "mean"] = "sum") -> int:
        scores = self.normalized(mode)
        return max(range(len(scores)), key=scores.__getitem__)

    def probabilities(self, mode: Literal["sum", "mean"] = "sum") -> list[float]:
        """Softmax over the normalised scores: a distribution over the options."""
        scores = self.normalized(mode)
        top = max(scores)
        if top == -math.inf:
            return [1.0 / len(scores)] * len(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        return [w / total for w in weights]


class ChatModel(ABC):
    """Messages in, completion text out; plus scoring of given options by likelihood.

    Subclasses implement `_complete` and `_score_options` (and may override the async variants); the
    public methods validate input first, so every backend rejects bad input the same way.
    """

    backend: str
    model: str
    max_prompt_chars: int = 200_000

    @property
    def output_settings(self) -> str:
        """Backend settings outside the request that change what the model returns (part of the cache key)."""
        return ""

    @property
    def scoring_name(self) -> str:
        """How `score_options` scores (the `OptionScores.method` it returns), as runs and reports record it:
        runs scored in different modes give different kinds of numbers."""
        return "loglik"

    def complete(self, request: ChatRequest) -> Completion:
        self._validate(request)
        return self._complete(request)

    async def acomplete(self, request: ChatRequest) -> Completion:
        self._validate(request)
        return await self._acomplete(request)

    def score_options(self, request: ChatRequest, options: Sequence[str]) -> OptionScores:
        self._validate(request, options)
        return self._score_options(request, list(options))

    async def ascore_options(self, request: ChatRequest, options: Sequence[str]) -> OptionScores:
        self._validate(request, options)
        return await self._ascore_options(request, list(options))

    def chat(self, prompt: str, *, system: str | None = None, **params: Any) -> Completion:
        """One user prompt (and an optional system prompt) → completion."""
        return self.complete(ChatRequest.of(prompt, system=system, **params))

    @abstractmethod
    def _complete(self, request: ChatRequest) -> Completion: ...

    @abstractmethod
    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores: ...

    async def _acomplete(self, request: ChatRequest) -> Completion:
        return await asyncio.to_thread(self._complete, request)

    async def _ascore_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        return await asyncio.to_thread(self._score_options, request, options)

    def _validate(self, request: ChatRequest, options: Sequence[str] | None = None) -> None:
        if not request.messages:
            raise InvalidInputError("a chat request needs at least one message")
        if not any(m.content.strip() for m in request.messages if m.role == "user"):
            raise InvalidInputError("the prompt is empty")
        size = sum(len(m.content) for m in request.messages)
        if size > self.max_prompt_chars:
            raise InvalidInputError(
                f"the prompt has {size:,} characters, more than the limit of {self.max_prompt_chars:,} "
                "(CLINRAG_MAX_PROMPT_CHARS)"
            )
        if options is not None:
            if not options:
                raise InvalidInputError("option scoring needs at least one option")
            if any(not option.strip() for option in options):
                raise InvalidInputError("an option to score is empty")
            if len(set(options)) != len(options):
                raise InvalidInputError("options to score must be distinct")
