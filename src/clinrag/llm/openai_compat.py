"""Any OpenAI-compatible chat server: vLLM, llama.cpp server, Ollama, DeepSeek, OpenAI.

What the server supports (the form that makes it enforce a JSON schema, log-probabilities, echo) is probed
once and kept under the home (`server_probe`); settings may fix either choice instead.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, TypeVar

import openai

from clinrag.core.errors import (
    ConfigError,
    ModelReplyError,
    ModelRequestError,
    ModelUnavailableError,
    StructuredOutputError,
)
from clinrag.core.remote import RetryPolicy, acall_with_retries, call_with_retries, make_clients
from clinrag.core.settings import Settings, redact_url
from clinrag.core.usage import Usage
from clinrag.llm import server_scoring
from clinrag.llm.backends import CHAT_BACKENDS
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores
from clinrag.llm.chat_template import ChatTemplate, load_chat_template
from clinrag.llm.server_probe import ServerCapabilities, ServerProbe, StructuredForm, structured_params

StructuredSetting = Literal["auto", "json_schema", "json_object_schema", "guided_json", "json_object", "none"]
ScoringSetting = Literal["auto", "echo", "top_logprobs", "ranking"]
ScoringMode = Literal["echo", "top_logprobs", "ranking"]
T = TypeVar("T")

# Sampled rankings (`ranking_samples` > 1) are drawn at least this warm, else every sample is the same list.
RANKING_TEMPERATURE = 0.7


class OpenAICompatible(ChatModel):
    """A chat model served over HTTP.

    `structured_output` is how JSON schemas are sent and `scoring` how options are scored (`auto`: what the
    probe found). `echo` scoring renders prompts with `chat_template` (the served model's GGUF file or
    tokenizer_config.json) and is used by `auto` only when echoing costs at most `echo_max_ms_per_token` per
    prompt token. `ranking_samples` rankings are averaged by the rank rule.
    """

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
        structured_output: StructuredSetting = "auto",
        scoring: ScoringSetting = "auto",
        chat_template: Path | None = None,
        echo_max_ms_per_token: float = 5.0,
        ranking_samples: int = 1,
        probe_cache: Path | None = None,
        default_max_tokens: int = 512,
        max_prompt_chars: int = 200_000,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self._client, _ = make_clients(base_url, api_key, timeout_s)
        self._new_clients = lambda: make_clients(base_url, api_key, timeout_s)
        self.retry = retry or RetryPolicy()
        self.structured_setting = structured_output
        self.scoring_setting = scoring
        self.chat_template_path = chat_template
        self.echo_max_ms_per_token = echo_max_ms_per_token
        self.ranking_samples = ranking_samples
        self.default_max_tokens = default_max_tokens
        self.max_prompt_chars = max_prompt_chars
        self._concurrency = concurrency
        self._sync_slots = threading.BoundedSemaphore(concurrency)
        self._per_loop: dict[asyncio.AbstractEventLoop, tuple[asyncio.Semaphore, openai.AsyncOpenAI]] = {}
        server = redact_url(base_url) if base_url else "api.openai.com"
        self._where = f"the model server at {server}"
        self._probe = ServerProbe(self._client, model, server, probe_cache)
        self._probe_lock = threading.Lock()
        self._template: ChatTemplate | None = None

    # --- what the server supports, and the modes chosen from it

    @cached_property
    def capabilities(self) -> ServerCapabilities:
        with self._probe_lock:
            return self._probe.capabilities()

    @cached_property
    def structured_output(self) -> StructuredForm:
        if self.structured_setting != "auto":
            return self.structured_setting
        return self.capabilities.structured

    @cached_property
    def scoring(self) -> ScoringMode:
        """The scoring mode for options longer than two characters; answer letters are scored by echo or top
        logprobs where the server allows, else by ranking too (`_mode_for`)."""
        if self.scoring_setting == "echo":
            self._chat_template()  # fails now, naming the setting, rather than at the first question
            return "echo"
        if self.scoring_setting != "auto":
            return "ranking" if self.scoring_setting == "top_logprobs" else self.scoring_setting
        capabilities = self.capabilities
        echo_fast = (capabilities.echo_ms_per_token or 0.0) <= self.echo_max_ms_per_token
        if capabilities.echo and echo_fast and self.chat_template_path is not None:
            return "echo"
        return "ranking"

    @property
    def scoring_name(self) -> str:
        mode = self.scoring
        letters = self._letters_mode()
        return mode if letters == mode else f"{mode} (answer letters: {letters})"

    def _letters_mode(self) -> ScoringMode:
        if self.scoring == "echo":
            return "echo"
        if self.scoring_setting == "top_logprobs":
            return "top_logprobs"
        if self.scoring_setting == "ranking":
            return "ranking"
        return "top_logprobs" if self.capabilities.chat_logprobs else "ranking"

    def _mode_for(self, options: list[str]) -> ScoringMode:
        return self._letters_mode() if server_scoring.single_characters(options) else self.scoring

    def _chat_template(self) -> ChatTemplate:
        if self._template is None:
            if self.chat_template_path is None:
                raise ConfigError(
                    "echo scoring renders the chat prompt itself: set CLINRAG_LLM_CHAT_TEMPLATE to the "
                    "served model's GGUF file or tokenizer_config.json (or CLINRAG_LLM_SCORING=ranking)"
                )
            self._template = load_chat_template(self.chat_template_path)
        return self._template

    @property
    def output_settings(self) -> str:
        # The same model name on another server may be another build or quantisation; a structured-output
        # form or scoring mode gives other outputs.
        return (
            f"base_url={self.base_url};structured_output={self.structured_output};"
            f"scoring={self.scoring_name};ranking_samples={self.ranking_samples}"
        )

    # --- calls

    def _loop_parts(self) -> tuple[asyncio.Semaphore, openai.AsyncOpenAI]:
        """The running event loop's semaphore and async client: both belong to one loop (an async client's
        pooled connections fail on another), and callers may run several loops over the model's lifetime."""
        loop = asyncio.get_running_loop()
        if loop not in self._per_loop:
            open_loops = {known: parts for known, parts in self._per_loop.items() if not known.is_closed()}
            self._per_loop = open_loops
            self._per_loop[loop] = (asyncio.Semaphore(self._concurrency), self._new_clients()[1])
        return self._per_loop[loop]

    @property
    def _aclient(self) -> openai.AsyncOpenAI:
        return self._loop_parts()[1]

    def _call(self, fn: Callable[[], T], structured: bool = False) -> T:
        with self._sync_slots:
            try:
                return call_with_retries(fn, self.retry, self._where)
            except (ModelRequestError, ModelUnavailableError) as exc:
                raise self._refused_form(exc) if structured and _refuses_form(exc) else exc from None

    async def _acall(self, fn: Callable[[], Awaitable[T]], structured: bool = False) -> T:
        async with self._loop_parts()[0]:
            try:
                return await acall_with_retries(fn, self.retry, self._where)
            except (ModelRequestError, ModelUnavailableError) as exc:
                raise self._refused_form(exc) if structured and _refuses_form(exc) else exc from None

    def _refused_form(self, exc: Exception) -> Exception:
        """A request carrying a schema that the server refuses: the form is wrong for this server."""
        return ConfigError(
            f"{exc} — the server refuses JSON schemas sent as {self.structured_output!r} "
            "(CLINRAG_LLM_STRUCTURED_OUTPUT; `auto` probes the server for the form it enforces)"
        )

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
        if request.json_schema is not None:
            params.update(structured_params(self.structured_output, request.json_schema))
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
        params = self._params(request)
        response = self._call(
            lambda: self._client.chat.completions.create(**params), structured=request.json_schema is not None
        )
        return self._completion(response, started)

    async def _acomplete(self, request: ChatRequest) -> Completion:
        started = time.perf_counter()
        params = self._params(request)
        response = await self._acall(
            lambda: self._aclient.chat.completions.create(**params),
            structured=request.json_schema is not None,
        )
        return self._completion(response, started)

    # Option scoring: by echo, top logprobs or ranking (llm/server_scoring.py), as the server supports.

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        started = time.perf_counter()
        mode = self._mode_for(options)
        if mode == "echo":
            return self._echo_scores(request, options, started)
        spent = Usage()
        if mode == "top_logprobs":
            params = self._top_logprobs_params(request)
            response = self._call(lambda: self._client.chat.completions.create(**params))
            scores = self._letter_scores(response, options, started)
            if scores is not None:
                return scores
            spent = self._completion(response, started).usage  # the ignored request was paid for too
        completions = [self._complete(each) for each in self._ranking_requests(request, options)]
        return self._ranking_result(options, completions, spent)

    async def _ascore_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        started = time.perf_counter()
        mode = await asyncio.to_thread(self._mode_for, options)
        if mode == "echo":
            return await self._aecho_scores(request, options, started)
        spent = Usage()
        if mode == "top_logprobs":
            params = self._top_logprobs_params(request)
            response = await self._acall(lambda: self._aclient.chat.completions.create(**params))
            scores = self._letter_scores(response, options, started)
            if scores is not None:
                return scores
            spent = self._completion(response, started).usage
        requests = self._ranking_requests(request, options)
        completions = await asyncio.gather(*(self._acomplete(each) for each in requests))
        return self._ranking_result(options, list(completions), spent)

    def _top_logprobs_params(self, request: ChatRequest) -> dict[str, Any]:
        return server_scoring.top_logprobs_params(
            self._params(request.model_copy(update={"json_schema": None}))
        )

    def _letter_scores(self, response: Any, options: list[str], started: float) -> OptionScores | None:
        found = server_scoring.letters_from_top_logprobs(self._first_choice(response), options, self._where)
        if found is None:
            return None  # the server sent no logprobs, or none of the options: rank them instead
        return OptionScores(
            options=options,
            logprobs=found,
            token_counts=[1] * len(options),
            method="top_logprobs",
            usage=self._completion(response, started).usage,
        )

    def _echo_texts(self, request: ChatRequest, options: list[str]) -> tuple[str, list[str]]:
        template = self._chat_template()
        prompt = template.prompt(request)
        return prompt, [prompt + option + template.eos_text for option in options]

    def _echo_result(self, options: list[str], base: Any, replies: list[Any], started: float) -> OptionScores:
        before = server_scoring.prompt_tokens(base, self._where)
        counts = [server_scoring.prompt_tokens(reply, self._where) - before for reply in replies]
        logprobs = [
            server_scoring.continuation_logprob(reply, count, self._where)
            for reply, count in zip(replies, counts, strict=True)
        ]
        evaluated = before + sum(counts)
        return OptionScores(
            options=options,
            logprobs=logprobs,
            token_counts=counts,
            method="echo",
            usage=Usage(
                calls=1 + len(replies), prompt_tokens=evaluated, wall_time_s=time.perf_counter() - started
            ),
        )

    def _echo_scores(self, request: ChatRequest, options: list[str], started: float) -> OptionScores:
        prompt, texts = self._echo_texts(request, options)
        base = self._call(
            lambda: self._client.completions.create(**server_scoring.plain_params(self.model, prompt))
        )
        replies = [
            self._call(
                lambda text=text: self._client.completions.create(
                    **server_scoring.echo_params(self.model, text)
                )
            )
            for text in texts
        ]
        return self._echo_result(options, base, replies, started)

    async def _aecho_scores(self, request: ChatRequest, options: list[str], started: float) -> OptionScores:
        prompt, texts = self._echo_texts(request, options)
        base = await self._acall(
            lambda: self._aclient.completions.create(**server_scoring.plain_params(self.model, prompt))
        )
        replies = await asyncio.gather(
            *(
                self._acall(
                    lambda text=text: self._aclient.completions.create(
                        **server_scoring.echo_params(self.model, text)
                    )
                )
                for text in texts
            )
        )
        return self._echo_result(options, base, list(replies), started)

    def _ranking_requests(self, request: ChatRequest, options: list[str]) -> list[ChatRequest]:
        """One request per sample: one at the request's own temperature, or several sampled with their own
        seeds."""
        ranked = server_scoring.ranking_request(request, server_scoring.shown_options(options))
        if self.ranking_samples == 1:
            return [ranked]
        seed = ranked.seed or 0
        return [
            ranked.model_copy(
                update={"temperature": max(ranked.temperature, RANKING_TEMPERATURE), "seed": seed + i}
            )
            for i in range(self.ranking_samples)
        ]

    def _ranking_result(
        self, options: list[str], completions: list[Completion], spent: Usage
    ) -> OptionScores:
        """The rank rule over the completions' rankings; `spent` is the usage of an earlier attempt (a
        logprobs request the server ignored)."""
        shown = server_scoring.shown_options(options)
        rankings = []
        for completion in completions:
            ranked = server_scoring.parsed_ranking(completion.text, shown)
            if not ranked:
                raise StructuredOutputError("the model's ranking names none of the options", completion.text)
            rankings.append(ranked)
        return OptionScores(
            options=options,
            logprobs=server_scoring.rank_rule(rankings, len(options)),
            token_counts=[1] * len(options),
            method="ranking",
            usage=sum((completion.usage for completion in completions), spent),
        )


def _refuses_form(exc: Exception) -> bool:
    """A 4xx, or a server error that names the response format (llama-cpp-python answers a form it does not
    know with HTTP 500 and its validation error)."""
    return isinstance(exc, ModelRequestError) or "response_format" in str(exc)


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
        scoring=settings.llm_scoring,
        chat_template=settings.llm_chat_template,
        echo_max_ms_per_token=settings.llm_echo_max_ms_per_token,
        ranking_samples=settings.llm_ranking_samples,
        probe_cache=settings.model_servers_path,
        default_max_tokens=settings.llm_max_tokens,
        max_prompt_chars=settings.max_prompt_chars,
    )
