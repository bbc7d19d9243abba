"""Candidate diagnoses for a case without options — a rare-disease patient, whose answer space is the
12,000 diseases of the packaged knowledge, too many for a language model to score one by one: the
consultation's leading diseases on what is known of the patient so far (the presentation's words, and the
HPO terms shown or revealed), for the diagnosis agent to rank. MEDDxAgent ranks a dataset's given
candidates; this is where clinrag proposes them itself, from cited knowledge."""

from __future__ import annotations

from clinrag.consult.consultant import Consultant
from clinrag.consult.reason.differential import leading
from clinrag.core.models import Case
from clinrag.methods.consult import read_case


def knowledge_candidates(consultant: Consultant, case: Case, n: int) -> dict[str, str]:
    """The case's `n` candidate diagnoses, as options (name → name)."""
    diseases = consultant.differential.model.diseases
    rows = leading(consultant.posterior(read_case(consultant, case)), n)
    return {diseases[row].name: diseases[row].name for row in rows}
