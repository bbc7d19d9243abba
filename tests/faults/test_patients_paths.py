"""A DDXPlus patient path that is missing names the path the user gave, or the file missing from the folder
the user gave, never a file beside it."""

from __future__ import annotations

from pathlib import Path

from tests.app.test_cli import invoke_cli
from tests.faults.test_unwritable_places import _one_line_error


def _build(path: Path) -> str:
    return _one_line_error(
        invoke_cli("patients", "build", "--dataset", "ddxplus", "--path", str(path)), "DataFormatError"
    )


def test_a_missing_folder_is_named_as_given(tmp_path: Path) -> None:
    given = tmp_path / "x" / "dir"
    assert _build(given).endswith(f": {given}: no such file")


def test_a_folder_without_the_patients_file_names_that_file(tmp_path: Path) -> None:
    assert _build(tmp_path).endswith(f": {tmp_path / 'test_patients_mini.csv'}: no such file")
