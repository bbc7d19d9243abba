"""EXPRAG on the synthetic DischargeQA cohort: the real coded-set ranker, text ranker and report passage
retrieval, and the embedded model where a model answers."""

from __future__ import annotations

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.core.settings import Settings
from clinrag.eval.datasets import Dataset, load_dataset
from clinrag.methods.base import MethodContext
from clinrag.methods.exprag import (
    CodedRanker,
    ExperienceRetriever,
    ExpRAG,
    ExpRAGConfig,
    TextRanker,
)
from clinrag.methods.registry import get_method
from clinrag.patients.similarity import label_vote

COHORT = "synthetic:150:0"


@pytest.fixture(scope="module")
def diagnosis() -> Dataset:
    return load_dataset("dischargeqa-diagnosis", COHORT)


@pytest.fixture(scope="module")
def medication() -> Dataset:
    return load_dataset("dischargeqa-medication", COHORT)


@pytest.fixture(scope="module")
def instruction() -> Dataset:
    return load_dataset("dischargeqa-instruction", COHORT)


def _method(dataset: Dataset, model=None, embedder=None, **params) -> ExpRAG:
    """EXPRAG over every record of the cohort, the case's own included: leaving it out is the method's job.
    The labels are the dataset's, the case's own label among them (as the evaluation runner passes them)."""
    config = ExpRAGConfig(**({"llm": False} if model is None else {}) | params)
    records = dataset.records
    ranker = None
    if config.ranker == "ehr":
        ranker = CodedRanker.from_records(records, config.weights, config.focus, config.focus_share)
    elif config.ranker == "text":
        ranker = TextRanker(records, config.text_ranker, embedder, config.text_query)
    retriever = ExperienceRetriever({r.id: r for r in records}, ranker, config, embedder)
    return ExpRAG(model, retriever, dataset.labels, config)


def _patients(answer) -> list[tuple[str, float]]:
    return [(pid, score) for pid, score in answer.trace.steps[0].output["patients"]]


def _tau(a: dict[str, list[str]], b: dict[str, list[str]], weights: dict[str, float]) -> float:
    """τ in plain Python set arithmetic, the definition the ranker must match."""
    total = 0.0
    for name, weight in weights.items():
        x, y = set(a.get(name, ())), set(b.get(name, ()))
        if x | y:
            total += weight * len(x & y) / len(x | y)
    return total


def test_coarse_stage_is_the_weighted_jaccard_top_k_without_the_case_itself(diagnosis) -> None:
    method = _method(diagnosis, k_patients=5)
    by_id = {r.id: r for r in diagnosis.records}
    for case in diagnosis.cases[:20]:
        answer = method.answer(case)
        weights = answer.trace.steps[0].output["weights"]
        found = _patients(answer)
        expected = sorted(
            (
                (r.id, _tau(case.patient.codes, r.codes, weights))
                for r in diagnosis.records
                if r.id != case.id
            ),
            key=lambda item: -item[1],
        )
        assert [round(s, 4) for _, s in found] == [round(s, 4) for _, s in expected[:5]]
        assert case.id not in {pid for pid, _ in found}
        for pid, _ in found:  # every retrieved patient shares codes with the case
            assert any(set(case.patient.codes[f]) & set(by_id[pid].codes.get(f, ())) for f in weights)


def test_the_cases_own_record_is_left_out_even_as_the_perfect_match(diagnosis) -> None:
    record = diagnosis.records[7]
    case = next(c for c in diagnosis.cases if c.id == record.id)
    # The case given its record's full codes (the withheld principal diagnosis too): its own record scores
    # τ = 1 and would come first if it were not left out.
    leaky = case.model_copy(update={"patient": case.patient.model_copy(update={"codes": record.codes})})
    for ranker in ("ehr", "text"):
        answer = _method(diagnosis, ranker=ranker).answer(leaky)
        ids = [pid for pid, _ in _patients(answer)]
        assert ids and record.id not in ids
        assert all(record.id not in {e.id, e.source} for e in answer.evidence)


