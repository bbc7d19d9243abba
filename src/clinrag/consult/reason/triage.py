"""Where to go and how soon: one of the four dispositions symptom checkers and NHS 111 give, decided from the
person first, then from the differential.

1. The person: words telling of a crisis (an overdose, self-harm, …: `clinical_tables/crisis.jsonl`) are an
   emergency whatever else is said; a red flag (`red_flags.jsonl`) asks for the care its table names.
2. The differential: each condition still likely weighs with the care a typical presentation of it needs
   (the knowledge base's disposition, else its danger, else its source's severity). Emergency conditions
   holding `emergency_above` (`TriageSettings`) of the probability make it an emergency; holding
   `danger_above` (a small chance of a condition that kills, where a small chance of a mild one does not
   count) or, with the urgent ones, `urgent_above`, they ask to be seen today; self-care conditions holding
   `self_care_above` let the person look after themselves.
3. Never the least urgent advice from ignorance: with nothing understood the person is told it could not be
   assessed and to be seen as `not_assessed` says; an answer that abstains is never `self_care`.

Every level comes with safety-netting: the changes (the leading conditions' red flags) that mean seeking help
at once."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from clinrag.conditions.records import Disposition
from clinrag.consult.clinical import ClinicalTables, cite_table
from clinrag.consult.diseases import Disease
from clinrag.consult.understand.crises import CrisisMention
from clinrag.core.models import Evidence

LEVELS: tuple[Disposition, ...] = ("emergency", "urgent", "soon", "self_care")  # most urgent first
UNRATED: Disposition = "soon"  # a condition nothing rates: to be seen by a doctor, not at home


class CrisisOut(BaseModel):
    crisis: str
    label: str
    advice: str  # the template of its first words: `crisis_<advice>`
    said: str  # the person's words that tell of it
    evidence: list[str] = Field(default_factory=list)


class TriageReason(BaseModel):
    kind: Literal["crisis", "red_flag", "differential", "not_assessed", "abstained"]
    disposition: Disposition
    text: str  # why, in English (the answer's sentences say it in the consultation's language)
    evidence: list[str] = Field(default_factory=list)


class WatchFor(BaseModel):
    label: str  # the finding's name in its source (HPO's label: what translations are keyed by)
    name: str  # … in plain English
    evidence: list[str] = Field(default_factory=list)  # the knowledge that names it a red flag


class TriageOut(BaseModel):
    disposition: Disposition = "urgent"
    assessed: bool = True  # False: too little was understood to judge; the disposition is then a floor
    crises: list[CrisisOut] = Field(default_factory=list)
    reasons: list[TriageReason] = Field(default_factory=list)  # each rule's level, most urgent first
    shares: dict[str, float] = Field(default_factory=dict)  # the differential's probability at each level
    watch_for: list[WatchFor] = Field(default_factory=list)  # changes that mean seeking help at once


@dataclass(frozen=True)
class TriageSettings:
    """The shares of the differential that raise or lower care (see the module's docstring), and the care a
    text nothing was understood of is sent to."""

    # chosen on the tuning vignettes only (benchmarks/bench_triage.py --tune)
    emergency_above: float = 0.2
    danger_above: float = 0.1
    urgent_above: float = 0.2
    self_care_above: float = 0.3
    not_assessed: Disposition = "urgent"
    watch_for: int = 6  # the safety net's changes to watch for, at most

    def __post_init__(self) -> None:
        if self.not_assessed == "self_care":
            raise ValueError("a text that was not understood is never told to look after itself")


class Triage:
    def __init__(self, tables: ClinicalTables, settings: TriageSettings | None = None) -> None:
        self.tables = tables
        self.settings = settings if settings is not None else TriageSettings()

    def levels(self, diseases: Sequence[Disease]) -> np.ndarray:
        """Per disease: the index in `LEVELS` of the care a typical presentation needs."""
        return np.array(
            [LEVELS.index(self.tables.disposition_of(disease) or UNRATED) for disease in diseases], dtype=int
        )

    def shares(self, posterior: np.ndarray, levels: np.ndarray) -> dict[str, float]:
        """The probability of the differential at each level."""
        total = float(posterior.sum()) or 1.0
        return {
            level: round(float(posterior[levels == i].sum()) / total, 4) for i, level in enumerate(LEVELS)
        }

    def decide(
        self,
        *,
        crises: Sequence[CrisisMention],
        red_flags: Sequence[tuple[Disposition, str, list[str]]],
        shares: dict[str, float] | None,
        understood: bool,
        abstained: bool,
        leading: Sequence[Disease] = (),
        present: Collection[str] = (),
        plain: Callable[[str], str] = str.lower,
        evidence: dict[str, Evidence] | None = None,
    ) -> TriageOut:
        """The disposition from the crises told of, the red flags raised (`(disposition, finding, evidence)`),
        the differential's `shares` (None without one), whether any finding was understood, whether the
        answer abstained, and the `leading` diagnoses whose red flags make the safety net (less the findings
        `present` already, by name; each in `plain` words)."""
        evidence = evidence if evidence is not None else {}
        out = TriageOut(shares=shares or {})
        for mention in crises:
            crisis = self.tables.crises[mention.crisis]
            cited = cite_table(
                evidence,
                f"clinical:crisis:{crisis.crisis}",
                f"{crisis.label}: call emergency services ({crisis.why})",
                "crisis",
                title=crisis.source,
                crisis=crisis.crisis,
            )
            out.crises.append(
                CrisisOut(
                    crisis=crisis.crisis,
                    label=crisis.label,
                    advice=crisis.advice,
                    said=mention.text,
                    evidence=[cited],
                )
            )
            out.reasons.append(
                TriageReason(kind="crisis", disposition="emergency", text=crisis.label, evidence=[cited])
            )
        out.reasons += [
            TriageReason(kind="red_flag", disposition=level, text=finding, evidence=cited)
            for level, finding, cited in red_flags
        ]
        if shares is not None:
            out.reasons += self._differential(shares)
        if not understood and not out.crises:
            out.assessed = False
            out.reasons.append(
                TriageReason(
                    kind="not_assessed",
                    disposition=self.settings.not_assessed,
                    text="no finding the person has was understood",
                )
            )
        elif abstained:
            out.reasons.append(
                TriageReason(kind="abstained", disposition="soon", text="no diagnosis is likely enough")
            )
        out.reasons.sort(key=lambda reason: LEVELS.index(reason.disposition))
        out.disposition = out.reasons[0].disposition if out.reasons else "soon"
        watched: dict[str, WatchFor] = {}
        for disease in leading:
            labels, documents = self.tables.watch_for_of(disease)
            cited = f"clinical:watch_for:{disease.name}"
            for label in labels:
                if label.lower() in present or len(watched) >= self.settings.watch_for:
                    continue
                cite_table(
                    evidence,
                    cited,
                    f"{disease.name}: seek help at once with {', '.join(labels).lower()}",
                    "watch_for",
                    title=documents,
                    condition=disease.name,
                )
                watched.setdefault(label, WatchFor(label=label, name=plain(label))).evidence.append(cited)
        out.watch_for = list(watched.values())
        return out

    def _differential(self, shares: dict[str, float]) -> list[TriageReason]:
        settings = self.settings
        emergency = shares["emergency"]
        urgent = emergency + shares["urgent"]
        if emergency >= settings.emergency_above:
            level: Disposition = "emergency"
            why = f"conditions needing emergency care hold {emergency:.0%} of the differential"
        elif emergency >= settings.danger_above:
            level, why = "urgent", f"a condition needing emergency care has {emergency:.0%}"
        elif urgent >= settings.urgent_above:
            level, why = "urgent", f"conditions needing care today hold {urgent:.0%} of the differential"
        elif shares["self_care"] >= settings.self_care_above:
            level = "self_care"
            why = (
                f"conditions usually looked after at home hold {shares['self_care']:.0%} of the differential"
            )
        else:
            level, why = "soon", "the likely conditions need a doctor, not urgently"
        return [TriageReason(kind="differential", disposition=level, text=why)]
