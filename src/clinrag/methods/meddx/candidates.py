"""Candidate diagnoses for a case without options — a rare-disease patient, whose answer space is the
12,000 diseases of the packaged knowledge, too many for a language model to score one by one: the
consultation's leading diseases on what is known of the patient so far (the presentation's words, and the
HPO terms shown or revealed), for the diagnosis agent to rank. MEDDxAgent ranks a dataset's given
candidates; this is where clinrag proposes them itself, from cited knowledge."""

from __future__ import annotations

from clinrag.core.models import HPO_EXCLUDED, HPO_OBSERVED, HPO_ONSET, Case
from clinrag.methods.consult.consultant import Consultant
from clinrag.methods.consult.differential import leading


def knowledge_candidates(consultant: Consultant, case: Case, n: int) -> dict[str, str]:
    """The case's `n` candidate diagnoses, as options (name → name)."""
    patient = case.patient
    text = patient.initial_presentation if patient is not None else case.question
    codes = patient.codes if patient is not None else {}
    state = consultant.start(
        text,
        case.language,
        present=[*codes.get(HPO_OBSERVED, ()), *codes.get(HPO_ONSET, ())],
        absent=codes.get(HPO_EXCLUDED, ()),
    )
    given = patient.demographics.sex if patient is not None else None
    state.findings.sex = state.findings.sex or (given if given in ("female", "male") else None)
    diseases = consultant.differential.model.diseases
    return {diseases[row].name: diseases[row].name for row in leading(consultant.posterior(state), n)}
