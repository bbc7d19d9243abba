"""Every knowledge item keeps its origin (source file fingerprint, record), the knowledge base stores it, and
a search leaves out what an excluded origin produced; bases built before origins were recorded still load."""

from __future__ import annotations

import json
import shutil

import pytest

from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.base import STATEMENTS_FILE, KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.sources import read_source
from clinrag.knowledge.tagging import EmbeddingTagger


@pytest.fixture(scope="module")
def sources(data_dir):
    return {
        "medqa": data_dir / "medqa" / "us_4options_test.jsonl",
        "medmcqa": data_dir / "medmcqa" / "dev.json",
        "pubmedqa": data_dir / "pubmedqa" / "test_set.json",
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory, sources, minilm_embedder):
    out = tmp_path_factory.mktemp("kb") / "kb"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    builder.build(list(sources.values()), out, limit=40, progress=False)
    return out, KnowledgeBase.load(out, minilm_embedder)


def test_fingerprint_is_of_the_bytes_not_the_name(tmp_path, sources) -> None:
    copy = tmp_path / "renamed.jsonl"
    shutil.copyfile(sources["medqa"], copy)
    assert fingerprint(copy) == fingerprint(sources["medqa"])
    copy.write_text(copy.read_text(encoding="utf-8")[:-2] + "\n", encoding="utf-8")
    assert fingerprint(copy) != fingerprint(sources["medqa"])


def test_readers_give_each_item_its_file_and_record(sources) -> None:
    medqa = list(read_source(sources["medqa"]))[:5]
    assert [item.origin for item in medqa] == [
        Origin(fingerprint(sources["medqa"]), str(item.provenance["line"])) for item in medqa
    ]
    medmcqa = list(read_source(sources["medmcqa"]))[:5]
    assert all(
        item.origin == Origin(fingerprint(sources["medmcqa"]), item.provenance["question_id"])
        for item in medmcqa
    )
    pubmedqa = list(read_source(sources["pubmedqa"]))[:8]
    assert all(
        item.origin == Origin(fingerprint(sources["pubmedqa"]), item.provenance["pmid"]) for item in pubmedqa
    )
    # The long answer (the conclusion) is derived from the same record as the abstract's paragraphs.
    assert any(item.id.endswith(":long_answer") for item in pubmedqa)
    assert all(item.origin is None for item in list(read_source("packaged:faker-diseases"))[:3])


def test_statements_keep_their_origin_through_save_and_load(built, sources) -> None:
    out, kb = built
    assert kb.info["format_version"] == 2
    assert kb.source_files == {fingerprint(path): str(path) for path in sources.values()}
    for statement in kb.statements.values():
        assert statement.origin is not None and statement.origin.file in kb.source_files
    line = json.loads((out / STATEMENTS_FILE).read_text(encoding="utf-8").splitlines()[0])
    assert set(line["origin"]) == {"file", "record"}


@pytest.mark.parametrize("mode", ["rrf", "dense", "lexical", "concept", "hybrid"])
def test_search_leaves_out_the_excluded_origin_and_still_returns_k(built, mode) -> None:
    _, kb = built
    target = next(s for s in kb.statements.values() if s.source == "medqa")
    tags = target.tags if mode in ("concept", "hybrid") else None
    found = kb.search(target.text, k=5, mode=mode, tags=tags)
    assert target.id in [s.id for s, _ in found.hits]  # the query finds its own statement…
    excluded = kb.search(target.text, k=5, mode=mode, tags=tags, exclude={target.origin})
    ids = [s.id for s, _ in excluded.hits]
    assert target.id not in ids and len(ids) == 5  # …and never once it is excluded
    assert all(s.origin != target.origin for s, _ in excluded.hits)
    assert excluded.record["excluded"] >= 1


def test_a_format_1_base_loads_with_unknown_sources(built, tmp_path, minilm_embedder) -> None:
    out, _ = built
    old = tmp_path / "old"
    shutil.copytree(out, old)
    info = json.loads((old / "kb.json").read_text(encoding="utf-8"))
    info["format_version"] = 1
    del info["source_files"]
    (old / "kb.json").write_text(json.dumps(info), encoding="utf-8")
    rows = [json.loads(line) for line in (old / STATEMENTS_FILE).read_text(encoding="utf-8").splitlines()]
    lines = [json.dumps({k: v for k, v in row.items() if k != "origin"}) for row in rows]
    (old / STATEMENTS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    kb = KnowledgeBase.load(old, minilm_embedder)
    assert kb.source_files is None
    assert all(s.origin is None for s in kb.statements.values())
    assert kb.search("chest pain", k=3, mode="rrf", exclude={Origin("x", "1")}).hits
