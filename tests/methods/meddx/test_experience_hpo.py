"""meddx-experience on published rare-disease patients (phenopacket-store, `phenopackets-interactive`): the
structured HPO patient answers, the other cohorts' patients are the base (a case's own cohort is left out
with it), an "I don't know" teaches nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.core.settings import Settings
from clinrag.eval.datasets.phenopackets import cohort_names
from clinrag.eval.datasets.phenopackets_interactive import load_phenopackets_interactive
from clinrag.methods.base import MethodContext
from clinrag.methods.meddx.experience import SPEC
from clinrag.methods.meddx.hpo_patient import HpoPatient
from clinrag.methods.meddx.interviewee import UNKNOWN
from clinrag.terms.hpo import is_hpo_id


@pytest.fixture(scope="module")
def dataset(data_dir: Path):
    store = data_dir / "phenopackets"
    return load_phenopackets_interactive(store, sorted(cohort_names(store))[:40])


def test_a_cases_cohort_leaves_the_base_with_it(dataset) -> None:
    case = dataset.cases[0]
    cohort = case.meta["cohort"]
    base = dataset.experience([case.id])
    assert base and all(dataset.groups[r.id] != cohort for r in base)
    others = {c.id for c in dataset.cases if c.meta["cohort"] != cohort}
    assert {r.id for r in base} == others
    record = next(r for r in dataset.records if r.id == case.id)  # every packet whole, as a past patient
    assert record.codes["hpo"] == case.meta["hidden_hpo"] and dataset.labels[case.id] == [case.gold.answer]


def test_questions_are_hpo_terms_answered_from_the_packet(dataset) -> None:
    case = max(dataset.cases, key=lambda c: len(c.meta["hidden_hpo"]))
    context = MethodContext(
        settings=Settings(),
        params={"max_questions": 8, "confidence": None, "min_patients": 2},
        experience=dataset.experience([case.id]),
        labels=dataset.labels,
    )
    answer = SPEC.build(context).answer(case)
    (initial,) = [s for s in answer.trace.steps if s.name == "initial"]
    assert initial.input["evidence"].split(",") == case.patient.codes["hpo"]  # what was heard first
    asks = [s for s in answer.trace.steps if s.name == "ask"]
    asked = [s.input["evidence"] for s in asks]
    assert len(asked) == len(set(asked)) == 8 and all(is_hpo_id(term) for term in asked)
    patient = HpoPatient(case)
    assert [s.output["answer"] for s in asks] == [patient.ask(term).text for term in asked]
    assert all(s.input["question"].startswith("Do you have ") for s in asks)
    tops = [initial.output["top"], *(s.output["top"] for s in asks)]
    for before, step, after in zip(tops, asks, tops[1:], strict=False):
        if step.output["answer"] == UNKNOWN:  # nothing learnt
            assert after == before
    assert answer.result.ddx and [s.questions_asked for s in answer.result.ddx_history] == [0, 5, 8]
