"""`clinrag graph build | counts | action` use CLINRAG_GRAPH_URI, as the methods do, rather than quietly
starting clinrag's own server; a URI where nothing answers is one typed line and exit code 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinrag.graph.falkordb_server import STATE_FILE
from clinrag.graph.falkordb_store import FalkorDBStore
from tests.app.test_cli import invoke_cli
from tests.faults.test_unwritable_places import _one_line_error
from tests.loopback import free_port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[FalkorDBStore]:
    """A FalkorDB server apart from the home's, holding one disease and its symptom."""
    with FalkorDBStore.embedded(tmp_path / "server") as store:
        store.write("CREATE (:Disease {name: 'Asthma'})-[:HAS_SYMPTOM]->(:Symptom {name: 'Wheezing'})")
        yield store


def _no_server_of_its_own(home: Path) -> bool:
    return not (home / "graph" / "falkordb" / STATE_FILE).exists()


def test_counts_and_action_read_the_configured_graph(served: FalkorDBStore, isolated_home: Path) -> None:
    env = {"CLINRAG_GRAPH_URI": str(served.server.url)}
    counts = invoke_cli("graph", "counts", "--json", env=env)
    assert counts.returncode == 0, counts.stderr
    found = json.loads(counts.stdout)
    assert (found["nodes"]["Disease"], found["relations"]["HAS_SYMPTOM"]) == (1, 1)
    action = invoke_cli("graph", "action", "GET_SYMPTOMS", "Asthma", "--json", env=env)
    assert action.returncode == 0, action.stderr
    assert [(t["head"], t["tail"]) for t in json.loads(action.stdout)["triples"]] == [("Asthma", "Wheezing")]
    assert _no_server_of_its_own(isolated_home)


def test_build_writes_into_the_configured_graph(served: FalkorDBStore, isolated_home: Path) -> None:
    env = {"CLINRAG_GRAPH_URI": str(served.server.url)}
    result = invoke_cli(
        "graph", "build", "-s", "packaged:faker-diseases", "--limit", "3", "--no-progress", "--json", env=env
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["nodes"]["Disease"] == 4  # Asthma and the 3 imported
    assert served.query("MATCH (d:Disease) RETURN count(d) AS n") == [{"n": 4}]
    assert _no_server_of_its_own(isolated_home)


@pytest.mark.parametrize(
    "args",
    [
        ["counts"],
        ["action", "GET_SYMPTOMS", "Asthma"],
        ["build", "-s", "packaged:faker-diseases", "--limit", "2", "--no-progress"],
    ],
    ids=["counts", "action", "build"],
)
def test_a_uri_where_nothing_answers_is_a_typed_error(args: list[str], isolated_home: Path) -> None:
    uri = f"redis://127.0.0.1:{free_port()}"
    result = invoke_cli("graph", *args, env={"CLINRAG_GRAPH_URI": uri})
    _one_line_error(result, "GraphUnavailableError", f"FalkorDB at {uri} is not reachable")
    assert _no_server_of_its_own(isolated_home)
