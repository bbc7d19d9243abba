"""The deterministic patient of HPO-coded cases (`phenopackets-interactive`, or any case whose patient has HPO
codes): a question about an HPO term is answered from the published case, with no LLM. A term the case
shows, or a broader one, is a "yes" (a patient with arachnodactyly has an abnormality of the fingers); a
term it excludes, or a narrower one, is a "no"; anything else is "I don't know", for a published case says
nothing of it. A free-text question is read for the terms it names by the consultation's finding extractor
(`HpoInterviewee`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from clinrag.consult.consultant import Consultant
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import HIDDEN_HPO_EXCLUDED, HIDDEN_HPO_OBSERVED, HPO_EXCLUDED, HPO_OBSERVED, Case
from clinrag.core.usage import Usage
from clinrag.methods.meddx.interviewee import UNKNOWN, Exchange
from clinrag.methods.meddx.structured_patient import Reply
from clinrag.terms.hpo import ancestors, descendants, hpo_terms, is_hpo_id

ANSWERS = {True: "Yes.", False: "No.", None: UNKNOWN}


class HpoPatient:
    """Holds a case's HPO terms — the hidden profile of an interactive case, else its codes — and answers one
    term at a time, remembering what it revealed."""

    def __init__(self, case: Case) -> None:
        codes = case.patient.codes if case.patient is not None else {}
        shown = case.meta.get(HIDDEN_HPO_OBSERVED, codes.get(HPO_OBSERVED)) or []
        excluded = case.meta.get(HIDDEN_HPO_EXCLUDED, codes.get(HPO_EXCLUDED)) or []
        if not shown and not excluded:
            raise InvalidInputError(
                f"case {case.id} has no HPO terms for the structured patient to answer from"
            )
        self.initial = list(codes.get(HPO_OBSERVED, []))  # what the clinician heard first
        self._has = {above for term in shown for above in (term, *ancestors(term))}
        self._lacks = {below for term in excluded for below in (term, *descendants(term))}
        self.revealed: dict[str, Reply] = {}

    def ask(self, term: str) -> Reply:
        present = True if term in self._has else False if term in self._lacks else None
        reply = Reply(term, present, frozenset(), ANSWERS[present])
        self.revealed[term] = reply
        return reply

    def opening(self) -> list[Reply]:
        """What the clinician hears first: the terms shown at first, as answers."""
        return [self.ask(term) for term in self.initial]

    def question(self, term: str) -> str:
        known = hpo_terms().get(term)
        return f"Do you have {known.name.lower() if known else term}?"


def terms_named(consultant: Consultant) -> Callable[[str], list[str]]:
    """The HPO terms a question names, as the consultant's English finding extractor reads it."""
    extractor = consultant.extractors("en")

    def read(question: str) -> list[str]:
        found = extractor.extract(question).findings
        return [code for f in found for code in consultant.concepts[f.concept_id].codes if is_hpo_id(code)]

    return read


@dataclass
class HpoInterviewee:
    """The HPO patient answering a doctor's free-text questions: `read` gives the HPO terms a question names;
    the answer is about the first of them the case says something of."""

    patient: HpoPatient
    read: Callable[[str], list[str]]
    usage: Usage = field(default_factory=Usage)  # no model is called
    codes_field: str = HPO_OBSERVED

    async def reply(self, question: str) -> Exchange:
        replies = [self.patient.ask(term) for term in self.read(question)]
        said = next((reply for reply in replies if reply.present is not None), None)
        if said is None:
            return Exchange(question, UNKNOWN, replies[0].evidence if replies else None)
        return Exchange(question, said.text, said.evidence)

    def codes(self) -> list[str]:
        """The terms known present so far: those shown first and those revealed."""
        revealed = [term for term, reply in self.patient.revealed.items() if reply.present]
        return list(dict.fromkeys([*self.patient.initial, *revealed]))
