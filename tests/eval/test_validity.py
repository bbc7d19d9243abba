"""No gold answer can reach a method: a corpus built from the MedQA test file, evaluated on that file, never
gives a case its own record; the run is refused without --allow-overlap, and run.json and the report say so.
A DDXPlus run on the conditions table its patients were generated from carries a footnote."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.provenance import case_origins, fingerprint
from clinrag.core.settings import load_settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.report import write_report
from clinrag.eval.results import Corpus, RunConfig, RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.eval.validity import GENERATOR_NOTE, check_overlap, dataset_files, generator_notes
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.methods.rag import DocumentRetriever, retrieval_query


def _build(sources: list, out: Path, embedder) -> Path:
    """`clinrag kb build --no-rewrite -s …` with the packaged embedder."""
    builder = KnowledgeBaseBuilder(embedder=embedder, tagger=EmbeddingTagger(embedder), rewriter=None)
    builder.build(sources, out, progress=False)
    return out


@pytest.fixture(scope="module")
def medqa_test(data_dir: Path, tmp_path_factory) -> Path:
    """Every 10th question of the MedQA test file, as a test file of its own (127 questions): embedding the
    whole file as a corpus took two and a half minutes of the suite."""
    lines = (data_dir / "medqa" / "us_4options_test.jsonl").read_text(encoding="utf-8").splitlines()
    subset = tmp_path_factory.mktemp("medqa") / "us_4options_test.jsonl"
    subset.write_text("\n".join(lines[::10]) + "\n", encoding="utf-8")
    return subset


@pytest.fixture(scope="module")
def leaky_corpus(tmp_path_factory, medqa_test: Path, minilm_embedder) -> Path:
    """The whole MedQA test file as a corpus: every test question with its gold answer."""
    return _build([medqa_test], tmp_path_factory.mktemp("kb") / "medqa-test", minilm_embedder)


@pytest.fixture
def runner(data_dir: Path, embedded, minilm_embedder) -> EvalRunner:
    return EvalRunner(
        load_settings(data_dir=data_dir),
        progress=False,
        chat_model_factory=lambda _: embedded,
        embedder_factory=lambda _: minilm_embedder,
    )


def test_the_retriever_never_returns_the_cases_own_record(leaky_corpus, medqa_test, minilm_embedder) -> None:
    corpus = KnowledgeBase.load(leaky_corpus, minilm_embedder)
    dataset = load_dataset("medqa", medqa_test)
    assert dataset_files(dataset) == {fingerprint(medqa_test)} == set(corpus.source_files or {})
    retriever = DocumentRetriever(corpus, k=5, retriever="rrf", tagger=None)
    found_itself = 0
    checked = dataset.cases[::3]  # 43 cases, each of them in the corpus
    for case in checked:
        origins = case_origins(case)
        assert len(origins) == 1
        own = f"kb:medqa:{case.meta['line']}#0"
        unguarded, _ = retriever.retrieve(retrieval_query(case))
        found_itself += own in [item.id for item in unguarded]
        guarded, record = retriever.retrieve(retrieval_query(case), origins)
        assert len(guarded) == 5 and own not in [item.id for item in guarded]
        assert "excluded" in record  # the trace says how many of the case's own statements were dropped
        assert all(item.provenance["line"] != case.meta["line"] for item in guarded)
    # Without the guard the answer key is there for nearly every case: the guard is what removes it.
    assert found_itself >= 0.9 * len(checked)


def test_a_run_on_its_own_corpus_is_refused_then_flagged_when_allowed(
    runner: EvalRunner, leaky_corpus: Path, medqa_test: Path, tmp_path: Path
) -> None:
    request = RunRequest(
        dataset="medqa",
        method="rag",
        out=tmp_path / "run",
        data_path=medqa_test,
        limit=3,
        params={"corpus": str(leaky_corpus), "k": 3, "answer": "score"},
    )
    with pytest.raises(InvalidInputError, match="--allow-overlap"):
        runner.run(request)
    assert not (tmp_path / "run").exists()

    request.allow_overlap = True
    outcome = runner.run(request)
    assert outcome.summary.n_finished == 3 and outcome.summary.n_errors == 0
    run_dir = RunDirectory(tmp_path / "run")
    config = run_dir.config()
    assert config.allow_overlap and config.overlap == [str(medqa_test)]
    assert config.corpora[0].kind == "knowledge" and config.corpora[0].location == str(leaky_corpus)
    assert config.corpora[0].files == {fingerprint(medqa_test): str(medqa_test)}
    for result in run_dir.results():
        line = result.case_id.removeprefix("medqa:")
        documents = [item for item in result.answer.evidence if item.kind == "statement"]
        assert len(documents) == 3
        assert all(str(item.provenance["line"]) != line for item in documents)

    report = write_report([tmp_path / "run"], tmp_path / "report").read_text(encoding="utf-8")
    assert "Validity notes:" in report and "its corpus holds the evaluated dataset's own files" in report


def test_a_disjoint_corpus_runs_without_the_flag(
    runner: EvalRunner, data_dir: Path, medqa_test: Path, tmp_path: Path, minilm_embedder
) -> None:
    # MedQA's dev split (MediQ) shares no file with the test questions.
    dev = data_dir / "medqa" / "mediq_dev_atomic_facts.jsonl"
    corpus = tmp_path / "dev-kb"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    builder.build([dev], corpus, limit=50, progress=False)
    request = RunRequest(
        dataset="medqa",
        method="rag",
        out=tmp_path / "run",
        data_path=medqa_test,
        limit=1,
        params={"corpus": str(corpus), "k": 2},
    )
    runner.run(request)
    config = RunDirectory(tmp_path / "run").config()
    assert config.overlap == [] and not config.allow_overlap
    assert config.corpora[0].files == {fingerprint(dev): str(dev)}


def test_a_base_without_recorded_sources_is_refused_unless_allowed() -> None:
    corpora = [Corpus(kind="knowledge", location="/old/kb", sources=["a.jsonl"], files=None)]
    with pytest.raises(InvalidInputError, match="rebuild it"):
        check_overlap(corpora, {"0123456789abcdef"}, allow=False)
    assert check_overlap(corpora, {"0123456789abcdef"}, allow=True) == []
    assert check_overlap(corpora, set(), allow=False) == []  # a dataset read from no file: nothing to check


def _config(dataset: str, corpora: list[Corpus], method: str = "graph-infer", **params) -> RunConfig:
    return RunConfig(
        dataset=dataset,
        method=method,
        method_params=params,
        data_path="",
        case_ids=["x"],
        created_at="2025-01-01T00:00:00+00:00",
        corpora=corpora,
    )


def test_generator_notes_follow_the_corpora_and_parameters() -> None:
    ddxplus_graph = Corpus(kind="graph", location="g", sources=["ddxplus", "hpo-diseases"])
    packaged_graph = Corpus(kind="graph", location="g", sources=["faker-diseases", "hpo-diseases"])
    table = "/d/ddxplus/release_conditions.json"
    table_kb = Corpus(kind="knowledge", location="k", sources=[table], files={})
    assert generator_notes(_config("ddxplus", [ddxplus_graph])) == [GENERATOR_NOTE]
    assert generator_notes(_config("ddxplus-interactive", [table_kb])) == [GENERATOR_NOTE]
    assert generator_notes(_config("ddxplus", [], kb=table)) == [GENERATOR_NOTE]
    consult = {"knowledge": "packaged:faker-diseases, ddxplus:/d/ddxplus", "patients": "ddxplus:/d/ddxplus"}
    assert generator_notes(_config("ddxplus-text", [], **consult)) == [GENERATOR_NOTE]
    shipped = {"sources": "packaged:faker-diseases,packaged:ddxplus"}  # the copy packaged inside clinrag
    assert generator_notes(_config("ddxplus-text", [], **shipped)) == [GENERATOR_NOTE]
    assert generator_notes(_config("ddxplus", [], patients="ddxplus:/d/ddxplus")) == []
    # consult's default knowledge includes the packaged table, named or not
    assert generator_notes(_config("ddxplus-text", [], method="consult")) == [GENERATOR_NOTE]
    without = {"sources": "packaged:faker-diseases,packaged:hpo-diseases"}
    assert generator_notes(_config("ddxplus-text", [], method="consult", **without)) == []
    assert generator_notes(_config("ddxplus", [packaged_graph])) == []
    assert generator_notes(_config("medqa", [ddxplus_graph])) == []  # the table generated no MedQA case
    unknown = generator_notes(_config("ddxplus", [Corpus(kind="graph", location="g")]))
    assert len(unknown) == 1 and "not recorded" in unknown[0]


def test_the_report_footnotes_a_ddxplus_run_on_the_conditions_table(
    data_dir: Path, tmp_path: Path, minilm_embedder
) -> None:
    table = _build([data_dir / "ddxplus" / "release_conditions.json"], tmp_path / "table", minilm_embedder)
    packaged = _build(["packaged:faker-diseases"], tmp_path / "packaged", minilm_embedder)
    runner = EvalRunner(
        load_settings(data_dir=data_dir), progress=False, embedder_factory=lambda _: minilm_embedder
    )
    for name, kb in (("table", table), ("packaged", packaged)):
        params = {"kb": str(kb), "use_llm_scores": False}
        request = RunRequest(
            dataset="ddxplus", method="doctorrag", out=tmp_path / name, limit=4, params=params
        )
        runner.run(request)
    report = write_report([tmp_path / "table", tmp_path / "packaged"], tmp_path / "report")
    notes = [line for line in report.read_text(encoding="utf-8").splitlines() if "generated from" in line]
    assert len(notes) == 1 and notes[0].startswith("- `table`:")
