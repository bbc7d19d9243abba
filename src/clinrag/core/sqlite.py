"""SQLite shared by several threads: one connection per thread, WAL so readers never block the writer."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from clinrag.core.errors import ConfigError


class ThreadLocalSQLite:
    def __init__(self, path: Path, schema: str, what: str) -> None:
        self.path = Path(path)
        self.what = what
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the directory of the {what} {self.path.parent}: {exc}") from exc
        self._local = threading.local()
        with self.connection() as db:
            db.execute(schema)

    def connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(self.path, timeout=30)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise ConfigError(f"cannot open the {self.what} {self.path}: {exc}") from exc
            self._local.db = db
        return db
