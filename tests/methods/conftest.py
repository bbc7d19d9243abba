"""Fixtures for the graph methods: the DDXPlus disease graph imported into a live FalkorDB server (clinrag's
packaged one, on a test home), its source JSON, and real DDXPlus patients."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinrag.core.models import Case
from clinrag.eval.datasets import load_dataset
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.importers import read_source
from clinrag.graph.importers.loader import load_sources


@pytest.fixture(scope="module")
def ddx_json(data_dir: Path) -> tuple[dict, dict]:
    folder = data_dir / "ddxplus"
    conditions = json.loads((folder / "release_conditions.json").read_text(encoding="utf-8"))
    evidences = json.loads((folder / "release_evidences.json").read_text(encoding="utf-8"))
    return conditions, evidences


@pytest.fixture(scope="module")
def graph_home(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Iterator[Path]:
    """A clinrag home whose packaged graph server holds the DDXPlus graph (the server stops when the last
    client closes)."""
    home = tmp_path_factory.mktemp("deepdoctor-home")
    store = FalkorDBStore.embedded(home / "graph" / "falkordb")
    load_sources(
        store,
        [read_source(f"ddxplus:{data_dir / 'ddxplus'}")],
        home / "graph" / "checkpoint.json",
        graph_id="clinrag",
        progress=False,
    )
    store.close()
    yield home


@pytest.fixture
def store(graph_home: Path) -> Iterator[FalkorDBStore]:
    opened = FalkorDBStore.embedded(graph_home / "graph" / "falkordb")
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def cases(data_dir: Path) -> list[Case]:
    return load_dataset("ddxplus", data_dir / "ddxplus").cases[:5]


def ddx_symptoms(ddx_json: tuple[dict, dict], disease: str, n: int = 3) -> list[str]:
    """The English questions of a pathology's first yes/no symptoms: the graph's Symptom names."""
    conditions, evidences = ddx_json
    condition = next(c for c in conditions.values() if c["cond-name-eng"] == disease)
    binary = [code for code in condition["symptoms"] if evidences[code]["data_type"] == "B"]
    return [" ".join(evidences[code]["question_en"].split()) for code in binary[:n]]
