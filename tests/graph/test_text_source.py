"""`clinrag graph build -s text:PATH`: triples the chat model reads out of text, imported with the passage
each came from, into the live FalkorDB server of this module (tests/graph/conftest.py).

Model replies: the embedded 135M model cannot be relied on to produce any particular triple (on PubMedQA it
mostly copies the prompt's example), so the behaviour tests replay recorded replies through the product's
own `replay` chat backend (CLINRAG_LLM_BACKEND=replay): each reply is keyed by the exact extraction request
of its chunk, and a request that is not in the recording fails loudly. The replies hold the mistakes the
checks must catch (a triple written backwards, a wrong type pair, a name that is not in the passage, a reply
that is not JSON). Reading, chunking, the request, parsing, the schema checks, name normalisation, the
journal and the import all run for real. The texts are made up for the test, not medical knowledge. One
test runs the real embedded model on three PubMedQA abstracts and checks only what holds for any reply."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.provenance import fingerprint
from clinrag.core.settings import Settings
from clinrag.graph.actions import parse_request, run_action
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.importers import SourceContext, load_sources, read_source
from clinrag.graph.importers.text import JOURNAL, MAX_CHARS, Journal, extract_source, read_passages
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.planner import RetrievalState
from clinrag.graph.schema import Relation, merge_relations, valid_triple
from clinrag.graph.triples import TripleExtractor, split_text
from clinrag.llm.base import Completion
from clinrag.llm.replay import ReplayChatModel
from clinrag.methods.evidence_pack import graph_evidence
from clinrag.terms.mesh import build_mesh_index
from tests.app.test_cli import _assert_clean_failure, invoke_cli
from tests.terms.test_mesh import CLOSING

PNEUMONIA = (
    "Pneumonia presents with cough and fever; a chest X-ray is recommended.\n\n"
    "Sepsis may complicate pneumonia."
)
DENGUE = "Dengue outbreaks are controlled with temephos. Dengue presents with fever, as pneumonia does."
NOT_JSON_TEXT = "Rest is advised after any febrile illness."
UNUSED = "A text that no test reads."


def triple(head: str, head_type: str, relation: str, tail: str, tail_type: str) -> dict[str, str]:
    return {"head": head, "head_type": head_type, "relation": relation, "tail": tail, "tail_type": tail_type}


REPLIES = {
    PNEUMONIA: {
        "triples": [
            triple("pneumonia", "Disease", "HAS_SYMPTOM", "COUGH", "Symptom"),  # both nodes exist
            triple("Pneumonia", "Disease", "HAS_SYMPTOM", "fever", "Symptom"),
            triple("Pneumonia", "Disease", "RECOMMEND_TEST", "chest X-ray", "Test"),
            triple("Pneumonia", "Disease", "HAS_COMORBIDITY", "Sepsis", "Disease"),
            triple("fever", "Symptom", "HAS_SYMPTOM", "Pneumonia", "Disease"),  # wrong direction
            triple("Pneumonia", "Disease", "RECOMMEND_DRUG", "cough", "Symptom"),  # wrong type pair
            triple("Asthma", "Disease", "HAS_SYMPTOM", "wheezing", "Symptom"),  # not in the passage
        ]
    },
    DENGUE: {
        "triples": [
            triple("Dengue", "Disease", "RECOMMEND_DRUG", "temephos", "Drug"),  # MeSH: Temefos
            triple("Dengue", "Disease", "HAS_SYMPTOM", "fever", "Symptom"),
            triple("Pneumonia", "Disease", "HAS_SYMPTOM", "Fever", "Symptom"),  # a duplicate, cited again
        ]
    },
    NOT_JSON_TEXT: "rest -> febrile illness",
    UNUSED: {"triples": []},
}
REJECTED = {
    "triples: wrong_direction": 1,
    "triples: wrong_type_pair": 1,
    "triples: not_in_text": 1,
    "triples: duplicate": 1,
    "chunks: invalid_json": 1,
    "empty files": 1,
}


def write_recording(path: Path, texts: list[str]) -> Path:
    """A replay recording with the reply to each text's extraction request (keyed as the backend keys it),
    and one to a text of no test, so that the recording names its model ("recorded", a part of the journal's
    keys) even when it holds none of the replies a build needs."""
    path.touch()
    extractor = TripleExtractor(ReplayChatModel(path), max_chars=MAX_CHARS)
    lines = []
    for text in [*texts, UNUSED]:
        reply = REPLIES[text]
        completion = Completion(text=reply if isinstance(reply, str) else json.dumps(reply), model="recorded")
        [chunk] = split_text(text, MAX_CHARS)  # as the importer chunks the file (paragraphs joined)
        key = extractor.request(chunk).content_key("complete")
        lines.append(json.dumps({"key": key, "model": "recorded", "response": completion.model_dump()}))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(PNEUMONIA, encoding="utf-8")
    (folder / "sub" / "b.md").write_text(DENGUE, encoding="utf-8")
    (folder / "c.txt").write_text(NOT_JSON_TEXT, encoding="utf-8")
    (folder / "empty.txt").write_text(" \n", encoding="utf-8")
    (folder / "ignored.csv").write_text("not, text", encoding="utf-8")
    return folder


def passage(folder: Path, name: str) -> str:
    return f"{fingerprint(folder / name)}:{name}:0"


BEFORE = {("Pneumonia", "HAS_SYMPTOM", "Cough"): None, ("Dengue", "RECOMMEND_DRUG", "Temefos"): None}


def preload(graph: FalkorDBStore) -> None:
    merge_relations(graph, Relation.HAS_SYMPTOM, [("Pneumonia", "Cough")])
    merge_relations(graph, Relation.RECOMMEND_DRUG, [("Dengue", "Temefos")])


@pytest.fixture
def uri(store: FalkorDBStore) -> str:
    return store.server.url


@pytest.fixture
def graph(uri: str) -> Iterator[FalkorDBStore]:
    """A new graph on the module's server that already knows Pneumonia with Cough, and Dengue with Temefos."""
    opened = FalkorDBStore(uri, f"text-{uuid.uuid4().hex[:10]}")
    preload(opened)
    yield opened
    opened.close()


