"""The registry of knowledge-source formats: how each kind of corpus is recognised and read.

A format is one module under `clinrag.knowledge.readers` (or a module an installed distribution names under
the `clinrag.knowledge_sources` entry-point group) that registers a `SourceFormat`. `detect_format` tries
the content recognisers in `rank` order, then the file suffixes; `read_source` reads with the chosen one
(see `clinrag.knowledge.sources`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from clinrag.core.files import Reading
from clinrag.core.registry import Registry
from clinrag.knowledge.items import SourceItem

HEAD_BYTES = 64 * 1024
SNIFF_LINES = 5


class SourceReader(Protocol):
    def __call__(self, path: Path, *, max_size: int, overlap: int) -> Reading[SourceItem]: ...


@dataclass(frozen=True)
class Sample:
    """What recognisers look at: the start of the file decoded leniently (only to recognise; readers are
    strict), and the first JSON object among its first non-blank lines. Both are empty for a directory."""

    path: Path
    head: str
    record: dict[str, Any] | None


@dataclass(frozen=True)
class SourceFormat:
    """`recognise` claims a sample by its content (tried by ascending `rank`); `suffixes` claim a file by
    its name once no content recogniser did. A format with a `prefix` is named by a spec such as
    "packaged:NAME" instead of a path, and is never detected."""

    name: str
    read: SourceReader
    recognise: Callable[[Sample], bool] | None = None
    rank: int = 100
    suffixes: frozenset[str] = frozenset()
    prefix: str | None = None


SOURCES: Registry[SourceFormat] = Registry(
    "knowledge source", packages=["clinrag.knowledge.readers"], entry_point_group="clinrag.knowledge_sources"
)


def register(source: SourceFormat) -> SourceFormat:
    return SOURCES.register(source.name, source)


def head(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(HEAD_BYTES).decode("utf-8", errors="ignore")


def json_object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def sample(path: Path) -> Sample:
    if path.is_dir():
        return Sample(path, "", None)
    text = head(path)
    lines = [line for line in text.splitlines() if line.strip()][:SNIFF_LINES]
    record = next((parsed for parsed in map(json_object, lines) if parsed is not None), None)
    return Sample(path, text, record)
