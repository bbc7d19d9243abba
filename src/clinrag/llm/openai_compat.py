"""Any OpenAI-compatible chat server: vLLM, llama.cpp server, Ollama, DeepSeek, OpenAI."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Literal

from clinrag.core.backends import CHAT_BACKENDS
from clinrag.core.errors import ConfigError, ModelReplyError
from clinrag.core.remote import RetryPolicy, acall_with_retries, call_with_retries, make_clients
from clinrag.core.settings import Settings, redact_url
from clinrag.core.usage import Usage
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores
from clinrag.llm.structured import choice_request, scores_from_choice

StructuredMode = Literal["json_schema", "json_object", "none"]

# Servers return at most this many alternatives per position (OpenAI's limit is 20).
TOP_LOGPROBS = 20


class OpenAICompatible(ChatModel):
    backend = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 4,
        structured_output: StructuredMode = "json_schema",
        logprobs: bool = True,
        default_max_tokens: int = 512,
        max_prompt_chars: int = 200_000,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self._client, self._aclient = make_clients(base_url, api_key, timeout_s)
        self.retry = retry or RetryPolicy()
        self.structured_output = structured_output
        self.logprobs = logprobs
        self.default_max_tokens = default_max_tokens
        self.max_prompt_chars = max_prompt_chars
        self._concurrency = concurrency
        self._sync_slots = threading.BoundedSemaphore(concurrency)
        self._async_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._where = f"the model server at {redact_url(base_url) if base_url else 'api.openai.com'}"

    @property
    def output_settings(self) -> str:
        # The same model name on another server may be another build or quantisation.
        return f"base_url={self.base_url};structured_output={self.structured_output}"

    def _slots(self) -> asyncio.Semaphore:
        # A semaphore belongs to one event loop; callers may run several loops over the model's lifetime.
        loop = asyncio.get_running_loop()
        return self._async_slots.setdefault(loop, asyncio.Semaphore(self._concurrency))

    def _params(self, request: ChatRequest, **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens or self.default_max_tokens,
        }
        if request.stop:
            params["stop"] = request.stop
        if request.seed is not None:
            params["seed"] = request.seed
        if request.json_schema is not None and self.structured_output == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.json_schema},
            }
        elif request.json_schema is not None and self.structured_output == "json_object":
            params["response_format"] = {"type": "json_object"}
        params.update(extra)
        return params

    def _first_choice(self, response: Any) -> Any:
        """The reply's first choice, or `ModelReplyError` for a reply that is not a chat completion (the SDK
        does not validate a 200 body: `{}`, HTML or a proxy's page arrive as they are)."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise ModelReplyError(f"{self._where} answered without any choices: {_preview(response)}")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if message is None or not (content is None or isinstance(content, str)):
            raise ModelReplyError(
                f"{self._where} answered a choice without a text message: {_preview(response)}"
            )
        return choices[0]

    def _completion(self, response: Any, started: float) -> Completion:
        choice = self._first_choice(response)
        usage = getattr(response, "usage", None)
        model = getattr(response, "model", None)
        try:
            prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        except (TypeError, ValueError) as exc:
            raise ModelReplyError(f"{self._where} answered malformed token usage: {exc}") from exc
        return Completion(
            text=(choice.message.content or "").strip(),
            model=model if isinstance(model, str) and model else self.model,
            finish_reason=getattr(choice, "finish_reason", None),
            usage=Usage(
                calls=1,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                wall_time_s=time.perf_counter() - started,
            ),
        )

    def _complete(self, request: ChatRequest) -> Completion:
        started = time.perf_counter()
        with self._sync_slots:
            response = call_with_retries(
                lambda: self._client.chat.completions.create(**self._params(request)), self.retry, self._where
            )
        return self._completion(response, started)

    async def _acomplete(self, request: ChatRequest) -> Completion:
        started = time.perf_counter()
        async with self._slots():
            response = await acall_with_retries(
                lambda: self._aclient.chat.completions.create(**self._params(request)),
                self.retry,
                self._where,
            )
        return self._completion(response, started)

    # Option scoring. Chat servers only report logprobs of what they generate, so likelihoods can be read
    # for options that are one short token each (answer letters) from the first generated position; for
    # anything else the option is chosen by schema-constrained generation.

    def _scorable_by_logprobs(self, options: list[str]) -> bool:
        return self.logprobs and all(len(option) <= 2 for option in options)

    def _logprob_params(self, request: ChatRequest) -> dict[str, Any]:
        single = request.model_copy(update={"max_tokens": 1, "json_schema": None})
        return self._params(single, logprobs=True, top_logprobs=TOP_LOGPROBS)

    def _scores_from_logprobs(self, response: Any, options: list[str], started: float) -> OptionScores | None:
        logprobs = getattr(self._first_choice(response), "logprobs", None)
        content = getattr(logprobs, "content", None)
        if not content:
            return None  # the server ignored the logprobs request
        found: dict[str, float] = {}
        try:
            for alternative in content[0].top_logprobs or []:
                token = alternative.token.strip()
                if token in options and token not in found:
                    found[token] = float(alternative.logprob)
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise ModelReplyError(f"{self._where} answered malformed logprobs: {exc}") from exc
        if not found:
            return None
        return OptionScores(
            options=options,
            logprobs=[found.get(option) for option in options],
            token_counts=[1] * len(options),
            method="top_logprobs",
            usage=self._completion(response, started).usage,
        )

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        if self._scorable_by_logprobs(options):
            started = time.perf_counter()
            with self._sync_slots:
                response = call_with_retries(
                    lambda: self._client.chat.completions.create(**self._logprob_params(request)),
                    self.retry,
                    self._where,
                )
            scores = self._scores_from_logprobs(response, options, started)
            if scores is not None:
                return scores
            spent = self._completion(response, started).usage
        else:
            spent = None
        return scores_from_choice(self._complete(choice_request(request, options)), options, spent)

    async def _ascore_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        if self._scorable_by_logprobs(options):
            started = time.perf_counter()
            async with self._slots():
                response = await acall_with_retries(
                    lambda: self._aclient.chat.completions.create(**self._logprob_params(request)),
                    self.retry,
                    self._where,
                )
            scores = self._scores_from_logprobs(response, options, started)
            if scores is not None:
                return scores
            spent = self._completion(response, started).usage
        else:
            spent = None
        return scores_from_choice(await self._acomplete(choice_request(request, options)), options, spent)


def _preview(response: Any, limit: int = 200) -> str:
    text = response if isinstance(response, str) else repr(response)
    return text if len(text) <= limit else text[:limit] + "…"


@CHAT_BACKENDS.register("openai")
def from_settings(settings: Settings) -> OpenAICompatible:
    if not settings.llm_model:
        raise ConfigError("the openai backend needs CLINRAG_LLM_MODEL (the model name the server serves)")
    return OpenAICompatible(
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        timeout_s=settings.llm_timeout_s,
        retry=RetryPolicy(max_retries=settings.llm_max_retries, backoff_s=settings.llm_backoff_s),
        concurrency=settings.llm_concurrency,
        structured_output=settings.llm_structured_output,
        logprobs=settings.llm_logprobs,
        default_max_tokens=settings.llm_max_tokens,
        max_prompt_chars=settings.max_prompt_chars,
    )
