"""Where a knowledge item or an evaluation case came from: the fingerprint of its source file (the bytes, so
a copy or a renamed file is the same source) and its record in that file (line number, MedMCQA id, PubMed id).

A statement and a case derived from the same record of the same file share an `Origin`: retrieval for the
case leaves such statements out (leave-case-out), and a corpus sharing a file with the evaluated dataset is an
overlap that an evaluation refuses unless told otherwise. Dataset loaders put a case's origin in
`Case.meta["provenance"]` (see `origin_meta`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from clinrag.core.models import Case

FINGERPRINT_CHARS = 16
META_KEY = "provenance"


@dataclass(frozen=True)
class Origin:
    file: str  # the source file's fingerprint
    record: str  # the record within that file


def fingerprint(path: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of the file's bytes (cached while its size and mtime hold)."""
    path = Path(path).resolve()
    stat = path.stat()
    return _fingerprint(path, stat.st_size, stat.st_mtime_ns)


@cache
def _fingerprint(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:FINGERPRINT_CHARS]


def origin_meta(file_fingerprint: str, record: str | int) -> dict[str, str]:
    """The `Case.meta["provenance"]` value of a case read from a file's record."""
    return {"file": file_fingerprint, "record": str(record)}


def case_origins(case: Case) -> frozenset[Origin]:
    """The origins of the records a case was read from (none for a case that came from no file)."""
    raw = case.meta.get(META_KEY)
    if isinstance(raw, dict) and isinstance(raw.get("file"), str) and raw.get("record") is not None:
        return frozenset({Origin(raw["file"], str(raw["record"]))})
    return frozenset()
