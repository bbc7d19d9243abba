"""`direct` with the real embedded model on real questions, and its failure path over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case, Gold, PatientProfile
from clinrag.methods.direct import DirectConfig, DirectMethod
from tests.openai_server import chat_body, ranking_body, scripted_model


def _medqa_cases(data_dir: Path, n: int) -> list[Case]:
    lines = (data_dir / "medqa" / "us_4options_test.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    cases = []
    for number, line in enumerate(lines):
        record = json.loads(line)
        cases.append(
            Case(
                id=f"medqa:{number}",
                task="multiple_choice",
                question=record["question"],
                options=record["options"],
                gold=Gold(answer=record["answer_idx"]),
            )
        )
    return cases


def test_generated_choice_is_a_valid_key_or_a_recorded_failure(data_dir: Path, embedded) -> None:
    for case in _medqa_cases(data_dir, 3):
        answer = DirectMethod(embedded, DirectConfig(max_tokens=16)).answer(case)
        assert answer.usage.calls == 1
        step = answer.trace.steps[0]
        assert step.name == "generate_choice" and step.output["text"] == answer.text
        if answer.error is None:
            assert answer.result.choice in case.options
        else:
            assert answer.result.choice is None and step.error_type == "AnswerParseError"


def test_scored_choice_gives_a_distribution_over_the_keys(data_dir: Path, embedded) -> None:
    case = _medqa_cases(data_dir, 1)[0]
    answer = DirectMethod(embedded, DirectConfig(mode="score")).answer(case)
    probabilities = answer.trace.steps[0].output["probabilities"]
    assert set(probabilities) == set(case.options)
    assert sum(probabilities.values()) == pytest.approx(1.0)
    assert answer.result.choice == max(probabilities, key=probabilities.get)


def test_differential_ranks_real_ddxplus_pathologies(data_dir: Path, embedded) -> None:
    conditions = json.loads((data_dir / "ddxplus" / "release_conditions.json").read_text(encoding="utf-8"))
    names = [c["cond-name-eng"] for c in conditions.values()]
    case = Case(
        id="ddx",
        task="ddx",
        question="What is the differential diagnosis?",
        patient=PatientProfile(initial_presentation="35-year-old male. Initial complaint: cough and fever."),
        options={name: name for name in names},
        gold=Gold(answer="Bronchitis"),
    )
    answer = DirectMethod(embedded).answer(case)
    ddx = answer.result.ddx
    assert len(ddx) == 10 and len({d.name for d in ddx}) == 10
    assert all(d.name in names for d in ddx)
    assert [d.probability for d in ddx] == sorted((d.probability for d in ddx), reverse=True)
    assert answer.result.choice == ddx[0].name


def test_multi_select_returns_only_option_keys(data_dir: Path, embedded) -> None:
    case = _medqa_cases(data_dir, 1)[0].model_copy(update={"task": "multi_select"})
    answer = DirectMethod(embedded).answer(case)
    if answer.error is None:
        assert answer.result.choices and set(answer.result.choices) <= set(case.options)
    else:
        assert answer.result.choices == []


def test_free_text_answer(embedded) -> None:
    case = Case(id="t", question="What is the first-line treatment of uncomplicated hypertension?")
    answer = DirectMethod(embedded).answer(case)
    assert answer.text.strip() and answer.error is None and answer.usage.completion_tokens > 0


def test_an_unparseable_reply_is_a_recorded_failure_not_a_default(data_dir: Path, server) -> None:
    # The scripted loopback server stands in for a model server that answers without committing to an
    # option; the embedded model cannot be made to do that on demand.
    server.replies = [(200, chat_body("It could be several of these; more information is needed."), 0.0)]
    model = scripted_model(server)
    case = _medqa_cases(data_dir, 1)[0]
    answer = DirectMethod(model).answer(case)
    assert answer.result.choice is None
    assert answer.error.startswith("AnswerParseError")
    assert answer.text == "It could be several of these; more information is needed."


def test_score_mode_on_a_chat_only_server_takes_the_ranking(data_dir: Path, server) -> None:
    # A server without log-probabilities: the letters are ranked, and the step records how they were scored.
    server.replies = [(200, ranking_body("C", "A"), 0.0)]
    case = _medqa_cases(data_dir, 1)[0]
    answer = DirectMethod(scripted_model(server), DirectConfig(mode="score")).answer(case)
    assert answer.error is None and answer.result.choice == "C"
    [step] = [s for s in answer.trace.steps if s.name == "score_options"]
    assert step.output["scoring"] == "ranking"
    [request] = server.requests
    ranking = request["response_format"]["json_schema"]["schema"]["properties"]["ranking"]
    assert ranking["items"]["enum"] == sorted(case.options)


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="mode"):
        DirectConfig.from_params({"mode": "vote"})
