"""DoctorRAG on real DDXPlus patients and condition knowledge, with the embedded model where a model is
needed and a scripted server where a reply must be controlled."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.knowledge.base import KnowledgeBase
from clinrag.knowledge.builder import KnowledgeBaseBuilder
from clinrag.knowledge.tagging import EmbeddingTagger
from clinrag.methods.answering import PRIOR_FLOOR, combine
from clinrag.methods.base import MethodContext
from clinrag.methods.context import ClinicalContext
from clinrag.methods.doctorrag import DoctorRAG, DoctorRAGConfig, build
from clinrag.patients.base import format_record
from clinrag.patients.similarity import SimilarPatients, patient_evidence
from clinrag.tasks.templates import task_prompt
from tests.openai_server import chat_body, scripted_model


@pytest.fixture(scope="module")
def ddxplus(data_dir: Path):
    return load_dataset("ddxplus", data_dir / "ddxplus")


@pytest.fixture(scope="module")
def knowledge(data_dir: Path, minilm_embedder, tmp_path_factory) -> KnowledgeBase:
    """The DDXPlus condition knowledge (declarative statements), built like `clinrag kb build` does."""
    out = tmp_path_factory.mktemp("kb") / "ddxplus"
    builder = KnowledgeBaseBuilder(
        embedder=minilm_embedder, tagger=EmbeddingTagger(minilm_embedder), rewriter=None
    )
    builder.build([data_dir / "ddxplus" / "release_conditions.json"], out, progress=False)
    return KnowledgeBase.load(out, minilm_embedder)


def _method(model, ddxplus, knowledge, minilm_embedder, held_out, **config) -> DoctorRAG:
    exclude = {case.id for case in held_out}
    patients = SimilarPatients(ddxplus.experience(exclude=exclude), embedder=lambda: minilm_embedder)
    return DoctorRAG(
        model,
        knowledge=knowledge,
        tagger=EmbeddingTagger(minilm_embedder),
        patients=patients,
        labels=ddxplus.labels,
        config=DoctorRAGConfig(**config),
    )


def test_context_carries_resolvable_evidence_and_the_answer_uses_both_parts(
    ddxplus, knowledge, minilm_embedder, embedded
) -> None:
    cases = ddxplus.cases[:3]
    method = _method(embedded, ddxplus, knowledge, minilm_embedder, cases, k_statements=3, k_patients=2)
    records = {record.id for record in ddxplus.records}
    for case in cases:
        answer = method.answer(case)
        assert answer.error is None, answer.error
        statements = [e for e in answer.evidence if e.kind == "statement"]
        patients = [e for e in answer.evidence if e.kind == "patient"]
        assert len(statements) == 3 and len(patients) == 5  # 2 in the prompt + 3 more behind the prior
        assert all(e.id.removeprefix("kb:") in knowledge.statements for e in statements)
        assert all(e.id in records and e.id != case.id for e in patients)
        steps = {step.name: step for step in answer.trace.steps}
        assert steps["retrieve"].output["knowledge"]["mode"] == "concept"
        assert steps["score_options"].output["probabilities"] and steps["combine"].output["prior"]
        assert answer.result.ddx[0].name == case.options[answer.result.choice]
        assert sum(d.probability for d in answer.result.ddx) <= 1.0 + 1e-9


def test_ablation_switches_remove_their_part(ddxplus, knowledge, minilm_embedder) -> None:
    case = ddxplus.cases[5]
    no_tags = _method(None, ddxplus, knowledge, minilm_embedder, [case], use_tags=False, use_llm_scores=False)
    assert no_tags.answer(case).trace.steps[0].output["knowledge"]["mode"] == "dense"
    no_kb = _method(
        None, ddxplus, knowledge, minilm_embedder, [case], use_knowledge=False, use_llm_scores=False
    )
    assert not [e for e in no_kb.answer(case).evidence if e.kind == "statement"]
    no_patients = _method(
        None, ddxplus, knowledge, minilm_embedder, [case], use_patients=False, use_llm_scores=False
    )
    answer = no_patients.answer(case)
    assert not [e for e in answer.evidence if e.kind == "patient"]
    assert answer.error is not None and answer.result.choice is None  # nothing left to choose with
    with pytest.raises(InvalidInputError, match="chat model"):
        _method(None, ddxplus, knowledge, minilm_embedder, [case])


def test_the_copy_guard_keeps_a_coded_copy_of_the_case_out_of_its_similar_patients(ddxplus) -> None:
    """`code_copy_guard` (the paper's: near-copies, similarity > 0.99, are dropped): a real patient's record
    stored again under another id is the first neighbour without it and gone with it."""
    case = ddxplus.cases[0]
    original = next(record for record in ddxplus.records if record.id == case.id)
    records = [*ddxplus.experience(exclude=[case.id]), original.model_copy(update={"id": "copy"})]

    def neighbours(**config) -> list[str]:
        method = DoctorRAG(
            None,
            knowledge=None,
            tagger=None,
            patients=SimilarPatients(records),
            labels=ddxplus.labels,
            config=DoctorRAGConfig(use_llm_scores=False, use_knowledge=False, **config),
        )
        how, found = method._similar(case)
        assert how == "coded-set jaccard"
        return [record.id for record, _ in found]

    assert neighbours()[0] == "copy"
    assert "copy" not in neighbours(code_copy_guard=True)


def test_the_query_tagger_and_its_chapters_are_parameters(knowledge, minilm_embedder) -> None:
    context = MethodContext(
        settings=Settings(), knowledge=knowledge, embedder_factory=lambda _: minilm_embedder
    )
    configured = build(context, DoctorRAGConfig(use_llm_scores=False))
    one = build(context, DoctorRAGConfig(use_llm_scores=False, tagger="embedding", tag_chapters=1))
    assert isinstance(one.tagger, EmbeddingTagger) and one.tagger.max_tags == 1
    assert configured.tagger.max_tags == 3
    tagged = one.tagger.tag("Acute myocardial infarction treated with aspirin.")
    assert len(tagged.tags) == 1


def test_a_similar_patient_is_shown_whole_or_cut_as_patient_chars_says(ddxplus) -> None:
    """The paper formats the whole records of the similar patients (`patient_chars=0`); by default each is
    cut to 300 characters so a small model's context holds them."""
    case = ddxplus.cases[0]
    record = next(r for r in ddxplus.records if r.id != case.id and len(format_record(r)) > 600)
    context = ClinicalContext(patients=patient_evidence([(record, 0.9)]))

    def prompt(**config) -> str:
        method = DoctorRAG(
            None,
            knowledge=None,
            tagger=None,
            patients=None,
            labels={},
            config=DoctorRAGConfig(use_llm_scores=False, **config),
        )
        return method._request(case, task_prompt(case), context).messages[-1].content

    whole, cut = format_record(record), format_record(record)[:300].rsplit(" ", 1)[0]
    assert whole in prompt(patient_chars=0)
    assert whole not in prompt() and f"{cut} …" in prompt()


def test_experience_prior_alone_diagnoses_held_out_patients(ddxplus, knowledge, minilm_embedder) -> None:
    held_out = ddxplus.cases[:60]
    method = _method(None, ddxplus, knowledge, minilm_embedder, held_out, use_llm_scores=False)
    correct = sum(method.answer(case).result.choice == case.gold.answer for case in held_out)
    assert correct >= 55


def test_an_unparseable_selection_is_a_recorded_failure(data_dir: Path, server) -> None:
    # The scripted loopback server stands in for a model that replies outside the schema; the embedded
    # model's grammar cannot be made to do that.
    server.replies = [(200, chat_body("I would need to examine the patient first."), 0.0)]
    model = scripted_model(server, structured_output="none")
    dataset = load_dataset("dialmed-drugs", data_dir / "dialmed")
    case = dataset.cases[0]
    method = DoctorRAG(model, knowledge=None, tagger=None, patients=None, labels={}, config=DoctorRAGConfig())
    answer = method.answer(case)
    assert answer.error.startswith("AnswerParseError")
    assert answer.result.choices == [] and answer.text == "I would need to examine the patient first."


def test_combine_is_the_normalised_product_with_the_floor() -> None:
    llm = {"a": 0.5, "b": 0.3, "c": 0.2}
    prior = {"b": 0.75, "c": 0.25}
    raw = {"a": 0.5 * PRIOR_FLOOR, "b": 0.3 * (0.75 + PRIOR_FLOOR), "c": 0.2 * (0.25 + PRIOR_FLOOR)}
    total = sum(raw.values())
    assert combine(llm, prior, 1.0) == pytest.approx({k: v / total for k, v in raw.items()})
    assert combine(llm, {}, 1.0) == llm
    only_prior = combine({}, prior, 1.0)
    assert only_prior == pytest.approx({"b": 0.76 / 1.02, "c": 0.26 / 1.02})
    squared = combine(llm, prior, 2.0)
    assert squared["b"] / squared["c"] == pytest.approx(0.3 * 0.76**2 / (0.2 * 0.26**2))
    assert math.isclose(sum(squared.values()), 1.0)


def test_parameters_are_validated_with_clear_errors() -> None:
    assert DoctorRAGConfig.from_params({"use_tags": False, "k_prior": 3}).k_prior == 3
    for bad, name in (
        ({"k_statements": 0}, "k_statements"),
        ({"nope": 1}, "nope"),
        ({"fallback": "x"}, "fallback"),
    ):
        with pytest.raises(InvalidInputError, match=name):
            DoctorRAGConfig.from_params(bad)


def test_the_fallback_decides_what_a_question_outside_the_chapters_gets(
    ddxplus, knowledge, minilm_embedder
) -> None:
    # The knowledge without the chapter the query is tagged with: eq. 1 finds nothing, "unconstrained"
    # searches every statement.
    case = ddxplus.cases[0]
    probe = _method(None, ddxplus, knowledge, minilm_embedder, [case], use_llm_scores=False)
    tags = set(probe.answer(case).trace.steps[0].output["knowledge"]["query_tags"])
    others = [s for s in knowledge.statements.values() if not tags & set(s.tags)]
    assert tags and others
    elsewhere = KnowledgeBase.create(others, minilm_embedder)
    strict = _method(None, ddxplus, elsewhere, minilm_embedder, [case], use_llm_scores=False)
    retrieved = strict.answer(case).trace.steps[0].output
    assert retrieved["statements"] == [] and retrieved["knowledge"]["concept"]["reason"]
    loose = _method(
        None, ddxplus, elsewhere, minilm_embedder, [case], use_llm_scores=False, fallback="unconstrained"
    )
    retrieved = loose.answer(case).trace.steps[0].output
    assert len(retrieved["statements"]) == 5 and retrieved["knowledge"]["concept"]["fallback_used"]
