"""Every LLM method end to end over HTTP: llama.cpp's OpenAI-compatible server (the `llama_server` fixture)
serving the packaged SmolLM2 GGUF, on real cases, a case or two each, through the evaluation runner as a
user runs them (`CLINRAG_LLM_BACKEND=openai`). The knowledge is a small base built from MedQA's dev facts
(disjoint from the test questions) and the DDXPlus graph; the scoring mode is what the probe chose."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.judges import AnswerQualityJudge, JudgeItem, PairwiseJudge
from clinrag.eval.results import RunDirectory
from clinrag.eval.runner import EvalRunner, RunRequest
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.llm.openai_compat import from_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(llama_server, graph_home: Path, data_dir: Path) -> Settings:
    """Settings of a user on the production path: the packaged graph's home, the server, its template."""
    return Settings(
        home=graph_home,
        data_dir=data_dir,
        llm_backend="openai",
        llm_model=llama_server.model,
        llm_base_url=llama_server.base_url,
        llm_chat_template=llama_server.model_path,
        llm_concurrency=2,
    )


@pytest.fixture(scope="module")
def runner(served: Settings, minilm_embedder) -> EvalRunner:
    return EvalRunner(served, progress=False, embedder_factory=lambda _: minilm_embedder)


@pytest.fixture(scope="module")
def options(data_dir: Path) -> dict[str, dict[str, str]]:
    """Each case's options, by case id, for the datasets whose answers are checked against them."""
    datasets = [load_dataset("medqa", data_dir / "medqa"), load_dataset("icraft-md", data_dir=data_dir)]
    return {case.id: case.options for dataset in datasets for case in dataset.cases}


@pytest.fixture(scope="module")
def knowledge(tmp_path_factory: pytest.TempPathFactory, data_dir: Path, minilm_embedder) -> str:
    out = tmp_path_factory.mktemp("served-kb") / "kb"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    builder.build([data_dir / "medqa" / "mediq_dev_atomic_facts.jsonl"], out, limit=40, progress=False)
    return str(out)


def _run(runner: EvalRunner, tmp_path: Path, dataset: str, method: str, limit: int = 1, **params):
    outcome = runner.run(
        RunRequest(dataset=dataset, method=method, out=tmp_path / method, limit=limit, params=params)
    )
    run = RunDirectory(tmp_path / method)
    return outcome.summary, run.config(), run.results()


def _scorings(results) -> set[str]:
    return {
        step.output["scoring"]
        for result in results
        for step in result.answer.trace.steps
        if "scoring" in step.output
    }


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("direct", {"mode": "score"}),
        ("direct", {"mode": "generate", "max_tokens": 8}),
        ("cot", {"answer": "score", "reasoning_tokens": 48}),
    ],
)
def test_exam_questions_are_answered_over_http(
    runner, tmp_path: Path, options: dict, method: str, params: dict
) -> None:
    summary, config, (result,) = _run(runner, tmp_path, "medqa", method, **params)
    assert summary.n_finished == 1 and config.model == "smollm2"
    assert config.scoring == "ranking (answer letters: top_logprobs)"  # what the probe chose here
    assert result.answer.result is not None and result.answer.result.choice in options[result.case_id]
    if params.get("mode") == "score" or params.get("answer") == "score":
        assert _scorings([result]) == {"top_logprobs"}


def test_retrieval_methods_run_over_http(runner, tmp_path: Path, knowledge: str) -> None:
    _, _, (rag,) = _run(runner, tmp_path, "medqa", "rag", corpus=knowledge, k=2)
    assert [item.kind for item in rag.answer.evidence] == ["statement", "statement"]
    _, _, (imed,) = _run(
        runner, tmp_path, "medqa", "imedrag", corpus=knowledge, iterations=1, queries=1, k=2, query_tokens=48
    )
    assert any(step.name.startswith("imedrag") for step in imed.answer.trace.steps)
    assert rag.answer.result is not None and imed.answer.result is not None


def _ranked_differential(result) -> list[float]:
    ddx = result.answer.result.ddx
    assert len({d.name for d in ddx}) == len(ddx) == 10
    return [d.probability for d in ddx]


def test_differentials_from_a_server_are_ranked_not_one_hot(runner, tmp_path: Path, knowledge: str) -> None:
    summary, _, (direct,) = _run(runner, tmp_path, "ddxplus", "direct", mode="score")
    probabilities = _ranked_differential(direct)
    assert probabilities == sorted(probabilities, reverse=True) and probabilities[1] > 0
    assert probabilities[0] < 0.9 and "gtpa@10" in summary.metrics and _scorings([direct]) == {"ranking"}

    _, _, (doctorrag,) = _run(runner, tmp_path, "ddxplus", "doctorrag", kb=knowledge)
    _ranked_differential(doctorrag)
    _, _, (exprag,) = _run(runner, tmp_path, "ddxplus", "exprag")
    _ranked_differential(exprag)


