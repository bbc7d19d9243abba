"""What must not be missed: the dangerous diagnoses still in play (those the can't-miss table names, by ICD-10
code, and those whose source rates them severe) with what rules them in or out, and the red-flag findings the
patient has, which call for urgent care whatever the diagnosis."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from clinrag.consult.clinical import Urgency, cite_table
from clinrag.consult.facts import cite_fact, cite_severity
from clinrag.consult.reason.differential import Differential
from clinrag.consult.understand.finding_names import display_name
from clinrag.consult.understand.vocabulary import Concept, reachable
from clinrag.core.models import Evidence
from clinrag.graph.schema import Relation

SEVERE = 2  # a source's severity (1: most severe … 5: least, as DDXPlus rates) that makes one dangerous
SHOWN_RULE_OUT = 3  # the knowledge's tests named for ruling a dangerous diagnosis in or out


class DangerOut(BaseModel):
    """A dangerous diagnosis that still has a non-negligible probability: what rules it in or out, and how
    urgently to act."""

    name: str
    probability: float = Field(ge=0.0, le=1.0)
    urgency: Urgency
    rule_out: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)


class RedFlagOut(BaseModel):
    """A finding the patient has that calls for urgent care whatever the diagnosis."""

    concept: str
    finding: str
    why: str
    urgency: Urgency
    evidence: list[str] = Field(default_factory=list)


def dangerous_diseases(differential: Differential) -> np.ndarray:
    """Per disease of the model: whether it is a diagnosis not to miss (the can't-miss table names it, or
    its source rates it severe)."""
    tables = differential.clinical
    return np.array(
        [
            tables.danger_of(disease) is not None
            or (disease.severity is not None and disease.severity <= SEVERE)
            for disease in differential.model.diseases
        ],
        dtype=bool,
    )


def in_play(dangerous: np.ndarray, posterior: np.ndarray, cant_miss_above: float) -> np.ndarray:
    """The rows of the dangerous diagnoses at `cant_miss_above` or more."""
    return np.flatnonzero(dangerous & (posterior >= cant_miss_above))


def dangers(
    differential: Differential,
    dangerous: np.ndarray,
    posterior: np.ndarray,
    cant_miss_above: float,
    evidence: dict[str, Evidence],
) -> list[DangerOut]:
    """The dangerous diagnoses at `cant_miss_above` or more, most probable first: those the can't-miss
    table names (by ICD-10 code), and those whose source rates them severe (DDXPlus severity 1 or 2)."""
    found = [
        _danger(differential, row, float(posterior[row]), evidence)
        for row in in_play(dangerous, posterior, cant_miss_above)
    ]
    return sorted(found, key=lambda d: -d.probability)


def _danger(
    differential: Differential, row: int, probability: float, evidence: dict[str, Evidence]
) -> DangerOut:
    model = differential.model
    disease = model.diseases[row]
    danger = differential.clinical.danger_of(disease)
    if danger is not None:
        cited = cite_table(
            evidence,
            f"clinical:cant_miss:{danger.icd10}:{danger.name}",
            f"{danger.name}: a diagnosis not to miss ({danger.urgency}); "
            f"ruled in or out by {', '.join(danger.rule_out)}",
            "cant_miss",
            title=danger.source,
            icd10=danger.icd10,
        )
        urgency: Urgency = danger.urgency
        rule_out, cites = list(danger.rule_out), [cited]
    else:  # rated severe by its source
        urgency = "emergency" if disease.severity == 1 else "urgent"
        rule_out = disease.tests[:SHOWN_RULE_OUT]
        cites = [cite_severity(model, disease, evidence)]
        cites += [
            cite_fact(model, differential.vocabulary, disease, Relation.RECOMMEND_TEST, test, evidence)
            for test in rule_out
        ]
    return DangerOut(
        name=disease.name,
        probability=min(1.0, probability),
        urgency=urgency,
        rule_out=rule_out,
        evidence=cites,
    )


def red_flags(
    differential: Differential,
    concepts: dict[str, Concept],
    known: dict[str, bool],
    age: float | None,
    self_told: bool,
    evidence: dict[str, Evidence],
) -> list[RedFlagOut]:
    """The red-flag findings among those present (a narrower finding raises its broader one's flag)."""
    parents = differential.vocabulary.parents
    reached: dict[str, str] = {}  # an HPO code reached → the present concept that reaches it
    for concept, present in known.items():
        for above in reachable(concept, parents) if present else ():
            for code in concepts[above].codes if above in concepts else ():
                reached.setdefault(code, concept)
    flags = []
    for flag in differential.clinical.flags_raised(set(reached), age, self_told):
        concept = reached[flag.hpo]
        cited = cite_table(
            evidence,
            f"clinical:red_flag:{flag.hpo}",
            f"{flag.label}: a red flag ({flag.why}; {flag.urgency})",
            "red_flags",
            title=flag.source,
            hpo=flag.hpo,
        )
        flags.append(
            RedFlagOut(
                concept=concept,
                finding=display_name(concepts[concept]),
                why=flag.why,
                urgency=flag.urgency,
                evidence=[f"finding:{concept}", cited],
            )
        )
    return flags