def test_each_preset_weighs_the_fields_as_documented(diagnosis, medication, instruction) -> None:
    case = next(
        c for c in diagnosis.cases if all(c.patient.codes.get(f) for f in ("diagnoses", "procedures"))
    )
    weights = {
        preset: _method(diagnosis, weights=preset).answer(case).trace.steps[0].output["weights"]
        for preset in ("uniform", "focused", "complementary")
    }
    assert weights["uniform"] == pytest.approx({f: 1 / 3 for f in ("diagnoses", "medications", "procedures")})
    assert weights["focused"] == pytest.approx({"diagnoses": 0.5, "medications": 0.25, "procedures": 0.25})
    assert weights["complementary"] == pytest.approx(
        {"diagnoses": 0.0, "medications": 0.5, "procedures": 0.5}
    )
    focused = _method(diagnosis, weights="focused", k_patients=10).answer(case)
    complementary = _method(diagnosis, weights="complementary", k_patients=10).answer(case)
    assert _patients(focused) != _patients(complementary)

    # The medication case has no medication codes: focusing on them weighs an empty set, so the presets
    # give different weights but the same ranking.
    med_case = medication.cases[3]
    uniform = _method(medication, k_patients=10).answer(med_case)
    med_focused = _method(medication, weights="focused", k_patients=10).answer(med_case)
    assert med_focused.trace.steps[0].output["weights"]["medications"] == 0.5
    assert [p for p, _ in _patients(med_focused)] == [p for p, _ in _patients(uniform)]

    # A multiple-choice case names no field: the focus must be given.
    with pytest.raises(InvalidInputError, match="focus"):
        _method(instruction, weights="focused").answer(instruction.cases[0])
    chosen = _method(instruction, weights="focused", focus="procedures").answer(instruction.cases[0])
    assert chosen.trace.steps[0].output["weights"]["procedures"] == 0.5


def test_passages_come_from_the_top_patients_reports_with_patient_and_section(
    diagnosis, medication, minilm_embedder
) -> None:
    by_id = {r.id: r for r in diagnosis.records}
    for retriever in ("bm25", "dense", "hybrid", "sentence_window", "auto_merging"):
        method = _method(diagnosis, embedder=minilm_embedder, passages=retriever, k_passages=3)
        answer = method.answer(diagnosis.cases[0])
        patients = {pid for pid, _ in _patients(answer)}
        passages = [e for e in answer.evidence if e.kind == "passage"]
        assert len(passages) == 3
        for item in passages:
            assert item.source in patients
            sections = {s.title: s.text for s in by_id[item.source].report}
            # Windows and merged sections join their sentences with spaces where the report had newlines.
            assert " ".join(item.text.split())[:40] in " ".join(sections[item.provenance["section"]].split())
    # Matched against the question and its options, the top passage is the section that answers it.
    for dataset, section in ((diagnosis, "Discharge Diagnosis"), (medication, "Discharge Medications")):
        method = _method(dataset)
        tops = [method.answer(case).trace.steps[0].output["passages"][0][1] for case in dataset.cases[:20]]
        assert tops.count(section) >= 15, tops


def test_text_ranker_finds_patients_with_the_same_condition(diagnosis, minilm_embedder) -> None:
    clusters = {r.id: r.structured["condition_clusters"] for r in diagnosis.records}
    for mode in ("bm25", "dense"):
        method = _method(diagnosis, embedder=minilm_embedder, ranker="text", text_ranker=mode, k_patients=3)
        same = 0
        for case in diagnosis.cases[:20]:
            answer = method.answer(case)
            assert answer.trace.steps[0].output["retriever"] == mode
            ids = [pid for pid, _ in _patients(answer)]
            assert len(ids) == 3 and case.id not in ids
            same += clusters[case.id][0] in clusters[ids[0]]
        # A random patient of this cohort has the case's main condition 8 % of the time (1.6 of 20).
        assert same >= {"bm25": 12, "dense": 8}[mode], (mode, same)


def test_the_text_ranker_searches_as_the_paper_embeds_the_case_when_asked(diagnosis) -> None:
    """`text_query=question`: the question, its options and the background, as the paper's text baseline
    embeds them; by default the background alone."""
    case = diagnosis.cases[0]
    background = _method(diagnosis, ranker="text").answer(case).trace.steps[0].output["query"]
    paper = (
        _method(diagnosis, ranker="text", text_query="question").answer(case).trace.steps[0].output["query"]
    )
    assert background == case.patient.initial_presentation
    assert background in paper and case.question.strip() in paper
    assert all(option in paper for option in case.options.values())


def test_the_prior_alone_answers_from_the_similar_patients_labels(diagnosis, medication) -> None:
    method = _method(diagnosis)
    right = 0
    for case in diagnosis.cases[:40]:
        answer = method.answer(case)
        steps = {step.name: step for step in answer.trace.steps}
        assert "score_options" not in steps and answer.usage.calls == 0
        if answer.error:  # none of the similar patients had any of the options
            assert not steps["combine"].output["prior"]
            continue
        by_id = {r.id: r for r in diagnosis.records}
        votes = label_vote([(by_id[p], s) for p, s in _patients(answer)], diagnosis.labels)
        assert votes[answer.text] == max(votes.get(o, 0.0) for o in case.options)
        right += answer.result.choice == case.gold.answer
    assert right >= 18  # of 40; chance is 10

    method = _method(medication, select_share=0.5)
    for case in medication.cases[:10]:
        answer = method.answer(case)
        shares = answer.trace.steps[-1].output["shares"]
        assert set(answer.result.choices) == {o for o, s in shares.items() if s >= 0.5}


