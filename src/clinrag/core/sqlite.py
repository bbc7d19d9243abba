"""SQLite shared by several threads: one connection per thread, WAL so readers never block the writer.

The caches kept this way (responses, embeddings, literature) hold full prompts and patients' words, so the
file is owner-only (0600, also when it exists) in an owner-only directory; SQLite gives its -wal and -shm
files the database file's mode."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from clinrag.core.errors import ConfigError
from clinrag.core.files import os_reason, private_dir, private_file

# Written by SQLite beside the database; they hold recent writes, so older ones are made private too.
_SIDE_FILES = ("-wal", "-shm")


class ThreadLocalSQLite:
    def __init__(self, path: Path, schema: str, what: str) -> None:
        self.path = Path(path)
        self.what = what
        try:
            private_dir(self.path.parent)
            private_file(self.path)
            for suffix in _SIDE_FILES:
                side = self.path.with_name(self.path.name + suffix)
                if side.is_file():
                    private_file(side)
        except OSError as exc:
            raise ConfigError(f"cannot write the {what} {self.path}: {os_reason(exc)}") from exc
        self._local = threading.local()
        try:
            with self.connection() as db:
                db.execute(schema)
            self._check_writable()
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot write the {what} {self.path}: {exc}") from exc

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

    def _check_writable(self) -> None:
        """Take the write lock once and let it go: a database SQLite can only read (a read-only home, its
        -shm file not writable) fails here, when it is opened, rather than at its first write."""
        db = self.connection()
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
