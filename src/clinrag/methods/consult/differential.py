"""The differential: a probability for every disease given the findings heard so far, by Bayes' rule over the
disease knowledge (naive Bayes: findings independent given the disease).

P(d | F) ∝ π(d) · Π_{f present} P(f | d) · Π_{f absent} (1 − P(f | d)), where P(f | d) is
- the frequency of f among past patients with d, when a patient base gives d's patients (add-one
  smoothed), for the findings those patients were asked about;
- else, when the knowledge lists f for d, `typical` (0.8) — or less for a disease listed with many findings:
  a profile of 40 phenotypes (HPO annotates a disease's whole spectrum) describes what its patients may
  show, and one patient shows a few of them, so P(f | d) = min(typical, spectrum / |findings of d|) with
  `spectrum` 4 (the disease table lists 5–6 findings a disease, each typical);
- times 1 − `salience_step` (0.1) per place a finding stands after the first when the source lists a
  disease's findings most characteristic first (the packaged disease table, see `diseases`): chest pain,
  listed first for angina and fourth for asthma, says more for angina (floor: half);
- times `broader_share` (0.5) when it lists only the broader finding (a disease with "cough" explains a
  "barking cough", but not every cough barks);
- and `leak` (0.02) when it does not list f: a finding a disease does not explain is rare, not impossible
  (a second problem, a knowledge gap).
π(d) is the diagnoses' frequency in the patient base (smoothed) where there is one, else the base rates of
`DiseaseModel`. Uncertain findings change nothing. `typical`, `spectrum`, `leak` and `salience_step` were set
a priori, not fitted to any evaluation set (the salience order was then checked on the development
presentations, tests/data/consult/presentations_dev.jsonl).

What the patient did not mention says a little too: a patient with d who has finding f mentions it, unasked,
with probability `mention_rate` (α), so each finding not mentioned multiplies by 1 − α · P(f | d) — a disease
whose patients nearly always have f loses some weight when f goes unsaid. The findings counted are those the
past patients were asked about (with a patient base), else those the knowledge lists (each at its listed
likelihood, without the hierarchy). α = 0.2, a conservative a priori value: a first account mentions a small
part of what a patient has; on the DDXPlus development samples (`benchmarks/dev_consult_text.py`, which never
sees bench_consult's sample) GTPA@1 from text rises from 0.88 / 0.89 (α = 0) to 0.915 / 0.935, and larger α
gives about the same.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clinrag.methods.consult.diseases import DiseaseModel, sex_of
from clinrag.methods.consult.vocabulary import Vocabulary, reachable
from clinrag.patients.loaders import EvidenceDecoder
from clinrag.patients.record import PatientRecord


@dataclass(frozen=True)
class LikelihoodSettings:
    """The settings of the likelihoods (see the module docstring), set a priori."""

    typical: float = 0.8
    spectrum: float = 4.0
    leak: float = 0.02
    mention_rate: float = 0.2
    salience_step: float = 0.1
    salience_floor: float = 0.5
    broader_share: float = 0.5
    other_sex: float = 0.01  # the prior factor of a condition of the other sex (misread sex: not zero)

    def __post_init__(self) -> None:
        if not 0 <= self.mention_rate < 1:
            raise ValueError(f"mention_rate must be in [0, 1), got {self.mention_rate}")


@dataclass(frozen=True)
class Experience:
    """Past patients as counts: diagnoses, and how many patients of each diagnosis had each finding."""

    patients: np.ndarray  # per disease of the model: patients with that diagnosis
    findings: dict[str, np.ndarray]  # concept id → per disease: patients who had it
    asked: frozenset[str]  # the concepts every past patient was asked about (absent when not reported)
    contributions: dict[str, tuple[int, tuple[str, ...]]]  # record id → (disease row, concept ids)

    @classmethod
    def count(
        cls,
        records: Sequence[PatientRecord],
        labels: Mapping[str, list[str]],
        model: DiseaseModel,
        vocabulary: Vocabulary,
        *,
        field: str = "evidence",
    ) -> Experience | None:
        """The counts over the records whose label is a disease of the model (None if none is); a coded
        finding (`E_1`, or the value `E_55_@_V_129`) is the concept the vocabulary gives that code."""
        index = {d.name: i for i, d in enumerate(model.diseases)}
        patients = np.zeros(len(model.diseases))
        findings: dict[str, np.ndarray] = {}
        contributions = {}
        for record in records:
            label = (labels.get(record.id) or [None])[0]
            if label not in index:
                continue
            row = index[label]
            # a coded value ("E_55_@_V_129", pain in the right ear) is its evidence and, when the vocabulary
            # has it, its own concept
            codes = {
                part
                for code in record.codes.get(field, ())
                for part in (code, EvidenceDecoder.split(code)[0])
            }
            concepts = tuple(sorted({c.id for code in codes if (c := vocabulary.by_code(code)) is not None}))
            contributions[record.id] = (row, concepts)
            patients[row] += 1
            for concept in concepts:
                findings.setdefault(concept, np.zeros(len(model.diseases)))[row] += 1
        if not patients.sum():
            return None
        return cls(patients, findings, frozenset(findings), contributions)

    def without(self, record_id: str) -> Experience:
        """The counts with one past patient left out (the case itself, when it is in the base)."""
        if record_id not in self.contributions:
            return self
        row, concepts = self.contributions[record_id]
        patients = self.patients.copy()
        patients[row] -= 1
        findings = dict(self.findings)
        for concept in concepts:
            findings[concept] = findings[concept].copy()
            findings[concept][row] -= 1
        contributions = {key: value for key, value in self.contributions.items() if key != record_id}
        return Experience(patients, findings, self.asked, contributions)


class Differential:
    """Posterior probabilities of the model's diseases; `likelihood(concept)` is P(f | d) for every d."""

    def __init__(
        self,
        model: DiseaseModel,
        vocabulary: Vocabulary,
        experience: Experience | None = None,
        settings: LikelihoodSettings = LikelihoodSettings(),
    ) -> None:
        self.model = model
        self.vocabulary = vocabulary
        # concept id → (diseases listing it, the symptom name they list it under)
        self.listed: dict[str, dict[int, str]] = {}
        concept_of: dict[str, str | None] = {}  # symptom name → concept id (HPO diseases share most names)
        for row, disease in enumerate(model.diseases):
            for symptom in disease.symptoms:
                if symptom not in concept_of:
                    concept = vocabulary.lookup(symptom)
                    concept_of[symptom] = concept.id if concept is not None else None
                if (concept_id := concept_of[symptom]) is not None:
                    self.listed.setdefault(concept_id, {}).setdefault(row, symptom)
        self._parents = {c.id: c.parents for c in vocabulary.concepts}
        self._children: dict[str, list[str]] = {}
        for concept in vocabulary.concepts:
            for parent in concept.parents:
                self._children.setdefault(parent, []).append(concept.id)
        self._explains: dict[str, dict[int, str]] = {}
        self._broader: dict[str, set[int]] = {}  # the diseases `explaining` a finding by its broader one
        self._base_rates = np.asarray(model.base_rates())
        self._sexes = np.array([sex_of(disease.icd10) or "" for disease in model.diseases])
        self._settle(settings)
        self._use(experience)

    def _settle(self, settings: LikelihoodSettings) -> None:
        """The likelihood settings, and what is computed from them alone."""
        self.settings = settings
        self.leak = settings.leak
        self.mention_rate = settings.mention_rate
        listed_findings = np.array([max(len(d.symptoms), 1) for d in self.model.diseases], dtype=float)
        self._typical = np.minimum(settings.typical, settings.spectrum / listed_findings)
        # disease row → symptom name → its likelihood's factor for the place it is listed in
        self._salience = {
            row: {
                name: max(1.0 - settings.salience_step * place, settings.salience_floor)
                for place, name in enumerate(disease.symptoms[: disease.ranked])
            }
            for row, disease in enumerate(self.model.diseases)
            if disease.ranked
        }
        self._silence: np.ndarray | None = None  # the sum over every finding counted, when first needed

    def with_settings(self, settings: LikelihoodSettings) -> Differential:
        """This differential with other likelihood settings; the tables built from the knowledge (which
        disease lists which finding, the hierarchy) are shared."""
        other = copy.copy(self)
        other._settle(settings)
        return other

    def _use(self, experience: Experience | None) -> None:
        self.experience = experience
        prior = self._base_rates
        if experience is not None:
            seen = experience.patients > 0
            frequency = (experience.patients + 1) / (experience.patients.sum() + seen.sum())
            # Diseases the patient base knows take its frequencies; the others keep their base-rate share.
            prior = np.where(seen, frequency * prior[seen].sum(), prior)
        self.log_prior = np.log(prior / prior.sum())
        self._observed = (
            experience.patients > 0 if experience is not None else np.zeros(len(prior), dtype=bool)
        )
        self._silence: np.ndarray | None = None  # the sum over every finding counted, when first needed

    def leaving_out(self, record_id: str) -> Differential:
        """This differential with one past patient left out of its experience (leave-case-out)."""
        if self.experience is None or record_id not in self.experience.contributions:
            return self
        other = copy.copy(self)
        other._use(self.experience.without(record_id))
        return other

    def likelihood(self, concept: str) -> np.ndarray:
        """P(f | d) for every disease d of the model."""
        p = np.full(len(self.model.diseases), self.leak)
        rows, listed = self._listing(self.explaining(concept))
        p[rows] = listed
        broader = list(self._broader[concept])
        p[broader] = np.maximum(p[broader] * self.settings.broader_share, self.leak)
        experience = self.experience
        if experience is not None and concept in experience.asked:
            counts = experience.findings.get(concept, np.zeros(len(p)))
            empirical = (counts + 1) / (experience.patients + 2)
            p = np.where(self._observed, empirical, p)
        return p

    def posterior(self, known: Mapping[str, bool], sex: str | None = None) -> np.ndarray:
        """P(d | findings): `known` maps a concept id to present (True) or absent (False); every other finding
        counted was not mentioned. With the patient's `sex`, conditions of the other sex (pregnancy, the
        other sex's organs) are nearly ruled out."""
        log_p = self.log_prior + self.unmentioned(known)
        if sex in ("female", "male"):
            log_p = log_p + np.where(
                self._sexes == ("male" if sex == "female" else "female"), np.log(self.settings.other_sex), 0.0
            )
        for concept, present in known.items():
            p = self.likelihood(concept)
            log_p += np.log(p if present else 1.0 - p)
        log_p -= log_p.max()
        weights = np.exp(log_p)
        return weights / weights.sum()

    def unmentioned(self, known: Collection[str]) -> np.ndarray:
        """Σ log(1 − α · P(f | d)) over the findings counted (see the module docstring) not in `known`."""
        if not self.mention_rate:
            return np.zeros(len(self.model.diseases))
        if self._silence is None:
            self._silence = self._all_silent()
        said = [self._silent(concept) for concept in known if self._counted(concept)]
        return self._silence - np.sum(said, axis=0) if said else self._silence

    def _counted(self, concept: str) -> bool:
        return concept in (self.experience.asked if self.experience is not None else self.listed)

    def _silent(self, concept: str) -> np.ndarray:
        """log(1 − α · P(f | d)) for one finding counted; the knowledge's from its listings alone."""
        if self.experience is not None:
            return np.log1p(-self.mention_rate * self.likelihood(concept))
        term = np.full(len(self.model.diseases), np.log1p(-self.mention_rate * self.leak))
        rows, listed = self._listing(self.listed[concept])
        term[rows] = np.log1p(-self.mention_rate * listed)
        return term

    def _all_silent(self) -> np.ndarray:
        """The sum of `_silent` over every finding counted (for the knowledge: by counting each disease's
        listings, not finding by finding)."""
        if self.experience is not None:
            return np.sum([self._silent(concept) for concept in self.experience.asked], axis=0)
        unlisted = np.log1p(-self.mention_rate * self.leak)
        total = np.full(len(self.model.diseases), len(self.listed) * unlisted)
        for listing in self.listed.values():
            rows, listed = self._listing(listing)
            total[rows] += np.log1p(-self.mention_rate * listed) - unlisted
        return total

    def _listing(self, listing: Mapping[int, str]) -> tuple[list[int], np.ndarray]:
        """The rows of the diseases that list a finding (row → the name they list it under) and P(f | d)
        for each by the knowledge."""
        rows = list(listing)
        p = self._typical[rows].copy()
        for k, row in enumerate(rows):
            if row in self._salience:
                p[k] *= self._salience[row].get(listing[row], self.settings.salience_floor)
        return rows, np.maximum(p, self.leak)

    def explaining(self, concept: str) -> dict[int, str]:
        """The diseases that list the finding — itself, a narrower finding (a disease with "productive cough"
        explains "cough"), or its broader finding one step up (one with "cough" explains "productive
        cough") — each with the symptom name it lists."""
        if concept not in self._explains:
            listed: dict[int, str] = {}
            for member in reachable(concept, self._children):
                for row, name in self.listed.get(member, {}).items():
                    listed.setdefault(row, name)
            broader = set()
            for parent in self._parents.get(concept, ()):
                for row, name in self.listed.get(parent, {}).items():
                    if row not in listed:
                        listed[row] = name
                        broader.add(row)
            self._explains[concept] = listed
            self._broader[concept] = broader
        return self._explains[concept]

    def explained(self, concept: str, row: int) -> str | None:
        """The symptom name under which disease `row` explains the finding, if it does."""
        return self.explaining(concept).get(row)
