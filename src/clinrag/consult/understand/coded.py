"""Findings given as codes (HPO terms "HP:0001166", a patient record's codes) beside those read from the
text: a code no concept has is listed as not understood, an HPO onset class says when the illness began."""

from __future__ import annotations

from collections.abc import Sequence

from clinrag.consult.understand.finding_types import Finding, Findings
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.terms.hpo import ONSET_CLASSES


def with_codes(
    vocabulary: Vocabulary, findings: Findings, present: Sequence[str], absent: Sequence[str]
) -> Findings:
    """`findings` with the concepts of the codes `present` and `absent` (a code given both ways: present);
    what the codes say replaces what the text said of the same concept."""
    coded: dict[str, Finding] = {}
    unknown = []
    onsets = [code for code in present if code in ONSET_CLASSES]  # when the illness began
    for status, codes in (("absent", absent), ("present", present)):  # a code given both ways: present
        for code in codes:
            if code in onsets:
                continue
            concept = vocabulary.by_code(code)
            if concept is None:
                unknown.append(code)
                continue
            coded[concept.id] = Finding(
                concept_id=concept.id,
                concept=concept.name,
                ids=list(concept.ids),
                status=status,  # type: ignore[arg-type]
                text=code,
                start=0,
                end=0,
            )
    said = [f for f in findings.findings if f.concept_id not in coded]  # the codes say it exactly
    return findings.model_copy(
        update={
            "findings": [*coded.values(), *said],
            "not_understood": [*findings.not_understood, *dict.fromkeys(unknown)],
            "onset_classes": list(dict.fromkeys([*findings.onset_classes, *onsets])),
        }
    )