def run_build(
    uri: str, graph: FalkorDBStore, spec: str, recording: Path, *options: str
) -> subprocess.CompletedProcess:
    """`clinrag graph build -s SPEC` into `graph` on the server at `uri` with the recorded replies."""
    env = {"CLINRAG_LLM_BACKEND": "replay", "CLINRAG_LLM_REPLAY_PATH": str(recording)}
    args = ["graph", "build", "-s", spec, "--uri", uri, "--graph", graph.graph_name, "--no-progress"]
    return invoke_cli(*args, *options, env=env)


def build(uri: str, graph: FalkorDBStore, spec: str, recording: Path, *options: str) -> dict:
    """`run_build`, which must succeed: the JSON report (with --json), else the printed tables."""
    result = run_build(uri, graph, spec, recording, *options)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if "--json" in options else {"table": result.stdout}


def cited_edges(graph: FalkorDBStore) -> dict[tuple[str, str, str], list[str] | None]:
    rows = graph.query("MATCH (h)-[e]->(t) RETURN h.name AS h, type(e) AS r, t.name AS t, e.passages AS p")
    return {(row["h"], row["r"], row["t"]): row["p"] for row in rows}


def expected_edges(folder: Path, *, mesh: bool) -> dict[tuple[str, str, str], list[str] | None]:
    a, b = passage(folder, "a.txt"), passage(folder, "sub/b.md")
    edges: dict[tuple[str, str, str], list[str] | None] = {
        ("Pneumonia", "HAS_SYMPTOM", "Cough"): [a],  # an existing edge, now citing the passage
        ("Pneumonia", "HAS_SYMPTOM", "fever"): [a, b],
        ("Pneumonia", "RECOMMEND_TEST", "chest X-ray"): [a],
        ("Pneumonia", "HAS_COMORBIDITY", "Sepsis"): [a],
        ("Dengue", "HAS_SYMPTOM", "fever"): [b],
        ("Dengue", "RECOMMEND_DRUG", "Temefos"): [b] if mesh else None,
    }
    if not mesh:
        edges[("Dengue", "RECOMMEND_DRUG", "temephos")] = [b]
    return edges


