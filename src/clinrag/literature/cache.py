"""The literature response cache: SQLite on disk, keyed by source identity + query + parameters, with a TTL.

It stores what a source returned (its evidence, as JSON), so a repeated search makes no HTTP call until the
entry is older than `ttl_s`. Failures are never cached."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from clinrag.core.models import Evidence
from clinrag.core.sqlite import ThreadLocalSQLite

_EVIDENCE_LIST = TypeAdapter(list[Evidence])


def cache_key(identity: str, query: str, params: dict[str, str | int]) -> str:
    """A hash of the source identity (service, base URL, fixed request options), the query and the
    per-search parameters; credentials are never part of it."""
    content = json.dumps([identity, query, params], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(content.encode()).hexdigest()


class LiteratureCache:
    def __init__(self, path: Path, ttl_s: float = 7 * 24 * 3600) -> None:
        if not ttl_s > 0:
            raise ValueError(f"the cache TTL must be positive, got {ttl_s}")
        self.path = Path(path)
        self.ttl_s = ttl_s
        self._db = ThreadLocalSQLite(
            self.path,
            "CREATE TABLE IF NOT EXISTS literature (key TEXT PRIMARY KEY, payload TEXT, created REAL)",
            "literature cache",
        )

    def get(self, key: str) -> list[Evidence] | None:
        """The stored evidence, or None when absent, older than the TTL, or unreadable."""
        row = (
            self._db.connection()
            .execute("SELECT payload, created FROM literature WHERE key = ?", (key,))
            .fetchone()
        )
        if row is None or time.time() - row[1] > self.ttl_s:
            return None
        try:
            return _EVIDENCE_LIST.validate_json(row[0])
        except ValidationError:  # written by an incompatible version: fetch again
            return None

    def put(self, key: str, evidence: list[Evidence]) -> None:
        with self._db.connection() as db:
            db.execute(
                "INSERT OR REPLACE INTO literature (key, payload, created) VALUES (?, ?, ?)",
                (key, _EVIDENCE_LIST.dump_json(evidence).decode(), time.time()),
            )

    def prune(self) -> int:
        """Delete expired entries; returns how many."""
        with self._db.connection() as db:
            cursor = db.execute("DELETE FROM literature WHERE created < ?", (time.time() - self.ttl_s,))
        return cursor.rowcount

    def __len__(self) -> int:
        return self._db.connection().execute("SELECT COUNT(*) FROM literature").fetchone()[0]
