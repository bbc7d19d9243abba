"""The response cache: SQLite on disk, keyed by a hash of backend + model + the full request."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

from clinrag.core.sqlite import ThreadLocalSQLite
from clinrag.core.usage import Usage
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores


class ResponseCache:
    """A key → JSON payload table in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = ThreadLocalSQLite(
            path,
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, payload TEXT, created REAL)",
            "response cache",
        )

    def get(self, key: str) -> str | None:
        row = self._db.connection().execute("SELECT payload FROM responses WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, payload: str) -> None:
        with self._db.connection() as db:
            db.execute(
                "INSERT OR REPLACE INTO responses (key, payload, created) VALUES (?, ?, ?)",
                (key, payload, time.time()),
            )

    def __len__(self) -> int:
        return self._db.connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0]


def cache_key(model: ChatModel, content_key: str) -> str:
    """Backend, model, the backend settings that change outputs, and the request content."""
    identity = "\x00".join([model.backend, model.model, model.output_settings, content_key])
    return hashlib.sha256(identity.encode()).hexdigest()


class CachedChatModel(ChatModel):
    """Serves repeated requests from the cache: a hit makes no model call and counts as `cache_hits=1`."""

    def __init__(self, inner: ChatModel, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.backend = inner.backend
        self.model = inner.model
        self.max_prompt_chars = inner.max_prompt_chars

    @property
    def scoring_name(self) -> str:
        return self.inner.scoring_name

    def _key(self, op: str, request: ChatRequest, options: Sequence[str] = ()) -> str:
        return cache_key(self.inner, request.content_key(op, options))

    @staticmethod
    def _hit(result: Completion | OptionScores) -> Completion | OptionScores:
        return result.model_copy(update={"cached": True, "usage": Usage(cache_hits=1)})

    @staticmethod
    def _missed(result: Completion | OptionScores) -> Completion | OptionScores:
        return result.model_copy(update={"usage": result.usage + Usage(cache_misses=1)})

    def _complete(self, request: ChatRequest) -> Completion:
        key = self._key("complete", request)
        if (payload := self.cache.get(key)) is not None:
            return self._hit(Completion.model_validate_json(payload))
        result = self.inner.complete(request)
        self.cache.put(key, result.model_dump_json())
        return self._missed(result)

    async def _acomplete(self, request: ChatRequest) -> Completion:
        key = self._key("complete", request)
        if (payload := self.cache.get(key)) is not None:
            return self._hit(Completion.model_validate_json(payload))
        result = await self.inner.acomplete(request)
        self.cache.put(key, result.model_dump_json())
        return self._missed(result)

    def _score_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        key = self._key("score", request, options)
        if (payload := self.cache.get(key)) is not None:
            return self._hit(OptionScores.model_validate_json(payload))
        result = self.inner.score_options(request, options)
        self.cache.put(key, result.model_dump_json())
        return self._missed(result)

    async def _ascore_options(self, request: ChatRequest, options: list[str]) -> OptionScores:
        key = self._key("score", request, options)
        if (payload := self.cache.get(key)) is not None:
            return self._hit(OptionScores.model_validate_json(payload))
        result = await self.inner.ascore_options(request, options)
        self.cache.put(key, result.model_dump_json())
        return self._missed(result)
