"""Build the configured chat model: the registered backend, then the cache, then (optionally) a recorder.

The backend's name is checked here, where it is used: an unknown one is a `ConfigError` naming the setting
(`llm_backend`, or `judge_backend` for the judge) and the known backends."""

from __future__ import annotations

from clinrag.core.settings import Settings
from clinrag.llm.backends import CHAT_BACKENDS
from clinrag.llm.base import ChatModel
from clinrag.llm.cache import CachedChatModel, ResponseCache
from clinrag.llm.replay import RecordingChatModel


def build_chat_model(settings: Settings, *, setting: str = "llm_backend") -> ChatModel:
    """The model `settings.llm_backend` names; `setting` is the setting an unknown name is reported as."""
    model = CHAT_BACKENDS.configured(setting, settings.llm_backend)(settings)
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
    setting = "llm_backend" if settings.judge_backend is None else "judge_backend"
    return build_chat_model(judge_settings(settings), setting=setting)