def test_triples_are_imported_citing_their_passages_and_rejections_are_counted(uri, graph, corpus, tmp_path):
    recording = write_recording(tmp_path / "replies.jsonl", [PNEUMONIA, DENGUE, NOT_JSON_TEXT])
    report = build(uri, graph, f"text:{corpus}", recording, "--json")

    [source] = report["sources"]
    assert (source["name"], source["records_read"], source["diseases"]) == ("text:notes", 3, 2)
    assert source["skipped"] == REJECTED
    assert passage(corpus, "c.txt") in source["skip_examples"]["chunks: invalid_json"]
    assert source["edges_added"] == {
        "HAS_SYMPTOM": 2,
        "RECOMMEND_TEST": 1,
        "RECOMMEND_DRUG": 1,
        "HAS_COMORBIDITY": 1,
    }
    assert source["notes"][0].startswith(
        "10 triples proposed by replay:recorded in 3 chunks of 3 records, 6 accepted"
    )
    # names joined the existing nodes (case-folded); without a MeSH index "temephos" is a new drug
    assert cited_edges(graph) == expected_edges(corpus, mesh=False)
    assert report["nodes"] == {"Disease": 3, "Symptom": 2, "Test": 1, "Drug": 2, "Cure": 0}

    # a graph action returns the passages with each fact, and the evidence pack cites them
    state = RetrievalState()
    request = parse_request({"action": "GET_SYMPTOMS", "keywords": ["pneumonia"]})
    result = run_action(graph, request, NodeMatcher(graph))
    state.merge(request.action, result.triples, result.ranked, dict(result.descriptions), result.matches)
    facts, _ = graph_evidence(state, "graph")
    assert {(f.provenance["tail"], tuple(f.provenance["passages"])) for f in facts} == {
        ("Cough", (passage(corpus, "a.txt"),)),
        ("fever", tuple(sorted([passage(corpus, "a.txt"), passage(corpus, "sub/b.md")]))),
    }

    # a rerun asks the model nothing (a recording without these replies fails on any request) and writes
    # nothing twice
    again = build(uri, graph, f"text:{corpus}", write_recording(tmp_path / "none.jsonl", []))["table"]
    assert "1 (1 resumed)" in again and "triples: wrong_direction" in again and "3 replied from" in again
    assert cited_edges(graph) == expected_edges(corpus, mesh=False)


def test_an_interrupted_build_resumes_without_asking_again_or_duplicating(uri, graph, corpus, tmp_path):
    spec = f"text:{corpus}"
    # chunks are asked in path order (a.txt, c.txt, sub/b.md): the reply to the last one is missing
    partial = write_recording(tmp_path / "partial.jsonl", [PNEUMONIA, NOT_JSON_TEXT])
    _assert_clean_failure(run_build(uri, graph, spec, partial, "--json"), "error: ReplayMissError: ")
    assert len(Journal(Settings().graph_data_dir / JOURNAL).replies) == 2
    assert cited_edges(graph) == BEFORE

    # the model is asked only for the chunk it had not answered: the rest come from the journal
    rest = write_recording(tmp_path / "rest.jsonl", [DENGUE])
    report = build(uri, graph, spec, rest, "--json")
    assert report["sources"][0]["skipped"] == REJECTED
    assert "1 chunks asked" in report["sources"][0]["notes"][0]
    assert cited_edges(graph) == expected_edges(corpus, mesh=False)

    # an import cut after its first batch (one disease per batch) resumes to the same edges and passages
    model = ReplayChatModel(rest)
    source = read_source(spec, context=SourceContext(Settings(), Settings().graph_data_dir, chat_model=model))
    fresh = FalkorDBStore(uri, f"{graph.graph_name}-fresh")
    preload(fresh)

    class Interrupted(Exception):
        pass

    def stop(name: str, index: int, total: int) -> None:
        raise Interrupted

    try:
        options = {"batch_size": 1, "progress": False}
        with pytest.raises(Interrupted):
            load_sources(fresh, [source], tmp_path / "cut.json", graph_id="f", on_batch=stop, **options)
        resumed = load_sources(fresh, [source], tmp_path / "cut.json", graph_id="f", **options)
        assert resumed.sources[0].resumed_batches == 1 and resumed.sources[0].batches == 2
        assert cited_edges(fresh) == expected_edges(corpus, mesh=False)
        # importing it all again (another checkpoint) lists no passage twice
        load_sources(fresh, [source], tmp_path / "again.json", graph_id="g", **options)
        assert cited_edges(fresh) == expected_edges(corpus, mesh=False)
    finally:
        fresh.close()