def test_with_the_embedded_model(diagnosis, medication, instruction, embedded) -> None:
    case = diagnosis.cases[2]
    full = _method(diagnosis, embedded).answer(case)
    assert full.error is None, full.error
    steps = {step.name: step for step in full.trace.steps}
    probabilities = steps["score_options"].output["probabilities"]
    assert set(probabilities) == set(case.options) and sum(probabilities.values()) == pytest.approx(1.0)
    assert full.result.choice in case.options and full.usage.calls == 1
    kinds = {e.kind for e in full.evidence}
    assert kinds == {"patient", "passage"}

    bare = _method(diagnosis, embedded, ranker="none").answer(case)
    assert bare.error is None and bare.trace.steps[0].output == {
        "ranker": "none",
        "patients": [],
        "passages": [],
    }
    assert bare.evidence == []
    # The passages are in the prompt: the retrieval-augmented request is the longer one.
    assert full.usage.prompt_tokens > bare.usage.prompt_tokens

    selected = _method(medication, embedded, select="schema", prior=False).answer(medication.cases[0])
    assert selected.error is None, selected.error
    assert selected.result.choices and set(selected.result.choices) <= set(medication.cases[0].options)

    mc = instruction.cases[0]
    free = Case(id=mc.id, task="free_text", question=mc.question, patient=mc.patient, gold=mc.gold)
    written = _method(instruction, embedded, prior=False, max_tokens=24).answer(free)
    assert written.error is None and written.text.strip()
    assert [step.name for step in written.trace.steps] == ["retrieve", "generate"]
    assert written.usage.completion_tokens <= 24
    # With the prior, the reply is one of the three outcomes most shared by the similar patients.
    adopted = _method(instruction, embedded).answer(free)
    steps = {step.name: step for step in adopted.trace.steps}
    assert list(steps) == ["retrieve", "score_outcomes", "combine"] and adopted.usage.completion_tokens == 0
    by_id = {r.id: r for r in instruction.records}
    votes = label_vote([(by_id[p], s) for p, s in _patients(adopted)], instruction.labels)
    assert set(steps["score_outcomes"].output["probabilities"]) == set(list(votes)[:3])
    assert adopted.text in list(votes)[:3]


def test_registered_and_built_from_an_evaluation_context(diagnosis) -> None:
    held_out = diagnosis.cases[:5]
    context = MethodContext(
        settings=Settings(),
        params={"llm": False, "k_patients": 4},
        experience=diagnosis.experience(exclude=[c.id for c in held_out]),
        labels=diagnosis.labels,
    )
    method = get_method("exprag").build(context)
    answer = method.answer(held_out[0])
    assert len(_patients(answer)) == 4
    assert not {pid for pid, _ in _patients(answer)} & {c.id for c in held_out}


def test_bad_parameters_and_inputs_are_refused(diagnosis) -> None:
    for params, message in (
        ({"k_patients": 0}, "k_patients"),
        ({"ranker": "magic"}, "ranker"),
        ({"passages": "tfidf"}, "passages"),
        ({"weights": "heavy"}, "weights"),
        ({"ranker": "text", "weights": "focused"}, "weights and focus"),
        ({"text_query": "question"}, "text_query apply to ranker=text"),
        ({"focus_share": 1.0}, "focus_share is the focus field"),
        ({"text_ranker": "dense"}, "text_ranker and text_query apply"),
        ({"ranker": "none", "llm": False}, "llm=false"),
        ({"prior": False, "llm": False}, "llm=false"),
        ({"kb": "x"}, "kb"),
    ):
        with pytest.raises(InvalidInputError, match=message):
            ExpRAGConfig.from_params(params)
    with pytest.raises(InvalidInputError, match="needs a chat model"):
        _method(diagnosis, llm=True)
    with pytest.raises(InvalidInputError, match="needs an embedder"):
        _method(diagnosis, passages="dense")
    with pytest.raises(InvalidInputError, match="patient base"):
        get_method("exprag").build(MethodContext(settings=Settings(), params={"llm": False}))
    no_codes = diagnosis.cases[0].model_copy(
        update={"patient": diagnosis.cases[0].patient.model_copy(update={"codes": {}})}
    )
    with pytest.raises(InvalidInputError, match="no codes"):
        _method(diagnosis).answer(no_codes)
