"""The knowledge base built from real corpora with the packaged embedder, then searched and reloaded."""

import json

import pytest

from clinrag.core.errors import ConfigError, DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.embed.base import Embedder
from clinrag.knowledge.base import KnowledgeBase, describe
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.rewrite import DeclarativeRewriter
from clinrag.knowledge.tagging import EmbeddingTagger


@pytest.fixture(scope="module")
def built(tmp_path_factory, data_dir, minilm_embedder):
    out = tmp_path_factory.mktemp("kb") / "kb"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    sources = [
        data_dir / "medqa" / "us_4options_test.jsonl",
        data_dir / "medmcqa" / "dev.json",
        data_dir / "pubmedqa" / "test_set.json",
    ]
    report = builder.build(sources, out, limit=60, progress=False)
    return out, report, KnowledgeBase.load(out, minilm_embedder)


def test_build_reads_every_source_and_tags_every_statement(built):
    out, report, kb = built
    assert report.items == 180 and report.statements == len(kb.statements) == 180
    assert set(describe(out)["by_source"]) == {"medqa", "medmcqa", "pubmedqa"}
    assert all(1 <= len(s.tags) <= 3 and set(s.tags) <= set(range(1, 23)) for s in kb.statements.values())
    assert not (out.parent / f".{out.name}.checkpoint.jsonl").exists()


def test_constrained_search_never_returns_a_statement_without_a_shared_tag(built):
    _, _, kb = built
    for tags in ([3], [9], [10, 18], [2, 21]):
        result = kb.search("What is the first-line treatment?", tags=tags, k=10)
        assert result.hits, tags
        assert all(set(tags) & set(statement.tags) for statement, _ in result.hits)


def test_hybrid_keeps_the_constraint_and_lexical_finds_exact_words(built):
    _, _, kb = built
    statement = next(s for s in kb.statements.values() if s.source == "pubmedqa")
    word = max(statement.text.split(), key=len).strip(".,;:()")
    lexical = kb.search(word, mode="lexical", k=20)
    assert statement.id in [s.id for s, _ in lexical.hits]
    hybrid = kb.search(statement.text, mode="hybrid", tags=statement.tags, k=5)
    assert hybrid.hits[0][0].id == statement.id
    assert all(set(statement.tags) & set(s.tags) for s, _ in hybrid.hits)


def test_rrf_fuses_dense_and_lexical_without_the_chapter_constraint(built):
    _, _, kb = built
    statement = next(s for s in kb.statements.values() if s.source == "medmcqa")
    outside = [t for t in range(1, 23) if t not in statement.tags]
    rrf = kb.search(statement.text, mode="rrf", tags=outside, k=5)
    assert rrf.hits[0][0].id == statement.id  # found although it shares no chapter with the query
    dense = [s.id for s, _ in kb.search(statement.text, mode="dense", k=15).hits]
    lexical = [s.id for s, _ in kb.search(statement.text, mode="lexical", k=15).hits]
    assert {s.id for s, _ in rrf.hits} <= set(dense) | set(lexical)


def test_query_without_tags_follows_the_fallback_policy(built):
    _, _, kb = built
    none = kb.search("chest pain on exertion", tags=[], fallback="none")
    assert none.hits == [] and none.record["concept"]["reason"] == "query has no tags"
    loose = kb.search("chest pain on exertion", tags=[], fallback="unconstrained")
    assert loose.hits and loose.record["concept"]["fallback_used"] is True


def test_query_tagged_by_the_tagger_is_recorded(built, minilm_embedder):
    _, _, kb = built
    result = kb.search("iron deficiency anaemia", tagger=EmbeddingTagger(minilm_embedder), k=3)
    assert result.tag_source == "tagger" and 3 in result.query_tags
    assert result.record["tagging"]["tagger"] == "embedding"
    evidence = result.evidence()
    assert evidence and evidence[0].kind == "statement" and evidence[0].id.startswith("kb:")


def test_reload_gives_identical_results(built, minilm_embedder):
    out, _, kb = built
    again = KnowledgeBase.load(out, minilm_embedder)
    for mode in ("concept", "hybrid", "dense", "lexical", "rrf"):
        first = kb.search("antibiotic for pneumonia", tags=[1, 10], mode=mode, k=5)
        second = again.search("antibiotic for pneumonia", tags=[1, 10], mode=mode, k=5)
        assert [(s.id, round(score, 5)) for s, score in first.hits] == [
            (s.id, round(score, 5)) for s, score in second.hits
        ]


class _OtherEmbedder(Embedder):
    name = "another-model"
    dimension = 384

    def __init__(self) -> None:
        super().__init__(batch_size=8)

    def _embed_batch(self, texts):  # never called: loading is refused first
        raise AssertionError


def test_a_knowledge_base_of_another_embedder_refuses_to_load(built):
    out, _, _ = built
    with pytest.raises(IndexMismatchError, match="another-model"):
        KnowledgeBase.load(out, _OtherEmbedder())


def test_missing_knowledge_base_and_empty_query(tmp_path, built):
    with pytest.raises(DataFormatError, match="kb build"):
        describe(tmp_path / "nothing")
    with pytest.raises(InvalidInputError, match="empty"):
        built[2].search("   ")


def test_build_resumes_from_its_checkpoint(tmp_path, data_dir, minilm_embedder, embedded):
    """An interrupted build leaves a checkpoint (with a torn last line); the rerun only does the rest."""
    source = data_dir / "medqa" / "us_4options_test.jsonl"
    out = tmp_path / "kb"
    calls = []

    class CountingTagger(EmbeddingTagger):
        def tag_many(self, texts):
            calls.append(len(texts))
            if sum(calls) > 24:
                raise KeyboardInterrupt  # the user presses Ctrl-C mid-build
            return super().tag_many(texts)

    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=CountingTagger(minilm_embedder), rewriter=None, batch_size=8
    )
    with pytest.raises(KeyboardInterrupt):
        builder.build([source], out, limit=40, progress=False)
    checkpoint = tmp_path / ".kb.checkpoint.jsonl"
    assert len(checkpoint.read_text().splitlines()) == 1 + 24  # the settings header, then one line per item
    checkpoint.write_text(checkpoint.read_text() + '{"item": "medqa:99", "statem')  # torn write

    with pytest.raises(ConfigError, match="other settings"):  # a resume must not mix two configurations
        KnowledgeBaseBuilder(
            embedder=minilm_embedder,
            tagger=EmbeddingTagger(minilm_embedder),
            rewriter=DeclarativeRewriter(embedded),
            batch_size=8,
        ).build([source], out, limit=40, progress=False)

    calls.clear()
    resumed = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None, batch_size=8
    ).build([source], out, limit=40, progress=False)
    assert resumed.resumed_items == 24 and resumed.statements == 40
    kb_ids = [json.loads(line)["id"] for line in (out / "statements.jsonl").read_text().splitlines()]
    assert kb_ids == [f"medqa:{n}#0" for n in range(1, 41)]
