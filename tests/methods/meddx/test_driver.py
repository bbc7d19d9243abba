"""The DDxDriver, its knowledge and diagnosis agents, and the `meddx` method on real DDXPlus and iCraft-MD
cases. Where a test must control what the model replies (an invalid component choice, a cited summary),
a scripted OpenAI-compatible server on loopback stands in for a model server, since the embedded model's
grammar cannot produce an invalid choice; the end-to-end tests run the real embedded model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clinrag.core.models import Answer
from clinrag.core.settings import Settings
from clinrag.eval.datasets import load_dataset
from clinrag.eval.metrics import score_case
from clinrag.llm.openai_compat import OpenAICompatible
from clinrag.methods.base import MethodContext
from clinrag.methods.meddx.consultation import Consultation
from clinrag.methods.meddx.diagnosis_agent import DiagnosisAgent
from clinrag.methods.meddx.driver import DDxDriver, DriverConfig
from clinrag.methods.meddx.interviewee import Exchange
from clinrag.methods.meddx.knowledge_agent import GraphSource, KnowledgeAgent
from clinrag.methods.meddx.method import SPEC, Meddx, MeddxConfig
from clinrag.patients.similarity import SimilarPatients
from tests.openai_server import chat_body, ranking_body, scripted_model


def _model(server) -> OpenAICompatible:
    return scripted_model(server)


def _reply(payload: dict | str) -> tuple[int, dict, float]:
    return 200, chat_body(payload if isinstance(payload, str) else json.dumps(payload)), 0.0


def _choose(action: str, thought: str = "next step") -> tuple[int, dict, float]:
    return _reply({"thought": thought, "action": action, "input": ""})


def _pick(option: str, *then: str) -> tuple[int, dict, float]:
    # A chat-only server ranks the diagnoses: `option` first, then `then`. Diagnosis scores options written
    # with a leading space (the continuation of "is:"); the ranking names them without it.
    return 200, ranking_body(option, *then), 0.0


def _rank(ddx, gold: str) -> int:
    names = [d.name for d in ddx]
    return names.index(gold) + 1 if gold in names else 11


@pytest.fixture(scope="module")
def case(ddxplus_interactive):
    return ddxplus_interactive.cases[0]


def _steps(answer: Answer, name: str):
    return [s for s in answer.trace.steps if s.name == name]


def test_dynamic_mode_rejects_invalid_component_choices_and_retries(server, case) -> None:
    gold = case.gold.answer
    server.replies = [_choose("surgery"), _choose("history"), _choose("diagnosis"), _pick(gold)]
    model = _model(server)
    config = DriverConfig(mode="dynamic", iterations=1, components=("diagnosis",))
    driver = DDxDriver(model, DiagnosisAgent(model), config=config)
    answer, consultation = Answer(case_id=case.id, method="meddx"), Consultation(case, None)

    assert asyncio.run(driver.run(consultation, answer)) == "iterations"
    chooses = _steps(answer, "meddx.driver.choose")
    assert [c.output["action"] for c in chooses] == [None, None, "diagnosis"]
    assert all("not a valid choice" in c.output["rejected"] for c in chooses[:2])
    assert chooses[2].output["rejected"] is None
    assert "Your last choice was rejected" in server.requests[1]["messages"][-1]["content"]
    assert "rejected" not in server.requests[0]["messages"][-1]["content"]
    assert consultation.ddx[0].name == gold and len(consultation.history) == 1


def test_the_diagnosis_prompt_can_hold_the_differential_so_far_and_the_drivers_instructions(
    server, case
) -> None:
    """MEDDxAgent's diagnosis prompt holds the previous differential and the driver's instructions
    (`with_context`); off, it holds neither."""
    gold = case.gold.answer
    wrong = next(text for text in case.options.values() if text != gold)
    model = _model(server)
    server.replies = [_pick(wrong), _pick(gold)] * 2
    for with_context in (False, True):
        consultation = Consultation(case, None)
        agent = DiagnosisAgent(model, with_context=with_context)
        first, _ = asyncio.run(agent.diagnose(consultation, Answer(case_id=case.id, method="m")))
        consultation.record_ddx(first)
        asyncio.run(agent.diagnose(consultation, Answer(case_id=case.id, method="m"), "Weigh the fever."))
    plain_first, plain_second, first_prompt, second_prompt = (
        r["messages"][-1]["content"] for r in server.requests
    )
    assert "differential so far" not in plain_second and "Weigh the fever." not in plain_second
    assert "differential so far" not in first_prompt  # nothing yet
    assert f"The differential so far: {wrong}" in second_prompt
    assert "Instructions for this step: Weigh the fever." in second_prompt
    assert plain_first == first_prompt


def test_in_fixed_mode_the_drivers_model_can_write_each_steps_input(server, case) -> None:
    """MEDDxAgent's DDxDriver writes the agents' inputs in fixed mode too (`instructed`); a reply that is not
    a valid instruction leaves the step its template input."""
    gold = case.gold.answer
    model = _model(server)
    config = DriverConfig(iterations=2, components=("diagnosis",), instructed=True)
    driver = DDxDriver(model, DiagnosisAgent(model, with_context=True), config=config)
    server.replies = [
        _reply({"thought": "fever is the lead", "input": "Weigh the fever."}),
        _pick(gold),
        _reply("not json"),
        _pick(gold),
    ]
    answer, consultation = Answer(case_id=case.id, method="meddx"), Consultation(case, None)

    assert asyncio.run(driver.run(consultation, answer)) == "iterations"
    first, second = _steps(answer, "meddx.driver.instruct")
    assert first.output == {"thought": "fever is the lead", "input": "Weigh the fever."}
    assert "not a valid instruction" in second.output["rejected"]
    prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert "The next step is fixed: diagnosis" in server.requests[0]["messages"][0]["content"]
    assert "Instructions for this step: Weigh the fever." in prompts[1]
    assert "Instructions for this step" not in prompts[-1]  # the template input is empty
    reacts = _steps(answer, "meddx.react")
    assert [r.input["thought"] for r in reacts] == ["fever is the lead", "fixed order"]


def test_the_diagnosis_can_be_the_models_generated_ranking_of_the_candidates(server, case) -> None:
    """MEDDxAgent's diagnosis agent writes its top ten (`ranking="generated"`): the model's order, each
    candidate once, no probabilities, and the reply constrained to the candidates' names."""
    gold = case.gold.answer
    wrong = next(text for text in case.options.values() if text != gold)
    model = _model(server)
    server.replies = [_reply({"diagnoses": [wrong, gold, wrong]})]
    agent = DiagnosisAgent(model, ranking="generated")
    ddx, _ = asyncio.run(agent.diagnose(Consultation(case, None), Answer(case_id=case.id, method="m")))
    assert [(d.name, d.probability) for d in ddx] == [(wrong, None), (gold, None)]
    (request,) = server.requests
    schema = json.dumps(request["response_format"])
    assert all(json.dumps(text) in schema for text in case.options.values())
    assert "most likely first" in request["messages"][-1]["content"]


