"""`clinrag knowledge audit` and `clinrag knowledge show` on the packaged knowledge base, as a user runs them
(typer's CliRunner, in this process)."""

from __future__ import annotations

import json

from clinrag.conditions.catalogue import packaged_catalogue
from tests.app.test_cli import _assert_clean_failure, invoke_cli


def test_the_audit_passes_and_counts_per_system_and_issuer() -> None:
    result = invoke_cli("knowledge", "audit", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] and report["problems"] == []
    catalogue = packaged_catalogue()
    assert report["conditions"] == len(catalogue.conditions)
    assert sum(report["per_system"].values()) == len(catalogue.conditions)
    assert set(report["per_source"]) == set(catalogue.sources)  # every source cited
    assert report["basis"].keys() <= {"source", "estimate"}
    printed = invoke_cli("knowledge", "audit")
    assert printed.returncode == 0 and "audit passed" in printed.stderr
    assert "conditions per system" in printed.stdout and "NICE" in printed.stdout


def test_a_condition_card_shows_its_features_with_frequencies_and_its_documents() -> None:
    result = invoke_cli("knowledge", "show", "appendicitis")
    assert result.returncode == 0, result.stderr
    card = result.stdout
    for part in (
        "ICD-10-CM K35",
        "features:",
        "people with it",
        "tests:",
        "management:",
        "sources:",
        "https://",
    ):
        assert part in card, part
    # found by its French and Chinese names too, and as JSON
    [condition] = [c for c in packaged_catalogue().find("appendicitis") if c.icd10.startswith("K35")][:1]
    for name in (condition.names["fr"][0], condition.names["zh"][0]):
        shown = invoke_cli("knowledge", "show", name, "--json")
        assert shown.returncode == 0 and condition.id in {c["id"] for c in json.loads(shown.stdout)}


def test_an_unknown_or_empty_name_is_a_clean_error() -> None:
    _assert_clean_failure(invoke_cli("knowledge", "show", "no such illness at all"), "no condition")
    _assert_clean_failure(invoke_cli("knowledge", "show", "  "), "is empty")
