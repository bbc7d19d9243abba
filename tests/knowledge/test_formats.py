"""The knowledge-source registry: every format registers itself, detection keeps its order, and a format
added in one module is read through `read_source`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import Reading, ReadReport
from clinrag.knowledge.formats import SOURCES, SourceFormat, register
from clinrag.knowledge.items import SourceItem
from clinrag.knowledge.sources import detect_format, read_source

PATH_FORMATS = {"medqa", "medmcqa", "pubmedqa", "jsonl", "text", "ddxplus-conditions"}


def test_every_format_is_registered() -> None:
    assert set(SOURCES.names()) == PATH_FORMATS | {"packaged"}
    assert SOURCES.get("packaged").prefix == "packaged:"


def test_detection_order(tmp_path: Path) -> None:
    both = {"question": "q", "options": {"A": "a"}, "answer": "a", "opa": "", "opb": "", "opc": "", "opd": ""}
    cases = {
        "both.jsonl": (json.dumps({**both, "cop": 1}) + "\n", "medmcqa"),  # MedMCQA's keys win over MedQA's
        "lines.txt": ('{"text": "Aspirin."}\n', "jsonl"),  # a JSON line wins over the .txt suffix
        "broken.jsonl": ("{not json\n", "jsonl"),  # no line parsed: the suffix decides
        "abstracts.txt": ('{\n "1": {"CONTEXTS": []}\n}\n', "pubmedqa"),  # content wins over the suffix
        "notes.md": ("# Aspirin\n", "text"),
        "release_conditions.json": ('{\n "Asthma": {"cond-name-eng": "Asthma"}\n}\n', "ddxplus-conditions"),
    }
    for name, (content, expected) in cases.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
        assert detect_format(tmp_path / name) == expected, name
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataFormatError, match="empty corpus"):
        detect_format(tmp_path / "empty.jsonl")
    assert detect_format(tmp_path) == "text"


def test_unknown_reader_lists_the_path_formats(data_dir: Path) -> None:
    with pytest.raises(InvalidInputError) as error:
        read_source(data_dir / "medqa" / "us_4options_test.jsonl", reader="csv")
    assert all(name in str(error.value) for name in PATH_FORMATS)
    assert "packaged" not in str(error.value)


def test_a_format_in_one_module_is_read_by_read_source(tmp_path: Path) -> None:
    def read(path: Path, *, max_size: int, overlap: int) -> Reading[SourceItem]:
        def produce(report: ReadReport):
            report.records += 1
            yield SourceItem(f"{path}:0", "text", f"{path.name} at {max_size}", "example")

        return Reading(path, produce)

    register(SourceFormat("example-registered-in-a-test", read, prefix="example-test:"))
    (item,) = read_source("example-test:notes", max_size=300)
    assert item.text == "example-test:notes at 300"