def test_names_join_existing_nodes_through_mesh(uri, graph, corpus, tmp_path, data_dir):
    # MeSH's Temefos has the entry term "Temephos"; the shared subset.xml is cut off in its third record
    xml = tmp_path / "subset.xml"
    xml.write_text((data_dir / "mesh" / "subset.xml").read_text(encoding="utf-8") + CLOSING, encoding="utf-8")
    build_mesh_index([xml], Settings().mesh_index_path)
    recording = write_recording(tmp_path / "replies.jsonl", [PNEUMONIA, DENGUE, NOT_JSON_TEXT])
    report = build(uri, graph, f"text:{corpus}", recording, "--json")
    assert cited_edges(graph) == expected_edges(corpus, mesh=True)
    assert report["nodes"]["Drug"] == 1
    assert "through MeSH" in report["sources"][0]["notes"][1]


def test_bad_input_is_a_typed_error(uri, graph, tmp_path):
    recording = write_recording(tmp_path / "replies.jsonl", [])
    missing = run_build(uri, graph, f"text:{tmp_path / 'missing.txt'}", recording)
    _assert_clean_failure(missing, "error: DataFormatError: ")
    assert "missing.txt: no such file" in missing.stderr
    context = SourceContext(Settings(), tmp_path, progress=False, chat_model=ReplayChatModel(recording))
    (tmp_path / "empty.md").write_text("\n  \n", encoding="utf-8")
    (tmp_path / "latin1.txt").write_bytes("Fièvre et toux.".encode("latin-1"))
    (tmp_path / "table.json").write_text('[{"a": 1}]', encoding="utf-8")
    (tmp_path / "no-text").mkdir()
    for name, message in [
        ("empty.md", "empty"),
        ("latin1.txt", "not UTF-8 at byte offset 2"),
        ("table.json", "unrecognised source format"),
        ("no-text", "no .txt or .md file"),
    ]:
        with pytest.raises(DataFormatError, match=message):
            read_source(f"text:{tmp_path / name}", context=context)
    with pytest.raises(InvalidInputError, match="runs the chat model"):
        read_source(f"text:{tmp_path / 'empty.md'}")
    assert cited_edges(graph) == BEFORE


def test_the_embedded_model_on_pubmedqa_abstracts(embedded, store, data_dir, tmp_path):
    corpus = read_passages(data_dir / "pubmedqa" / "test_set.json", limit=3)
    assert corpus.records == 3 and len(corpus.passages) >= 3
    extractor = TripleExtractor(embedded, max_tokens=128, max_chars=MAX_CHARS)
    source = extract_source(corpus, extractor, Journal(tmp_path / "journal.jsonl"), progress=False)
    graph = FalkorDBStore(store.server.url, f"pubmedqa-{uuid.uuid4().hex[:8]}")
    try:
        report = load_sources(graph, [source], tmp_path / "checkpoint.json", graph_id="p", progress=False)
        rows = graph.query(
            "MATCH (h)-[e]->(t) RETURN labels(h)[0] AS hl, type(e) AS r, labels(t)[0] AS tl, e.passages AS p"
        )
    finally:
        graph.close()
    ids = {p.id for p in corpus.passages}
    for row in rows:  # every edge fits the schema and cites passages of this corpus
        assert valid_triple(row["hl"], row["r"], row["tl"]) and row["p"] and set(row["p"]) <= ids
    [done] = report.sources
    accepted = int(re.search(r"(\d+) accepted", done.notes[0])[1])
    proposed = int(re.search(r"^(\d+) triples proposed", done.notes[0])[1])
    rejected = sum(n for reason, n in done.skipped.items() if reason.startswith("triples: "))
    assert proposed == accepted + rejected and done.edges_listed == accepted
    assert len(rows) == sum(report.relations.values()) == sum(done.edges_added.values()) <= accepted
    assert f"{len(corpus.passages)} chunks asked" in done.notes[0]