def test_doctorrag_refines_free_text_with_medtextgrad(runner, tmp_path: Path, knowledge: str) -> None:
    _, _, (result,) = _run(
        runner, tmp_path, "icraft-md-consult", "doctorrag", kb=knowledge, refine_iterations=1, max_tokens=96
    )
    names = [step.name for step in result.answer.trace.steps]
    assert "medtextgrad.generate" in names and result.answer.text


@pytest.mark.parametrize("mode", ["fixed", "dynamic"])
def test_meddx_makes_a_differential_over_http(runner, tmp_path: Path, mode: str) -> None:
    summary, _, (result,) = _run(
        runner, tmp_path, "ddxplus-interactive", "meddx", mode=mode, iterations=1, questions=1, max_steps=6
    )
    assert result.answer.error is None, result.answer.error
    _ranked_differential(result)
    assert "ranking" in _scorings([result]) and summary.n_errors == 0


def test_meddx_with_the_llm_patient_over_http(runner, tmp_path: Path, options: dict) -> None:
    _, _, (result,) = _run(
        runner, tmp_path, "icraft-md", "meddx", iterations=1, questions=1, components="history,diagnosis"
    )
    (patient,) = [step for step in result.answer.trace.steps if step.name == "meddx.patient"]
    assert patient.input["kind"] == "SimulatedInterviewee" and patient.output["calls"] == 1
    assert result.answer.result.ddx[0].name in options[result.case_id].values()


def test_meddx_on_a_published_rare_disease_patient_over_http(runner, tmp_path: Path) -> None:
    _, _, (result,) = _run(
        runner,
        tmp_path,
        "phenopackets-interactive",
        "meddx",
        iterations=1,
        questions=1,
        components="history,diagnosis",
    )
    assert result.answer.error is None, result.answer.error
    (patient,) = [step for step in result.answer.trace.steps if step.name == "meddx.patient"]
    assert patient.input["kind"] == "HpoInterviewee" and patient.output["calls"] == 0
    (diagnosis,) = [step for step in result.answer.trace.steps if step.name == "meddx.diagnosis"]
    assert diagnosis.input["options"] == 20  # the consultation's leading diseases, ranked by the server
    _ranked_differential(result)


def test_deepdoctor_over_http(runner, tmp_path: Path) -> None:
    # `unstrict`: the tiny model's plan finds nothing in the graph, and the strict prompt then abstains.
    _, config, (result,) = _run(
        runner, tmp_path, "ddxplus", "deepdoctor", max_rounds=1, max_actions=1, prompt="unstrict"
    )
    assert [corpus.kind for corpus in config.corpora] == ["graph"]
    assert any(step.name.startswith("deepdoctor") for step in result.answer.trace.steps)
    _ranked_differential(result)


def test_consultation_prose_by_the_served_model(runner, tmp_path: Path) -> None:
    # Without Med-TextGrad's refinement (tested with DoctorRAG above): the draft and its sentence check.
    # on DDXPlus's table, its patients' knowledge: the prompt fits the small served model's context
    _, _, (result,) = _run(
        runner,
        tmp_path,
        "ddxplus-text",
        "consult",
        prose="llm",
        questions=1,
        refine_iterations=0,
        sources="packaged:ddxplus",
    )
    assert result.answer.text and result.answer.evidence
    (draft,) = [step for step in result.answer.trace.steps if step.name == "consult.prose.draft"]
    assert draft.usage.calls == 1 and draft.output["sentences"]


def test_the_judges_run_over_http(served: Settings, minilm_embedder) -> None:
    model = from_settings(served)
    item = JudgeItem(id="q1", question="What treats community-acquired pneumonia in an adult?")
    verdict = PairwiseJudge(model, max_tokens=200).compare(item, "Amoxicillin for five days.", "Rest only.")
    assert [judgement.order for judgement in verdict.judgements] == ["first_as_A", "second_as_A"]
    assert verdict.usage.calls == 2
    quality = asyncio.run(
        AnswerQualityJudge(model, minilm_embedder, max_tokens=200).ascore(
            "Amoxicillin for five days.", "Oral amoxicillin 1 g three times a day for 5 days."
        )
    )
    # The server enforces the judge's schema: whatever the tiny model classifies, the reply has its shape
    # (an empty classification is then judged invalid, with the reason, not scored).
    assert quality.usage.calls == 1 and set(json.loads(quality.raw)) == {"tp", "fp", "fn"}
    assert quality.status == "scored" or "no statement of the reference" in quality.error
