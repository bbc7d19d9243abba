"""The deterministic patient of coded datasets (DDXPlus): a question about evidence E is answered from the
patient's hidden coded profile, with no LLM, so interactive evaluations are exact and cheap. The patient
answers only the evidence it is asked about and remembers what it has revealed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.patients.loaders import EvidenceDecoder


@dataclass(frozen=True)
class Reply:
    """The patient's answer about one evidence: whether the profile has it (None: the profile does not say,
    as a published case says nothing of most findings), its coded values (empty for a plain "yes"), and the
    answer as the patient says it."""

    evidence: str
    present: bool | None
    values: frozenset[str]
    text: str


@lru_cache(maxsize=8)
def evidence_catalogue(path: str) -> EvidenceDecoder:
    """The questions and value meanings of a DDXPlus `release_evidences.json`, loaded once per path."""
    return EvidenceDecoder.from_file(Path(path))


class StructuredPatient:
    """Holds a coded case's hidden profile (`meta["hidden_evidence"]`) and answers one evidence at a time."""

    def __init__(self, case: Case, catalogue: EvidenceDecoder) -> None:
        hidden = case.meta.get("hidden_evidence")
        initial = case.meta.get("initial_evidence")
        if not isinstance(hidden, list) or not isinstance(initial, str) or not initial:
            raise InvalidInputError(
                f"case {case.id} has no coded hidden profile (meta hidden_evidence / initial_evidence): "
                "the structured patient needs a coded interactive dataset such as ddxplus-interactive"
            )
        self.catalogue = catalogue
        self._values = catalogue.values_by_evidence(hidden)
        self.initial_evidence = catalogue.split(initial)[0]
        self.revealed: dict[str, Reply] = {}

    def initial(self) -> Reply:
        """What the clinician hears first: the initial evidence (not counted as a question)."""
        return self.ask(self.initial_evidence)

    def opening(self) -> list[Reply]:
        """What the clinician hears first, as answers."""
        return [self.initial()]

    def question(self, evidence: str) -> str:
        return self.catalogue.question(evidence) or evidence

    def ask(self, evidence: str) -> Reply:
        """The answer about `evidence` alone, as coded: an evidence absent from the profile is answered "No";
        a coded "none" value (e.g. pain that radiates "nowhere") is said as it is, since only a patient with
        the pain is coded with it."""
        if self.catalogue.question(evidence) is None:
            raise InvalidInputError(f"unknown evidence {evidence!r}: not in the evidence catalogue")
        present = evidence in self._values
        values = self._values.get(evidence, frozenset())
        if not present:
            text = "No."
        elif not values:
            text = "Yes."
        else:
            text = ", ".join(sorted(self.catalogue.value_text(evidence, v) for v in values)) + "."
        reply = Reply(evidence=evidence, present=present, values=values, text=text)
        self.revealed[evidence] = reply
        return reply
