"""Persistence shared by every index kind: a manifest that says what an index directory holds, JSON helpers,
and atomic directory writes, so that an error or crash during a save never leaves a half-written index where
a good one was."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clinrag.core.errors import DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.core.files import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, os_reason, private_dir

# Bump when the on-disk layout of any index kind changes; older directories are then refused, not misread.
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"

IndexKind = Literal["dense", "lexical", "concept"]
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL


class Manifest(BaseModel):
    """What an index directory holds. `embedder`/`dimension` are None for indexes without vectors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: int
    kind: IndexKind
    embedder: str | None = None
    dimension: int | None = Field(default=None, ge=1)
    count: int = Field(ge=0)
    created: datetime
    params: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def new(
        cls,
        kind: IndexKind,
        *,
        count: int,
        embedder: str | None = None,
        dimension: int | None = None,
        params: dict[str, Any] | None = None,
    ) -> Manifest:
        return cls(
            format_version=FORMAT_VERSION,
            kind=kind,
            embedder=embedder,
            dimension=dimension,
            count=count,
            created=datetime.now(UTC),
            params=params or {},
        )


def write_manifest(directory: Path, manifest: Manifest) -> None:
    write_text_atomic(directory / MANIFEST_NAME, manifest.model_dump_json(indent=2) + "\n")


def read_manifest(
    directory: Path,
    kind: IndexKind,
    *,
    expect_embedder: str | None = None,
    expect_dimension: int | None = None,
) -> Manifest:
    """The manifest of `directory`, checked against what the caller is about to use it for.

    A missing or unreadable directory/manifest is a `DataFormatError`; an index of another kind or format
    version, or one built with another embedder or dimension than expected, is an `IndexMismatchError`."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataFormatError(f"no index directory at {directory}")
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise DataFormatError(f"{directory} is not an index directory: {MANIFEST_NAME} is missing")
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise DataFormatError(f"{path} is not a JSON object")
    # Kind and version are checked before validation: another version may have another schema.
    if raw.get("kind") != kind:
        raise IndexMismatchError(f"{directory} holds a {raw.get('kind')!r} index, not a {kind!r} index")
    if raw.get("format_version") != FORMAT_VERSION:
        raise IndexMismatchError(
            f"{directory} has index format version {raw.get('format_version')!r}, this clinrag reads "
            f"version {FORMAT_VERSION}; rebuild the index"
        )
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise DataFormatError(f"{path} is not a valid index manifest: {exc}") from exc
    if expect_embedder is not None and manifest.embedder != expect_embedder:
        raise IndexMismatchError(
            f"{directory} was built with embedder {manifest.embedder!r}, but embedder {expect_embedder!r} "
            "is in use; rebuild the index with it"
        )
    if expect_dimension is not None and manifest.dimension != expect_dimension:
        raise IndexMismatchError(
            f"{directory} holds vectors of dimension {manifest.dimension}, but dimension "
            f"{expect_dimension} is expected"
        )
    return manifest


def read_vector_manifest(
    directory: Path,
    kind: IndexKind,
    *,
    expect_embedder: str | None = None,
    expect_dimension: int | None = None,
) -> Manifest:
    """`read_manifest` for an index that holds vectors: its manifest must name its embedder and dimension."""
    manifest = read_manifest(
        directory, kind, expect_embedder=expect_embedder, expect_dimension=expect_dimension
    )
    if manifest.embedder is None or manifest.dimension is None:
        raise DataFormatError(f"{directory}: a {kind} index manifest must name its embedder and dimension")
    return manifest


def write_json(path: Path, value: Any) -> None:
    write_text_atomic(Path(path), json.dumps(value, ensure_ascii=False))


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, fsync it and rename it over `path`: a crash leaves
    the old file or the new one, never an empty or half-written one."""
    staging = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex}"
    try:
        # owner-only, like every file that may hold patients' words (a base, a run's config, a report)
        with os.fdopen(os.open(staging, _NEW_FILE, PRIVATE_FILE_MODE), "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataFormatError(f"index file {path} is missing") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(f"cannot read index file {path}: {exc}") from exc


def read_id_list(path: Path, expected: int) -> list[str]:
    """A JSON list of `expected` string ids, or `DataFormatError`."""
    ids = read_json(path)
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise DataFormatError(f"{path} is not a JSON list of string ids")
    if len(ids) != expected:
        raise DataFormatError(f"{path} lists {len(ids)} ids, the manifest says {expected}")
    return ids


@contextlib.contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield an empty staging directory beside `target`; on success it replaces `target`, on error it is
    removed and `target` is left exactly as it was.

    Files are fsynced before the swap. POSIX cannot rename a directory over a non-empty one, so an existing
    `target` is first renamed aside and deleted only once the new directory is in place; a crash between
    those two renames leaves the old index intact as `.<name>.old-*` beside the target."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise InvalidInputError(f"{target} exists and is not a directory; refusing to replace it")
    staging = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex}"
    try:
        private_dir(target.parent)
        staging.mkdir(mode=PRIVATE_DIR_MODE)
    except OSError as exc:
        raise InvalidInputError(f"cannot write {target}: {os_reason(exc)}") from exc
    try:
        yield staging
        _fsync_tree(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _swap_into_place(staging, target)


def _swap_into_place(staging: Path, target: Path) -> None:
    old: Path | None = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex}"
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_tree(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(folder))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