def test_dynamic_mode_falls_back_to_the_fixed_order_after_retries(server, case) -> None:
    server.replies = [_choose("surgery")] * 2 + [_pick(case.gold.answer)]
    model = _model(server)
    config = DriverConfig(mode="dynamic", iterations=1, components=("diagnosis",), retries=1)
    driver = DDxDriver(model, DiagnosisAgent(model), config=config)
    answer, consultation = Answer(case_id=case.id, method="meddx"), Consultation(case, None)

    asyncio.run(driver.run(consultation, answer))
    (fallback,) = _steps(answer, "meddx.driver.fallback")
    assert fallback.input["action"] == "diagnosis" and fallback.output["reason"] == "2 choices rejected"
    assert len(consultation.history) == 1


def test_choices_invalid_in_the_current_state_are_named(server, case) -> None:
    model = _model(server)
    config = DriverConfig(mode="dynamic", iterations=1, questions=2, components=("history", "diagnosis"))
    driver = DDxDriver(model, DiagnosisAgent(model), config=config)
    consultation = Consultation(case, None)
    assert "no differential yet" in driver.invalid_reason("finish", consultation)
    assert "not one of the available actions" in driver.invalid_reason("knowledge", consultation)
    assert driver.invalid_reason("history", consultation) is None
    consultation.exchanges = [Exchange("Do you have a cough?", "Yes.")] * 2
    assert driver.invalid_reason("history", consultation) == "the question budget is spent"


