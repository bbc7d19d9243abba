"""Manifests and atomic directory writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.index.store import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    Manifest,
    atomic_directory,
    read_manifest,
    write_manifest,
)


def _siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def test_manifest_round_trip(tmp_path: Path) -> None:
    manifest = Manifest.new("dense", count=3, embedder="e", dimension=4, params={"structure": "flat"})
    write_manifest(tmp_path, manifest)
    loaded = read_manifest(tmp_path, "dense", expect_embedder="e", expect_dimension=4)
    assert loaded == manifest
    assert loaded.format_version == FORMAT_VERSION
    assert loaded.created.tzinfo is not None


def test_manifest_mismatches_name_both_values(tmp_path: Path) -> None:
    write_manifest(tmp_path, Manifest.new("dense", count=0, embedder="model-a", dimension=384))
    with pytest.raises(IndexMismatchError, match=r"'model-a'.*'model-b'"):
        read_manifest(tmp_path, "dense", expect_embedder="model-b")
    with pytest.raises(IndexMismatchError, match=r"384.*768"):
        read_manifest(tmp_path, "dense", expect_dimension=768)
    with pytest.raises(IndexMismatchError, match="'dense' index, not a 'concept'"):
        read_manifest(tmp_path, "concept")


def test_other_format_version_is_refused(tmp_path: Path) -> None:
    write_manifest(tmp_path, Manifest.new("lexical", count=0))
    raw = json.loads((tmp_path / MANIFEST_NAME).read_text())
    raw["format_version"] = FORMAT_VERSION + 1
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(raw))
    with pytest.raises(IndexMismatchError, match="format version"):
        read_manifest(tmp_path, "lexical")


def test_missing_or_broken_index_directory_is_a_data_format_error(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="no index directory"):
        read_manifest(tmp_path / "absent", "dense")
    with pytest.raises(DataFormatError, match=r"manifest\.json is missing"):
        read_manifest(tmp_path, "dense")
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(DataFormatError, match="cannot read"):
        read_manifest(tmp_path, "dense")
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"kind": "dense", "format_version": FORMAT_VERSION}))
    with pytest.raises(DataFormatError, match="not a valid index manifest"):
        read_manifest(tmp_path, "dense")


def test_atomic_directory_replaces_target_on_success(tmp_path: Path) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic_directory(target) as staging:
        assert staging.parent == tmp_path and staging != target
        (staging / "new.txt").write_text("new")
        assert (target / "old.txt").exists()  # untouched while the new content is written
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert _siblings(target) == ["index"]  # no staging or old copy left behind


def test_atomic_directory_keeps_target_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "index"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_directory(target) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("disk full")
    assert (target / "old.txt").read_text() == "old"
    assert sorted(p.name for p in target.iterdir()) == ["old.txt"]
    assert _siblings(target) == ["index"]


def test_atomic_directory_creates_parents_and_refuses_files(tmp_path: Path) -> None:
    with atomic_directory(tmp_path / "a" / "b") as staging:
        (staging / "x").write_text("x")
    assert (tmp_path / "a" / "b" / "x").read_text() == "x"
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(InvalidInputError, match="not a directory"), atomic_directory(tmp_path / "file"):
        pass
