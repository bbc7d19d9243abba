"""The structured patient answers from the real DDXPlus profiles, one evidence at a time."""

from __future__ import annotations

import random

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.methods.meddx.structured_patient import StructuredPatient, evidence_catalogue


def _patient(case: Case) -> StructuredPatient:
    return StructuredPatient(case, evidence_catalogue(case.meta["evidence_catalogue"]))


def _only(case: Case, evidence: str) -> Case:
    """The same case with a hidden profile holding nothing but `evidence` (and the initial complaint)."""
    kept = [c for c in case.meta["hidden_evidence"] if c.split("_@_")[0] == evidence]
    return case.model_copy(update={"meta": case.meta | {"hidden_evidence": kept}})


def test_answers_depend_on_the_asked_evidence_alone(ddxplus_interactive) -> None:
    """Each reply equals the reply of a patient who holds only the asked evidence: nothing else leaks."""
    rng = random.Random(3)
    catalogue = evidence_catalogue(ddxplus_interactive.cases[0].meta["evidence_catalogue"])
    names = sorted(catalogue.evidences)
    checked_present = 0
    for case in rng.sample(ddxplus_interactive.cases, 40):
        patient = _patient(case)
        hidden = {code.split("_@_")[0] for code in case.meta["hidden_evidence"]}
        asked = rng.sample(sorted(hidden), min(3, len(hidden))) + rng.sample(names, 5)
        for evidence in asked:
            reply = patient.ask(evidence)
            assert reply == _patient(_only(case, evidence)).ask(evidence)
            assert reply.present == (evidence in hidden)
            checked_present += reply.present
        assert set(patient.revealed) == set(asked)
    assert checked_present >= 100


def test_replies_are_the_decoded_profile(ddxplus_interactive) -> None:
    case = next(
        c for c in ddxplus_interactive.cases if any("_@_" in code for code in c.meta["hidden_evidence"])
    )
    patient = _patient(case)
    findings = dict(patient.catalogue.decode(case.meta["hidden_evidence"]))
    for code in case.meta["hidden_evidence"]:
        name = code.split("_@_")[0]
        reply = patient.ask(name)
        # The decoded finding is "<question> <values>"; the reply is those values as the patient says them.
        said = findings[name].removeprefix(patient.catalogue.question(name) + " ")
        assert sorted(said.split(", ")) == sorted(reply.text.removesuffix(".").split(", "))
    absent = next(n for n in sorted(patient.catalogue.evidences) if n not in findings)
    assert patient.ask(absent).text == "No."
    assert patient.initial().evidence == case.meta["initial_evidence"].split("_@_")[0]


def test_uncoded_case_or_unknown_evidence_is_an_error(ddxplus_interactive) -> None:
    case = ddxplus_interactive.cases[0]
    with pytest.raises(InvalidInputError, match="coded hidden profile"):
        StructuredPatient(
            case.model_copy(update={"meta": {}}), evidence_catalogue(case.meta["evidence_catalogue"])
        )
    with pytest.raises(InvalidInputError, match="unknown evidence"):
        _patient(case).ask("E_99999")
