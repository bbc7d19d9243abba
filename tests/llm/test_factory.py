"""build_chat_model / build_judge_model: a backend's name is checked where the model is built, and an unknown
one names the setting it came from."""

from __future__ import annotations

import pytest

from clinrag.core.errors import ConfigError
from clinrag.core.settings import Settings
from clinrag.llm.factory import build_chat_model, build_judge_model
from clinrag.llm.replay import ReplayChatModel


def test_an_unknown_chat_backend_names_the_setting_and_the_known_backends() -> None:
    settings = Settings(llm_backend="gpt")  # loading the settings does not check the name
    with pytest.raises(ConfigError, match="llm_backend: unknown chat backend 'gpt'; known") as error:
        build_chat_model(settings)
    assert "embedded, openai, replay" in str(error.value)


def test_an_unknown_judge_backend_is_reported_as_the_judge_setting(tmp_path) -> None:
    with pytest.raises(ConfigError, match="judge_backend: unknown chat backend 'gpt'"):
        build_judge_model(Settings(llm_backend="replay", judge_backend="gpt"))
    with pytest.raises(ConfigError, match="llm_backend: unknown chat backend 'gpt'"):
        build_judge_model(Settings(llm_backend="gpt"))  # no judge backend of its own: the chat model's
    recording = tmp_path / "recording.jsonl"
    recording.write_text("")
    judge = build_judge_model(Settings(llm_backend="gpt", judge_backend="replay", llm_replay_path=recording))
    assert isinstance(judge, ReplayChatModel)
