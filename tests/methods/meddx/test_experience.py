"""meddx-experience on real DDXPlus patients: held-out patients questioned by the structured patient, the
rest of the mini release as the patient base."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.settings import Settings
from clinrag.eval.metrics import score_case
from clinrag.eval.sampling import sample_cases
from clinrag.methods.base import MethodContext
from clinrag.methods.meddx.experience import SPEC, ExperienceConfig
from clinrag.methods.meddx.experience_policy import ExperienceModel
from clinrag.methods.meddx.interactive import InteractiveDdx
from clinrag.methods.meddx.structured_patient import StructuredPatient, evidence_catalogue


@pytest.fixture(scope="module")
def held_out(ddxplus_interactive):
    return sample_cases(ddxplus_interactive.cases, 30, seed=5)


def _method(dataset, held_out, **params):
    context = MethodContext(
        settings=Settings(),
        params=params,
        experience=dataset.experience([c.id for c in held_out]),
        labels=dataset.labels,
    )
    return SPEC.build(context)


def _rank(ddx, gold: str) -> int:
    names = [d.name for d in ddx]
    return names.index(gold) + 1 if gold in names else 11


def test_questioning_finds_the_diagnosis(ddxplus_interactive, held_out) -> None:
    method = _method(ddxplus_interactive, held_out, confidence=None, max_questions=10)
    first_ranks, last_ranks, top1 = [], [], 0
    for case in held_out:
        answer = method.answer(case)
        history = answer.result.ddx_history
        assert [s.questions_asked for s in history] == [0, 5, 10]
        asks = [step for step in answer.trace.steps if step.name == "ask"]
        asked = [step.input["evidence"] for step in asks]
        assert len(asked) == len(set(asked)) == 10
        assert case.meta["initial_evidence"].split("_@_")[0] not in asked
        # Every answer in the trace is the structured patient's answer to that question.
        patient = StructuredPatient(case, evidence_catalogue(case.meta["evidence_catalogue"]))
        assert [s.output["answer"] for s in asks] == [patient.ask(e).text for e in asked]
        first_ranks.append(_rank(history[0].ddx, case.gold.answer))
        last_ranks.append(_rank(history[-1].ddx, case.gold.answer))
        top1 += last_ranks[-1] == 1
        assert answer.evidence and all(e.kind == "patient" for e in answer.evidence)
    # On the dev patients this policy reaches GTPA@1 ≈ 0.98 after 10 questions; from the initial complaint
    # alone it is ≈ 0.35.
    assert top1 / len(held_out) >= 0.9
    assert sum(last_ranks) < sum(first_ranks)


def test_delta_progress_comes_from_the_logged_ranks(ddxplus_interactive, held_out) -> None:
    method = _method(ddxplus_interactive, held_out, confidence=None, max_questions=6, checkpoints=[2, 6])
    moved = 0
    for case in held_out[:10]:
        answer = method.answer(case)
        scores, turns = score_case(case, answer)
        ranks = [_rank(s.ddx, case.gold.answer) for s in answer.result.ddx_history]
        assert [t.scores["rank"] for t in turns] == ranks
        assert [t.questions_asked for t in turns] == [0, 2, 6]
        assert scores["delta_progress"] == (ranks[0] - ranks[-1]) / 2  # two steps between three turns
        assert scores["rank_gain"] == ranks[0] - ranks[-1]
        moved += ranks[0] != ranks[-1]
    assert moved >= 3


def test_confident_stop_keeps_every_checkpoint(ddxplus_interactive, held_out) -> None:
    method = _method(ddxplus_interactive, held_out, confidence=0.9)
    stopped_early = 0
    for case in held_out[:10]:
        answer = method.answer(case)
        stop = answer.trace.steps[-1]
        asked = stop.input["questions"]
        assert len(answer.result.ddx_history) == 1 + len(method.config.snapshot_points())
        if stop.output["reason"] == "confident":
            stopped_early += 1
            assert answer.result.ddx[0].probability >= 0.9
            assert asked < method.config.max_questions
            assert answer.result.ddx_history[-1].questions_asked == asked
    assert stopped_early >= 5


def test_bad_parameters_and_uncoded_cases_are_errors(ddxplus_interactive, held_out) -> None:
    with pytest.raises(InvalidInputError, match="checkpoints"):
        _method(ddxplus_interactive, held_out, max_questions=5, checkpoints=[10])
    with pytest.raises(InvalidInputError, match="meddx-experience parameters"):
        _method(ddxplus_interactive, held_out, questions=5)
    method = _method(ddxplus_interactive, held_out)
    with pytest.raises(InvalidInputError, match="no coded hidden profile"):
        method.answer(held_out[0].model_copy(update={"meta": {}}))


def test_min_questions_delays_a_confident_stop(ddxplus_interactive, held_out) -> None:
    method = _method(ddxplus_interactive, held_out, confidence=0.9, min_questions=7)
    for case in held_out[:5]:
        stop = method.answer(case).trace.steps[-1]
        assert stop.input["questions"] >= 7


def _answers(model, column: int) -> dict[int, frozenset[str] | None]:
    """Signature id → the answer it stands for (None: absent)."""
    return {g: answer for answer, g in model._signatures[column].items()}


def _likelihoods_by_hand(model, column: int) -> dict[int, np.ndarray]:
    """Signature id → P(that answer | d) for every diagnosis d, counted patient by patient: the m-estimate of
    the share of d's patients with the evidence, times, for each value seen in the base, the m-estimate of the
    share of those with (or without) it."""
    m, answers = model.smoothing, _answers(model, column)
    profiles = [answers[g] for g in model.answers[:, column]]
    values = sorted({v for p in profiles if p for v in p})
    given = [p for p in profiles if p is not None]
    pi, theta = [], {v: [] for v in values}
    for d in range(len(model.diagnoses)):
        mine = [p for p, label in zip(profiles, model.diagnosis, strict=True) if label == d]
        with_it = [p for p in mine if p is not None]
        pi.append((len(with_it) + m * len(given) / len(profiles)) / (len(mine) + m))
        for v in values:
            share = sum(v in p for p in given) / len(given)
            theta[v].append((sum(v in p for p in with_it) + m * share) / (len(with_it) + m))
    result = {}
    for g, answer in answers.items():
        if answer is None:
            result[g] = 1 - np.array(pi)
            continue
        likelihood = np.array(pi)
        for v in values:
            likelihood = likelihood * (np.array(theta[v]) if v in answer else 1 - np.array(theta[v]))
        result[g] = likelihood
    return result


def _expected_entropy_by_hand(model, weights, column: int) -> float:
    """The expected posterior entropy of asking one evidence, patient by patient (no vectorisation)."""
    rows = []
    for g, likelihood in _likelihoods_by_hand(model, column).items():
        same = np.where(model.answers[:, column] == g, 1.0, model.mismatch)
        rows.append(same * likelihood[model.diagnosis])
    predictive = np.array(rows) / np.array(rows).sum(axis=0)  # answers × patients
    joint = np.array([np.bincount(model.diagnosis, weights=row * weights) for row in predictive])
    joint = joint[joint.sum(axis=1) > 0]  # answers nobody can give (absent, when every patient has it)
    mass = joint.sum(axis=1)
    p = joint / mass[:, None]
    entropy = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0)).sum(axis=1)
    return float((mass * entropy).sum() / mass.sum())


def test_next_question_is_the_minimum_expected_entropy(ddxplus_interactive, held_out) -> None:
    base = ddxplus_interactive.experience([c.id for c in held_out])
    model = ExperienceModel(base, ddxplus_interactive.labels, mismatch=0.1, smoothing=0.1)
    weights = model.update(model.prior("F"), "E_201", True, frozenset())
    choice = model.next_question(weights, {"E_201"})
    by_hand = {
        e: _expected_entropy_by_hand(model, weights, c) for c, e in enumerate(model.evidences) if e != "E_201"
    }
    assert choice is not None
    assert choice.evidence == min(by_hand, key=by_hand.__getitem__)
    assert choice.expected_entropy == pytest.approx(by_hand[choice.evidence], rel=1e-9)


def test_a_value_set_nobody_gave_still_informs(ddxplus_interactive, held_out) -> None:
    """Held-out patients often describe their pain with a set of locations or characters that no past patient
    gave as a whole; each value still counts, and it points to the patient's own diagnosis."""
    model = ExperienceModel(
        ddxplus_interactive.experience([c.id for c in held_out]), ddxplus_interactive.labels
    )
    moved = []
    for case in held_out:
        patient = StructuredPatient(case, evidence_catalogue(case.meta["evidence_catalogue"]))
        start = model.update(
            model.prior(case.patient.demographics.sex), patient.initial().evidence, True, frozenset()
        )
        for evidence in ("E_54", "E_55", "E_57"):  # pain character, location, radiation
            reply = patient.ask(evidence)
            if reply.present and model.signature(evidence, True, reply.values) is None:
                after = model.update(start, evidence, True, reply.values)
                gold = case.gold.answer
                moved.append(model.distribution(after)[gold] - model.distribution(start)[gold])
    assert len(moved) >= 5
    assert all(change > 0 for change in moved)