def test_delta_progress_is_computed_from_the_logged_ranks(server, case, ddxplus_interactive) -> None:
    wrong = next(text for text in case.options.values() if text != case.gold.answer)
    server.replies = [_pick(wrong), _pick(case.gold.answer)]
    context = MethodContext(settings=Settings(), chat_model_factory=lambda _: _model(server))
    config = MeddxConfig(iterations=2, components=["diagnosis"])
    method = Meddx(
        DDxDriver(
            None,
            DiagnosisAgent(context.chat_model),
            config=DriverConfig(iterations=2, components=("diagnosis",)),
        ),
        config,
        context=context,
    )
    answer = method.answer(case)
    history = answer.result.ddx_history
    assert [s.iteration for s in history] == [0, 1] and history[0].ddx[0].name == wrong
    first, last = _rank(history[0].ddx, case.gold.answer), _rank(history[-1].ddx, case.gold.answer)
    scores, turns = score_case(case, answer)
    assert [t.scores["rank"] for t in turns] == [first, last]
    assert last == 1 and scores["delta_progress"] == first - last > 0


def test_knowledge_summary_cites_graph_evidence(server, case, store) -> None:
    server.replies = [
        _reply({"searches": ["Pneumonia", "unheard-of keyword xyzzy"]}),
        _reply("Pneumonia causes a cough [E2] and fever [E1]; see also [E99]."),
    ]
    agent = KnowledgeAgent(_model(server), graph=GraphSource(store))
    answer, consultation = Answer(case_id=case.id, method="meddx"), Consultation(case, None)

    note = asyncio.run(agent.retrieve(consultation, "Which findings distinguish pneumonia?", answer))
    (sources,) = _steps(answer, "meddx.knowledge.sources")
    found = sources.output["Pneumonia"]["graph"]
    assert len(found) >= 2 and sources.output["unheard-of keyword xyzzy"]["graph"] == []
    assert [e.id for e in note.evidence] == found[:2]
    assert all(e.kind == "graph_fact" and "Pneumonia" in e.text for e in note.evidence)
    assert f"[{found[1]}]" in note.summary and f"[{found[0]}]" in note.summary and "E99" not in note.summary


def test_nothing_found_needs_no_summary_call(server, case, store) -> None:
    server.replies = [_reply({"searches": ["unheard-of keyword xyzzy"]})]
    agent = KnowledgeAgent(_model(server), graph=GraphSource(store))
    note = asyncio.run(
        agent.retrieve(Consultation(case, None), "What is it?", Answer(case_id=case.id, method="meddx"))
    )
    assert note.summary.startswith("Nothing was found") and note.evidence == []
    assert len(server.requests) == 1


