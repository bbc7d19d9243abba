import pytest

from clinrag.core.errors import ConfigError, ReplayMissError
from clinrag.llm.base import ChatRequest
from clinrag.llm.replay import RecordingChatModel, ReplayChatModel


def test_recorded_embedded_responses_replay_exactly(embedded, tmp_path):
    path = tmp_path / "recording.jsonl"
    recorder = RecordingChatModel(embedded, path)
    request = ChatRequest.of("What is hypertension?", max_tokens=20)
    options_request = ChatRequest.of("Is insulin a hormone?")
    live = recorder.complete(request)
    live_scores = recorder.score_options(options_request, ["yes", "no"])
    recorder.complete(request)  # a repeated request is written once
    assert len(path.read_text().splitlines()) == 2

    replay = ReplayChatModel(path)
    assert replay.complete(request).text == live.text
    assert replay.score_options(options_request, ["yes", "no"]).logprobs == live_scores.logprobs
    assert replay.model == live.model


def test_replay_fails_loudly_on_an_unknown_request(embedded, tmp_path):
    path = tmp_path / "recording.jsonl"
    RecordingChatModel(embedded, path).complete(ChatRequest.of("Known question.", max_tokens=4))
    replay = ReplayChatModel(path)
    with pytest.raises(ReplayMissError, match=r"Unknown question\."):
        replay.complete(ChatRequest.of("Unknown question.", max_tokens=4))
    with pytest.raises(ReplayMissError):
        replay.complete(ChatRequest.of("Known question.", max_tokens=5))  # same text, other parameters


def test_malformed_or_missing_recording(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "abc", "response": {}}\nnot json\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2"):
        ReplayChatModel(bad)
    with pytest.raises(ConfigError, match="not found"):
        ReplayChatModel(tmp_path / "missing.jsonl")
