"""Build the configured chat model: backend, then the cache, then (optionally) a recorder around it."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.errors import ConfigError
from clinrag.core.remote import RetryPolicy
from clinrag.core.settings import Settings
from clinrag.llm.base import ChatModel
from clinrag.llm.cache import CachedChatModel, ResponseCache
from clinrag.llm.replay import RecordingChatModel, ReplayChatModel


def _backend(settings: Settings) -> ChatModel:
    if settings.llm_backend == "replay":
        if settings.llm_replay_path is None:
            raise ConfigError("the replay backend needs CLINRAG_LLM_REPLAY_PATH")
        return ReplayChatModel(settings.llm_replay_path, max_prompt_chars=settings.max_prompt_chars)
    if settings.llm_backend == "openai":
        if not settings.llm_model:
            raise ConfigError("the openai backend needs CLINRAG_LLM_MODEL (the model name the server serves)")
        from clinrag.llm.openai_compat import OpenAICompatible

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
    from clinrag.llm.embedded import EmbeddedLlama

    # For the embedded backend, CLINRAG_LLM_MODEL may name another local GGUF file.
    model_path = Path(settings.llm_model) if settings.llm_model else None
    return EmbeddedLlama(
        model_path,
        n_ctx=settings.embedded_n_ctx,
        n_threads=settings.embedded_n_threads,
        repeat_penalty=settings.embedded_repeat_penalty,
        seed=settings.embedded_seed,
        default_max_tokens=settings.llm_max_tokens,
        max_prompt_chars=settings.max_prompt_chars,
    )


def build_chat_model(settings: Settings) -> ChatModel:
    model = _backend(settings)
    if settings.cache_enabled and settings.llm_backend != "replay":
        model = CachedChatModel(model, ResponseCache(settings.llm_cache_path))
    if settings.llm_record_path is not None:
        model = RecordingChatModel(model, settings.llm_record_path)
    return model


def judge_settings(settings: Settings) -> Settings:
    """The settings of the judge model: the chat-model settings with every `judge_*` field that is set."""
    overrides = {
        f"llm_{name}": getattr(settings, f"judge_{name}")
        for name in ("backend", "model", "base_url", "api_key")
        if getattr(settings, f"judge_{name}") is not None
    }
    return settings.model_copy(update=overrides)


def build_judge_model(settings: Settings) -> ChatModel:
    return build_chat_model(judge_settings(settings))
