"""Fixtures: the real PubMedQA records, a loopback E-utilities / Wikipedia test double serving them, and the
offline index over the same file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clinrag.literature.offline import PubMedQAIndex
from tests.literature.literature_server import LiteratureServer


@pytest.fixture(scope="session")
def pubmedqa_path(data_dir: Path) -> Path:
    return data_dir / "pubmedqa" / "test_set.json"


@pytest.fixture(scope="session")
def pubmedqa_records(pubmedqa_path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(pubmedqa_path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def offline_index(pubmedqa_path: Path) -> PubMedQAIndex:
    return PubMedQAIndex.from_file(pubmedqa_path)


@pytest.fixture
def lit_server(pubmedqa_records: dict[str, dict[str, Any]]):
    server = LiteratureServer(pubmedqa_records)
    yield server
    server.close()