def test_dynamic_few_shot_shows_the_most_similar_patients(server, ddxplus_interactive, case) -> None:
    records = ddxplus_interactive.experience([case.id])
    second = next(text for text in case.options.values() if text != case.gold.answer)
    server.replies = [_pick(case.gold.answer, second)]
    agent = DiagnosisAgent(_model(server), "dynamic_few_shot", records, ddxplus_interactive.labels, shots=3)
    answer, consultation = Answer(case_id=case.id, method="meddx"), Consultation(case, None)

    ddx, examples = asyncio.run(agent.diagnose(consultation, answer))
    _, expected = SimilarPatients(records).find(case, 3)
    assert [e.id for e in examples] == [r.id for r, _ in expected]
    prompt = server.requests[0]["messages"][-1]["content"]
    assert all(f"Diagnosis: {ddxplus_interactive.labels[r.id][0]}" in prompt for r, _ in expected)
    assert len(ddx) == 10 and [d.name for d in ddx[:2]] == [case.gold.answer, second]
    ranking = server.requests[0]["response_format"]["json_schema"]["schema"]["properties"]["ranking"]
    assert sorted(ranking["items"]["enum"]) == sorted(case.options.values()) and ranking["maxItems"] == 10
    assert [s.output["scoring"] for s in answer.trace.steps if "scoring" in s.output] == ["ranking"]


def test_dynamic_few_shot_finds_narrative_patients_by_meaning(server, data_dir, minilm_embedder) -> None:
    """iCraft-MD's patients are narratives with no codes: the shots are found by embedding them (the paper
    set's dynamic few-shot ran on no iCraft-MD case before `meddx` gave the agent the context's search)."""
    icraft = load_dataset("icraft-md", data_dir=data_dir)
    case = icraft.cases[0]
    records = icraft.experience([case.id])
    server.replies = [_pick(case.gold.answer)]
    similar = SimilarPatients(records, embedder=lambda: minilm_embedder)
    agent = DiagnosisAgent(
        _model(server), "dynamic_few_shot", records, icraft.labels, shots=5, similar=similar
    )
    _, examples = asyncio.run(
        agent.diagnose(Consultation(case, None), Answer(case_id=case.id, method="meddx"))
    )
    _, expected = SimilarPatients(records, embedder=lambda: minilm_embedder).find(case, 5)
    assert [e.id for e in examples] == [r.id for r, _ in expected] and len(examples) == 5
    assert case.id not in [e.id for e in examples]


def test_fixed_few_shot_uses_distinct_diagnoses_and_never_the_case(server, ddxplus_interactive, case) -> None:
    gold = case.gold.answer
    server.replies = [_pick(gold), _reply("Cough and fever point to an infection."), _pick(gold)]
    labels = ddxplus_interactive.labels
    agent = DiagnosisAgent(_model(server), "fixed_few_shot", ddxplus_interactive.records, labels, shots=4)
    answer = Answer(case_id=case.id, method="meddx")
    _, examples = asyncio.run(agent.diagnose(Consultation(case, None), answer))
    assert len(examples) == 4 and case.id not in [e.id for e in examples]
    assert len({labels[e.id][0] for e in examples}) == 4

    cot = DiagnosisAgent(_model(server), "cot", shots=1)
    asyncio.run(cot.diagnose(Consultation(case, None), answer))
    reasoning, scoring = server.requests[1:]
    assert "Think step by step" in reasoning["messages"][-1]["content"]
    assert "Reasoning: Cough and fever point to an infection." in scoring["messages"][-1]["content"]


def test_meddx_end_to_end_on_a_coded_patient(
    embedded, minilm_embedder, graph_home: Path, ddxplus_interactive, case
) -> None:
    context = MethodContext(
        settings=Settings(home=graph_home),
        params={"iterations": 1, "questions": 2},
        experience=ddxplus_interactive.experience([case.id]),
        labels=ddxplus_interactive.labels,
        chat_model_factory=lambda _: embedded,
        embedder_factory=lambda _: minilm_embedder,
    )
    answer = SPEC.build(context).answer(case)
    names = [s.name for s in answer.trace.steps]
    assert (
        names.index("meddx.history.turn")
        < names.index("meddx.knowledge.searches")
        < names.index("meddx.diagnosis")
    )
    assert names.count("meddx.history.turn") == 2 and names.count("meddx.react") == 3
    (snapshot,) = answer.result.ddx_history
    assert snapshot.questions_asked == 2 and len(snapshot.ddx) == 10
    assert {d.name for d in answer.result.ddx} <= set(case.options.values())
    (patient,) = _steps(answer, "meddx.patient")
    assert patient.output["calls"] == 0 and set(patient.output["codes"]) <= set(case.meta["hidden_evidence"])
    assert all(e.kind == "graph_fact" for e in answer.evidence)
    assert answer.usage.calls >= 4 and answer.error is None


