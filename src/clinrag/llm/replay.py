"""Recorded responses: record what any real backend answers to a JSONL file, and replay it in tests.

A recording is keyed by the request's content hash (not the backend), so responses recorded from the
embedded model replay anywhere. Replay fails loudly on a request it has not recorded.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from clinrag.core.errors import ConfigError, ReplayMissError
from clinrag.core.files import os_reason, private_dir, private_file
from clinrag.core.settings import Settings
from clinrag.llm.backends import CHAT_BACKENDS
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores


def _read_recording(path: Path) -> dict[str, dict]:
    entries: dict[str, dict] = {}
    if not path.exists():
        return entries
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            entries[entry["key"]] = entry
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{number}: not a recording line ({exc})") from exc
    return entries


class ReplayChatModel(ChatModel):
    backend = "replay"

    def __init__(self, path: Path, max_prompt_chars: int = 200_000) -> None:
        if not path.is_file():
            raise ConfigError(f"recording not found: {path}")
        self.path = path
        self._entries = _read_recording(path)
        models = {entry.get("model", "") for entry in self._entries.values()}
        self.model = "+".join(sorted(models)) or "empty"
        self.max_prompt_chars = max_prompt_chars
        entries = self._entries.values()
        scored = {entry["response"].get("method") for entry in entries if entry.get("op") == "score"}
        self._scoring = "+".join(sorted(str(method) for method in scored)) or "loglik"

    @property
    def scoring_name(self) -> str:
        """The modes the recorded scores were made in."""
        return self._scoring

    def _lookup(self, key: str, request: ChatRequest) -> dict:
        entry = self._entries.get(key)
        if entry is None:
            first = request.messages[-1].content[:120].replace("\n", " ")
            raise ReplayMissError(
                f"request {key[:12]} is not in the recording {self.path} (last message starts: {first!r}); "
                "re-record it with CLINRAG_LLM_RECORD_PATH"
            )
        return entry["response"]

    def _complete(self, request: ChatRequest) -> Completion:
        return Completion.model_validate(self._lookup(request.content_key("complete"), request))

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        return OptionScores.model_validate(self._lookup(request.content_key("score", options), request))


class RecordingChatModel(ChatModel):
    """Passes every call to `inner` and appends request + response to the recording (once per request)."""

    def __init__(self, inner: ChatModel, path: Path) -> None:
        self.inner = inner
        self.path = path
        self.backend = inner.backend
        self.model = inner.model
        self.max_prompt_chars = inner.max_prompt_chars
        try:  # the recording holds full prompts: patients' words
            private_dir(path.parent)
            private_file(path)
        except OSError as exc:
            raise ConfigError(f"cannot write the recording {path}: {os_reason(exc)}") from exc
        self._known = set(_read_recording(path))
        self._lock = threading.Lock()

    @property
    def scoring_name(self) -> str:
        return self.inner.scoring_name

    def _write(self, key: str, op: str, request: ChatRequest, options: list[str], response: dict) -> None:
        with self._lock:
            if key in self._known:
                return
            line = {
                "key": key,
                "op": op,
                "model": self.model,
                "request": request.model_dump(mode="json"),
                "options": options,
                "response": response,
            }
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            self._known.add(key)

    def _complete(self, request: ChatRequest) -> Completion:
        result = self.inner.complete(request)
        self._write(request.content_key("complete"), "complete", request, [], result.model_dump(mode="json"))
        return result

    async def _acomplete(self, request: ChatRequest) -> Completion:
        result = await self.inner.acomplete(request)
        self._write(request.content_key("complete"), "complete", request, [], result.model_dump(mode="json"))
        return result

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        result = self.inner.score_options(request, options)
        self._write(
            request.content_key("score", options), "score", request, options, result.model_dump(mode="json")
        )
        return result

    async def _ascore_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        result = await self.inner.ascore_options(request, options)
        self._write(
            request.content_key("score", options), "score", request, options, result.model_dump(mode="json")
        )
        return result


@CHAT_BACKENDS.register("replay")
def from_settings(settings: Settings) -> ReplayChatModel:
    if settings.llm_replay_path is None:
        raise ConfigError("the replay backend needs CLINRAG_LLM_REPLAY_PATH")
    return ReplayChatModel(settings.llm_replay_path, max_prompt_chars=settings.max_prompt_chars)