def test_bad_smoothing_is_an_error(ddxplus_interactive, held_out) -> None:
    with pytest.raises(InvalidInputError, match="smoothing"):
        _method(ddxplus_interactive, held_out, smoothing=0)
    with pytest.raises(InvalidInputError, match="smoothing"):
        ExperienceModel(ddxplus_interactive.experience([]), ddxplus_interactive.labels, smoothing=-1)


def test_interactive_sessions_follow_the_same_policy(ddxplus_interactive, held_out) -> None:
    method = _method(ddxplus_interactive, held_out, use_age=False)
    config = ExperienceConfig(use_age=False)
    catalogue = evidence_catalogue(held_out[0].meta["evidence_catalogue"])
    interactive = InteractiveDdx(method.experience, catalogue, config)
    for case in held_out[:5]:
        answer = method.answer(case)
        patient = StructuredPatient(case, catalogue)
        session = interactive.start(case.patient.demographics.sex, patient.initial().evidence)
        asked = []
        while not session.done:
            reply = patient.ask(session.question.evidence)
            asked.append(reply.evidence)
            interactive.answer(session, "yes" if reply.present else "no", sorted(reply.values))
        assert asked == [s.input["evidence"] for s in answer.trace.steps if s.name == "ask"]
        assert session.stop_reason == answer.trace.steps[-1].output["reason"]
        assert [d.name for d in interactive.differential(session)] == [d.name for d in answer.result.ddx]


@pytest.mark.integration  # the benchmark script in a process of its own
def test_tuning_script_keeps_dev_and_eval_apart(data_dir) -> None:
    script = Path(__file__).parents[3] / "benchmarks" / "tune_experience.py"
    done = subprocess.run(
        [sys.executable, str(script), "--data", str(data_dir / "ddxplus"), "--quick", "--dev-size", "20"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["dev_eval_disjoint"] is True
    assert report["eval_samples"] == [
        {"limit": 200, "seed": 0, "cases": 200},
        {"limit": 200, "seed": 7, "cases": 200},
    ]
    assert report["dev"] == {"patients": 20, "folds": 5}
    assert set(report["chosen"]) >= {"mismatch", "smoothing", "other_sex", "confidence", "max_questions"}