def test_meddx_with_the_llm_patient_counts_its_calls_apart(embedded, minilm_embedder, data_dir: Path) -> None:
    dataset = load_dataset("icraft-md", data_dir=data_dir)
    icraft = dataset.cases[0]
    context = MethodContext(
        settings=Settings(),
        params={"iterations": 1, "questions": 1, "components": "history,diagnosis"},
        chat_model_factory=lambda _: embedded,
        embedder_factory=lambda _: minilm_embedder,
    )
    answer = SPEC.build(context).answer(icraft)
    (patient,) = _steps(answer, "meddx.patient")
    assert patient.input["kind"] == "SimulatedInterviewee" and patient.output["calls"] == 1
    assert answer.usage.calls == 2  # the doctor's question and the diagnosis, not the patient's reply
    assert answer.result.ddx[0].name in icraft.options.values()
    assert "Patient: " in answer.text


def test_meddx_on_a_published_rare_disease_patient_with_the_structured_hpo_patient(
    embedded, minilm_embedder, consult_home: Path, data_dir: Path
) -> None:
    dataset = load_dataset("phenopackets-interactive", data_dir / "phenopackets")
    packet = next(c for c in dataset.cases if c.meta["cohort"] == "SC5D")
    context = MethodContext(
        settings=Settings(home=consult_home),
        params={"iterations": 1, "questions": 2, "components": "history,diagnosis"},
        chat_model_factory=lambda _: embedded,
        embedder_factory=lambda _: minilm_embedder,
    )
    answer = SPEC.build(context).answer(packet)
    (patient,) = _steps(answer, "meddx.patient")
    assert patient.input["kind"] == "HpoInterviewee" and patient.output["calls"] == 0
    # what the patient is known to show: the first findings and what it revealed, all from the packet
    assert set(patient.output["codes"]) <= set(packet.meta["hidden_hpo"])
    assert [s.name for s in answer.trace.steps].count("meddx.history.turn") == 2
    assert answer.error is None and answer.result.ddx and answer.result.ddx_history[0].questions_asked == 2
    # no options among 12,000 diseases: the consultation's 20 leading ones are the candidates ranked
    (diagnosis,) = _steps(answer, "meddx.diagnosis")
    assert diagnosis.input["options"] == 20 and len(answer.result.ddx) == 10


def test_components_must_include_diagnosis() -> None:
    from clinrag.core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="components must include diagnosis"):
        MeddxConfig.from_params({"components": "history,knowledge"})
    assert MeddxConfig.from_params({"components": "knowledge,diagnosis"}).components == [
        "knowledge",
        "diagnosis",
    ]


def test_meddx_gives_dynamic_few_shot_the_contexts_search(embedded, minilm_embedder, data_dir: Path) -> None:
    """The method's diagnosis agent searches with the context's similar-patient search, which can embed a
    narrative case, so the paper set's dynamic few-shot runs on iCraft-MD."""
    dataset = load_dataset("icraft-md", data_dir=data_dir)
    context = MethodContext(
        settings=Settings(),
        params={"strategy": "dynamic_few_shot", "shots": 2, "components": "history,diagnosis"},
        experience=dataset.experience([dataset.cases[0].id]),
        labels=dataset.labels,
        chat_model_factory=lambda _: embedded,
        embedder_factory=lambda _: minilm_embedder,
    )
    similar = SPEC.build(context).driver.diagnosis.similar
    _, found = similar.find(dataset.cases[0], 2)
    assert len(found) == 2 and all(record.id != dataset.cases[0].id for record, _ in found)
