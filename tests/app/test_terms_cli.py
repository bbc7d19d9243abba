"""`clinrag terms mesh-build | mesh-map` as a user runs them, on the real MeSH TSV tables."""

import csv
import json

import pytest

from tests.app.test_cli import _assert_clean_failure, invoke_cli


def _rows(path):
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def tables(data_dir):
    mesh = data_dir / "mesh"
    return [mesh / "terms.tsv", mesh / "tree-numbers.tsv", mesh / "symptoms.tsv"]


@pytest.fixture(scope="module")
def db(tmp_path_factory, tables):
    path = tmp_path_factory.mktemp("termscli") / "mesh.sqlite"
    sources = [arg for table in tables for arg in ("--source", str(table))]
    result = invoke_cli("terms", "mesh-build", *sources, "--out", str(path))
    assert result.returncode == 0, result.stderr
    assert f"MeSH index written: {path}" in result.stdout
    summary = json.loads(result.stdout.split("\n", 1)[1])
    terms, trees, symptoms = (_rows(t) for t in tables)
    assert summary["counts"]["descriptors"] == len(terms)
    assert summary["counts"]["tree_numbers"] == len(trees)
    assert summary["counts"]["symptoms"] == len(symptoms)
    assert [s["rows"] for s in summary["sources"]] == [len(terms), len(trees), len(symptoms)]
    assert summary["size_bytes"] == path.stat().st_size
    again = invoke_cli("terms", "mesh-build", *sources, "--out", str(path))
    assert again.returncode == 0 and "MeSH index up to date" in again.stdout
    return path


def test_map_prints_decision_records_as_json(db, tables):
    by_name = {r["mesh_name"]: r["mesh_id"] for r in _rows(tables[0])}
    result = invoke_cli(
        "terms", "mesh-map", "type 2 diabetes mellitus", "Hypertenion", "zorblax fentimorphic",
        "--db", str(db), "--json", "--candidates", "3",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    inverted, typo, nonsense = json.loads(result.stdout)
    assert (inverted["match"], inverted["level"]) == ("exact_name", "word_order")
    assert inverted["descriptor"]["ui"] == by_name["Diabetes Mellitus, Type 2"]
    assert typo["match"] == "fuzzy" and typo["descriptor"]["ui"] == by_name["Hypertension"]
    assert typo["score"] >= typo["threshold"] == 90
    assert nonsense["match"] == "none" and nonsense["descriptor"] is None
    assert 0 < len(nonsense["candidates"]) <= 3
    assert {m["db_fingerprint"] for m in (inverted, typo, nonsense)} == {inverted["db_fingerprint"]}


def test_map_table_and_threshold(db, tables):
    ui = next(r["mesh_id"] for r in _rows(tables[0]) if r["mesh_name"] == "Hypertension")
    loose = invoke_cli("terms", "mesh-map", "Hypertenion", "--db", str(db))
    assert loose.returncode == 0, loose.stderr
    assert ui in loose.stdout and "fuzzy" in loose.stdout and "fuzzy threshold 90" in loose.stdout
    strict = invoke_cli("terms", "mesh-map", "Hypertenion", "--db", str(db), "--threshold", "99", "--json")
    (mapping,) = json.loads(strict.stdout)
    assert mapping["match"] == "none" and mapping["candidates"][0]["ui"] == ui


def test_default_location_is_under_the_clinrag_home(isolated_home, tables):
    result = invoke_cli("terms", "mesh-build", "--source", str(tables[2]))
    assert result.returncode == 0, result.stderr
    assert (isolated_home / "mesh" / "mesh.sqlite").is_file()
    mapped = invoke_cli("terms", "mesh-map", _rows(tables[2])[0]["mesh_name"], "--json")
    assert json.loads(mapped.stdout)[0]["descriptor"]["ui"] == _rows(tables[2])[0]["mesh_id"]


def test_missing_index_and_malformed_xml_are_clean_errors(tmp_path, data_dir):
    _assert_clean_failure(
        invoke_cli("terms", "mesh-map", "fever", "--db", str(tmp_path / "none.sqlite")),
        "MeshIndexNotFoundError: no MeSH index",
    )
    out = tmp_path / "folder.sqlite"
    # The shared folder holds subset.xml, which is cut off inside its third record.
    failed = invoke_cli("terms", "mesh-build", "--source", str(data_dir / "mesh"), "--out", str(out))
    _assert_clean_failure(failed, "not well-formed XML")
    assert list(tmp_path.iterdir()) == []
