"""The differential: a probability for every disease given the findings heard so far, by Bayes' rule over the
disease knowledge (naive Bayes: findings independent given the disease).

P(d | F) ∝ π(d) · Π_{f present} P(f | d) · Π_{f absent} (1 − `absent_reliability` · P(f | d)) (a finding
looked for and not found: the looking misses some), where P(f | d) is
- the frequency of f among past patients with d, when a patient base gives d's patients (add-one
  smoothed), for the findings those patients were asked about;
- else, where the knowledge says how often d's patients show f (HPO's annotated spectra), that share, and
  where such a source gives none, `unstated_share`, at most `annotated_spectrum` / |findings of d| (a
  disease annotated with a hundred findings shows few of them in any one patient);
- else, when a plain list names f for d, the share its source declares its patients show of a listed finding
  (`SourceTraits.listed_share`: DDXPlus's patients show about 0.68 of their condition's list, however long),
  else `typical` (0.8) — or less for a disease listed with many findings, min(typical, spectrum / |findings
  of d|) with `spectrum` 4 (the disease table lists 5–6 findings a disease, each typical) — times
  1 − `salience_step` (0.1) per place a finding stands after the first when the source lists a disease's
  findings most characteristic first (the packaged disease table, see `diseases`): chest
  pain, listed first for angina and fourth for asthma, says more for angina (floor: half);
- a disease listing a narrower finding explains f ("focal-onset seizure" explains "seizure"); one listing
  only a broader finding, `broader_share` (0.5) of it a step (a disease with "cough" explains a "barking
  cough", but not every cough barks);
- `stated_absent` when the knowledge states d does not show f or a broader finding (HPO's NOT);
- and the leak when no knowledge of d explains f: for a plain list `leak` (0.02: a second problem, a
  knowledge gap); for an annotated spectrum, which leaves little out, the share of the diseases explaining f
  (`background_noise`), at least `annotated_leak` — so a specific finding unexplained counts much more
  against a disease than a common one. A finding no plain list names takes that background in the plain
  lists too, but never more than `leak`: the background is the share of the rare diseases that show f, and
  a common disease's patient is no syndrome's (microcephaly is not in one in seven with hypertension). With
  it (the background before) the rare-disease benchmark's default GTPA@1 is the same on the tune cohorts and
  0.407 → 0.410 on the reported ones, and its interactive curve starts at 0.16 where it started at 0.125:
  three syndromic findings no longer leave hypertension and type 2 diabetes leading.
A risk factor the patient gives (smoking, heavy drinking: DDXPlus's yes/no antecedents, a disease's
`risk_factors`) is not a symptom: anyone may have it. It is `risk_share` (0.67: DDXPlus's development
patients have 0.669 of their condition's yes/no antecedents, measured as `listed_share` is) in a disease
whose knowledge names it, `risk_background` (0.1, a priori: about one adult in ten smokes, drinks heavily or
has diabetes) in one whose knowledge names other risk factors, and the mean of the two over those diseases
in one whose knowledge names none (so that it moves only what is known); a symptom list naming it keeps its
own likelihood if more. A risk factor not mentioned says nothing. On the lay DDXPlus development
presentations GTPA@3 rose 0.82 → 0.88.
π(d) is the diagnoses' frequency in the patient base (smoothed) where there is one, else the base rates of
`DiseaseModel`; a condition of the other sex takes `other_sex` of it, and, when the patient's onset is given
as an HPO onset class, a disease whose knowledge says it begins at other ages `onset_mismatch`. Uncertain
findings change nothing. The plain lists' constants were set a priori, not fitted to any evaluation set (the
salience order was then checked on the development presentations, tests/data/consult/presentations_dev.jsonl);
the annotated spectra's on the "tune" half of the phenopacket cohorts (`benchmarks/bench_rare.py` reports on
the other half).

What the patient did not mention says a little too: a patient with d who has finding f mentions it, unasked,
with probability `mention_rate` (α), so each finding not mentioned multiplies by 1 − α · P(f | d) — a disease
whose patients nearly always have f loses some weight when f goes unsaid. The findings counted are those the
past patients were asked about (with a patient base), else those the knowledge lists (each at its listed
likelihood, a declared share weighed as a plain list's: a patient tells a few findings unasked however many
they have; without the hierarchy), at α for the findings patients have words for and
`clinical_mention_rate` for those in clinicians' terms; a record of codes leaves nothing unsaid. A disease
named in several sources is one disease each source describes: its silence is the mean over their lists, not
their sum. α = 0.2, a
conservative a priori value: a first account mentions a small part of what a patient has; on the DDXPlus
development samples (`benchmarks/dev_consult_text.py`, which never sees bench_consult's sample) GTPA@1 from
text rises from 0.88 / 0.89 (α = 0) to 0.915 / 0.935, and larger α gives about the same.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from clinrag.consult.clinical import ClinicalTables, packaged_tables
from clinrag.consult.diseases import DiseaseModel, sex_of
from clinrag.consult.reason.listings import Listings
from clinrag.consult.understand.vocabulary import Vocabulary, reachable
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
    stated_absent: float = 0.002  # P(f | d) when the knowledge states that d does not show f
    broader_steps: int = 1  # how far up the hierarchy a listed broader finding still explains one
    specific_share: float = 0.0  # weight of the share of a broader finding's diseases that explain f
    absent_reliability: float = 0.3  # P(a finding the patient has is found when looked for)
    unstated_share: float = 0.3  # P(f | d) where a source that gives frequencies gives none for f
    annotated_leak: float = 0.001  # the leak of a disease whose findings are annotated with frequencies
    clinical_mention_rate: float = 0.0  # α of a finding named in clinicians' terms (`mention_rate`: lay)
    background_noise: float = 1.0  # the leak's share of the diseases showing f (0: the constant leak)
    annotated_spectrum: float = 10.0  # of an annotated spectrum: unstated shares at most this / its findings
    onset_mismatch: float = 0.2  # the factor of a disease whose stated onset ages miss the patient's
    course_mismatch: float = 0.2  # the factor of a disease that does not present after so long a complaint
    risk_share: float = 0.67  # P(f | d) of a risk factor f the knowledge names for d
    risk_background: float = 0.1  # P(f | d) of a risk factor at least, whatever d: how common one is
    # how far the prior follows how common the knowledge says a condition is (`DiseaseModel.base_rates`), and
    # a typical-findings list's leak for f as this share of such lists explaining f (`_knowledge_likelihood`):
    # both chosen on the open-world tuning set (benchmarks/tune_knowledge.py, GTPA@1 + @3: 0.95 at 0.25 and
    # 0.25, 0.94 at 0.5 and 0.25, 0.90 at 0.5 and 0.5, 0.73 at 1 and 0.5). The exponent is 0.5, one case
    # below the best: at 0.25 a very rare condition (Ebola) led fever, headache, nausea, diarrhoea and
    # fatigue, since the exposures that gate such conditions (travel, contact) are not weighed yet
    prevalence_exponent: float = 0.5
    typical_background: float = 0.25

    def __post_init__(self) -> None:
        if not 0 <= self.mention_rate < 1:
            raise ValueError(f"mention_rate must be in [0, 1), got {self.mention_rate}")


class Leaks(NamedTuple):
    """P(f | d) of the diseases whose knowledge does not explain finding f."""

    annotated: float  # an annotated spectrum's: f's background (the share of the diseases showing it)
    plain: float  # a plain list's: `leak`, or f's background when no plain list names f


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
            if label not in index or not record.codes.get(field):  # no finding coded: nothing to count
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
        listings: Listings | None = None,
        absences: Listings | None = None,
        below: Listings | None = None,
        clinical: ClinicalTables | None = None,
    ) -> None:
        """`listings`: which disease lists which finding; `absences`: which finding a disease is stated not to
        show; `below`: which disease lists a finding or a narrower one (each built from the model and the
        vocabulary when not given); `clinical`: the courses of the diseases (the packaged tables when not
        given)."""
        self.model = model
        self.clinical = clinical if clinical is not None else packaged_tables()
        # how long each disease's symptoms typically last when it presents, in days (NaN: not stated)
        courses = [self.clinical.course_of(disease) for disease in model.diseases]
        spans = [c.presents_within_days if c is not None else (np.nan, np.nan) for c in courses]
        self._course_start, self._course_end = np.array(spans, dtype=float).reshape(-1, 2).T
        self.vocabulary = vocabulary
        self.listings = listings if listings is not None else Listings.of(model, vocabulary)
        self.absences = absences if absences is not None else Listings.of(model, vocabulary, kind="excluded")
        self.risks = Listings.of(model, vocabulary, kind="risk_factors")  # a few hundred: not compiled
        # the diseases whose knowledge names their risk factors (it is silent on the others')
        self._risks_known = np.array([model.risk_source(d) is not None for d in model.diseases])
        self._parents = vocabulary.parents
        # A finding at one body site (calf pain) is one of the sites its broader finding (pain) may be at:
        # a disease listed with the broader finding alone shows it at that site at most one in that many.
        sites: dict[str, int] = {}
        for concept in vocabulary.concepts:
            for parent in concept.parents if concept.site else ():
                sites[parent] = sites.get(parent, 0) + 1
        self._site_share = {
            (c.id, parent): 1.0 / sites[parent] for c in vocabulary.concepts if c.site for parent in c.parents
        }
        self.below = below if below is not None else self.listings.below(self._parents)
        self._sexes = np.array([sex_of(disease.icd10) or "" for disease in model.diseases])
        # the ages each disease begins within, where its source says (NaN: it does not)
        onsets = [disease.onset or (np.nan, np.nan) for disease in model.diseases]
        self._onset_start, self._onset_end = np.array(onsets, dtype=float).reshape(-1, 2).T
        # how many of a disease's findings, from the first, its source lists in order of salience
        self._ranked = np.array([disease.ranked for disease in model.diseases])
        # per (disease, place in its symptom list): how many findings the source of that place lists for it
        # (at `_list_starts[row] + place`): a disease named in two sources keeps each source's spectrum
        per_place = [disease.listed_with() or [1] for disease in model.diseases]
        self._list_starts = np.concatenate([[0], np.cumsum([len(sizes) for sizes in per_place])[:-1]])
        self._listed_with = np.array([size for sizes in per_place for size in sizes], dtype=float)
        # … and the share of a disease's patients its source says a listed finding shows (NaN: it says none)
        declared = {name: traits.listed_share for name, traits in model.traits.items()}
        self._declared_share = np.array(
            [declared.get(o) or np.nan for d in model.diseases for o in d.origins or [d.source]], dtype=float
        )
        # a disease named in several sources is described by each: what goes unsaid counts once, as the mean
        # over its sources' lists, not once per list
        self._described_by = np.array([max(len(set(d.origins)), 1) for d in model.diseases], dtype=float)
        # The diseases whose knowledge says how often their findings occur: annotated spectra, where a finding
        # given no share is taken at `unstated_share` (not at a plain list's `typical`) and one not listed at
        # the finding's background leak (a plain list of a few findings leaves more out: `leak`). A source
        # that declares and states shares (`SourceTraits.frequencies`) annotates its whole spectra, also the
        # diseases it states no share for.
        self.annotated = np.zeros(len(model.diseases), dtype=bool)
        self.annotated[self.listings.rows[~np.isnan(self.listings.shares)]] = True
        sharing = {
            model.diseases[row].source
            for row in np.flatnonzero(self.annotated)
            if model.traits[model.diseases[row].source].frequencies
        }
        self.annotated |= np.array([disease.source in sharing for disease in model.diseases], dtype=bool)
        self.annotated &= ~np.array([model.traits[d.source].typical_findings for d in model.diseases])
        self._plain_rows = np.flatnonzero(~self.annotated)
        # the diseases of sources that list typical findings with their shares (clinrag's knowledge base)
        self._typical_rows = np.flatnonzero([model.traits[d.source].typical_findings for d in model.diseases])
        self._settle(settings)
        self._use(experience)

    def _settle(self, settings: LikelihoodSettings) -> None:
        """The likelihood settings, and what is computed from them alone."""
        self.settings = settings
        self._base_rates = np.asarray(self.model.base_rates(settings.prevalence_exponent))
        self.leak = settings.leak
        self.mention_rate = settings.mention_rate
        self._silence: np.ndarray | None = None  # the sum over every finding counted, when first needed
        # finding → the knowledge's (rows, P(f | d), leak, the place in each disease's list of what it lists)
        self._explained: dict[str, tuple[np.ndarray, np.ndarray, Leaks, np.ndarray]] = {}
        # `_listed` of the listings and `below`, and of the listings as what goes unsaid weighs them
        self._entry_p: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def with_settings(self, settings: LikelihoodSettings) -> Differential:
        """This differential with other likelihood settings; the tables built from the knowledge (which
        disease lists which finding, the hierarchy) are shared."""
        other = copy.copy(self)
        other._settle(settings)
        other._use(other.experience)
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
        self._observed_rows = (
            np.flatnonzero(experience.patients > 0) if experience is not None else np.zeros(0, dtype=np.intp)
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
        rows, values, (elsewhere, plain_leak) = self.sparse_likelihood(concept)
        p = np.where(self.annotated, elsewhere, plain_leak)
        p[rows] = values
        return p

    def sparse_likelihood(self, concept: str) -> tuple[np.ndarray, np.ndarray, Leaks]:
        """(rows, P(f | d) of those diseases, the finding's leaks): the diseases whose likelihood is not a
        leak (those the knowledge has explain the finding, or state do not show it, and those past patients
        were seen with); every other disease takes a leak, the annotated spectra's (`annotated`) or the
        plain lists'."""
        if concept not in self._explained:
            self._explained[concept] = self._knowledge_likelihood(concept)
        rows, listed, elsewhere, _ = self._explained[concept]
        experience = self.experience
        if experience is None or concept not in experience.asked:
            return rows, listed, elsewhere
        observed = self._observed_rows
        counts = experience.findings.get(concept)
        seen_with = counts[observed] if counts is not None else 0
        empirical = (seen_with + 1) / (experience.patients[observed] + 2)
        knowledge = ~np.isin(rows, observed)  # a disease past patients were seen with takes their frequency
        rows, listed = (
            np.concatenate([rows[knowledge], observed]),
            np.concatenate([listed[knowledge], empirical]),
        )
        return rows, listed, elsewhere

    def posterior(
        self,
        known: Mapping[str, bool],
        sex: str | None = None,
        unsaid: bool = True,
        onset: tuple[float, float] | None = None,
        duration_days: float | None = None,
    ) -> np.ndarray:
        """P(d | findings): `known` maps a concept id to present (True) or absent (False); with `unsaid` (the
        findings are a patient's account), every other finding counted was not mentioned. With the
        patient's `sex`, conditions of the other sex (pregnancy, the other sex's organs) are nearly ruled
        out; with the ages the illness began within (`onset`, years), a disease whose knowledge says it
        begins at other ages only takes `onset_mismatch`; with how long the complaint has lasted
        (`duration_days`), a disease whose course says it presents after a shorter or longer time only takes
        `course_mismatch`."""
        log_p = self.log_prior + self.unmentioned(known) if unsaid else self.log_prior.copy()
        if sex in ("female", "male"):
            log_p = log_p + np.where(
                self._sexes == ("male" if sex == "female" else "female"), np.log(self.settings.other_sex), 0.0
            )
        if onset is not None:
            # NaN compares false: a disease whose onset is not stated is never a mismatch
            missed = (self._onset_start > onset[1]) | (self._onset_end < onset[0])
            log_p = log_p + np.where(missed, np.log(self.settings.onset_mismatch), 0.0)
        if duration_days is not None:
            missed = (self._course_start > duration_days) | (self._course_end < duration_days)
            log_p = log_p + np.where(missed, np.log(self.settings.course_mismatch), 0.0)
        # a finding present is implied by a narrower one present ("cough" by "barking cough"): counted once
        implied = self.vocabulary.broader(concept for concept, present in known.items() if present)
        for concept, present in known.items():
            if present and concept in implied:
                continue
            p = self.likelihood(concept)
            # a finding looked for and not found: the looking misses some (`absent_reliability`)
            log_p += np.log(p if present else 1.0 - self.settings.absent_reliability * p)
        log_p -= log_p.max()
        weights = np.exp(log_p)
        return weights / weights.sum()

    def unmentioned(self, known: Collection[str]) -> np.ndarray:
        """Σ log(1 − α · P(f | d)) over the findings counted (see the module docstring) not in `known`."""
        if not (self.mention_rate or self.settings.clinical_mention_rate):
            return np.zeros(len(self.model.diseases))
        if self._silence is None:
            self._silence = self._all_silent()
        said = [self._silent(concept) for concept in known if self._counted(concept)]
        return self._silence - np.sum(said, axis=0) if said else self._silence

    def _counted(self, concept: str) -> bool:
        return concept in (self.experience.asked if self.experience is not None else self.listings)

    def _rate(self, concept: str) -> float:
        """α of a finding: `mention_rate` for one patients have words for (`Concept.lay`), else
        `clinical_mention_rate` (a finding in clinicians' terms goes unsaid in an account more often)."""
        return self.mention_rate if concept in self._spoken else self.settings.clinical_mention_rate

    @cached_property
    def _spoken(self) -> frozenset[str]:
        return frozenset(c.id for c in self.vocabulary.concepts if c.lay)

    def _silent(self, concept: str) -> np.ndarray:
        """log(1 − α · P(f | d)) for one finding counted; the knowledge's from its listings alone."""
        rate = self._rate(concept)
        if self.experience is not None:
            return np.log1p(-rate * self.likelihood(concept))
        unlisted = np.log1p(-rate * self.leak)
        term = np.full(len(self.model.diseases), unlisted)
        span = self.listings.span(concept)
        rows = self.listings.rows[span]
        listed = np.log1p(-rate * self._entry_probabilities()[2][span])
        term[rows] = unlisted + (listed - unlisted) / self._described_by[rows]
        return term

    def _all_silent(self) -> np.ndarray:
        """The sum of `_silent` over every finding counted (for the knowledge: over all its listings at
        once, not finding by finding)."""
        if self.experience is not None:
            return np.sum([self._silent(concept) for concept in self.experience.asked], axis=0)
        listings = self.listings
        rates = np.array([self._rate(c) for c in listings.concepts])
        unlisted = np.log1p(-rates * self.leak)
        total = np.full(len(self.model.diseases), unlisted.sum())
        per_entry = np.repeat(np.arange(len(rates)), np.diff(listings.starts))
        listed = self._entry_probabilities()[2]
        terms = np.log1p(-rates[per_entry] * listed) - unlisted[per_entry]
        np.add.at(total, listings.rows, terms / self._described_by[listings.rows])
        return total

    def _listed(
        self, rows: np.ndarray, places: np.ndarray, shares: np.ndarray, declared: bool = True
    ) -> np.ndarray:
        """P(f | d) by the knowledge for the diseases `rows`, which list f at `places`: the share of their
        patients who show it where the source says; else `typical`, less a salience step per place when
        their source lists findings most characteristic first."""
        settings = self.settings
        ranked = self._ranked[rows]
        at = self._list_starts[rows] + places
        salience = np.where(
            places < ranked, np.maximum(1.0 - settings.salience_step * places, settings.salience_floor), 1.0
        )
        listed_with = self._listed_with[at]
        typical = np.minimum(settings.typical, settings.spectrum / listed_with)
        if declared:  # the share a source declares its patients show, where it does
            typical = np.where(np.isnan(self._declared_share[at]), typical, self._declared_share[at])
        typical = typical * salience
        unstated = np.minimum(settings.unstated_share, settings.annotated_spectrum / listed_with)
        typical = np.where(self.annotated[rows], unstated, typical)
        # a share of 100 % is still not certainty (a record may miss a finding): 1 − leak at most
        return np.clip(np.where(np.isnan(shares), typical, shares), self.leak, 1.0 - self.leak)

    def _entry_probabilities(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """P(f | d) of every entry of the listings and of `below`, and of the listings as what goes unsaid
        weighs them, once for these settings. A patient tells a few of their findings unasked however many
        they have: a share a source declares for every finding of a long list would make its diseases pay
        for each one unsaid, so silence weighs such a list as a plain one (its typical findings spread over
        it)."""
        if self._entry_p is None:
            listings = self.listings
            self._entry_p = (
                self._listed(listings.rows, listings.places, listings.shares),
                self._listed(self.below.rows, self.below.places, self.below.shares),
                self._listed(listings.rows, listings.places, listings.shares, declared=False),
            )
        return self._entry_p

    def _knowledge_likelihood(self, concept: str) -> tuple[np.ndarray, np.ndarray, Leaks, np.ndarray]:
        """The knowledge's (rows, P(f | d), leaks, places) for finding f (see `sparse_likelihood`; places:
        where in each disease's symptom list is what explains f, -1 for none). A disease explains f when it
        lists f or a narrower finding; through a broader finding a it lists, `broader_share` of it a step for
        the first `broader_steps` steps; through a finding under a (a sibling of f), `specific_share` × the
        share of a's diseases that also explain f, when that is more. One stated not to show f, or a broader
        finding, nearly never does."""
        n = len(self.model.diseases)
        settings = self.settings
        listed_p, below_p, _ = self._entry_probabilities()
        p, place = np.zeros(n), np.full(n, -1)
        span = self.below.span(concept)
        rows = self.below.rows[span]
        p[rows], place[rows] = below_p[span], self.below.places[span]
        explained = len(rows) + 1  # diseases explaining f, one more so a finding none lists is not nought
        reach = None if settings.specific_share > 0 else settings.broader_steps  # how far up helps
        for ancestor, steps in _lineage(concept, self._parents, reach):
            through = []
            if steps <= settings.broader_steps:
                share = settings.broader_share**steps
                if steps == 1 and (concept, ancestor) in self._site_share:
                    share = min(share, self._site_share[concept, ancestor])
                through.append((self.listings, listed_p, share))
            if settings.specific_share > 0:
                under = self.below.span(ancestor)
                share = explained / (under.stop - under.start + 1)
                through.append((self.below, below_p, settings.specific_share * share))
            for table, entry_p, factor in through:
                found = table.span(ancestor)
                found_rows, candidate = table.rows[found], entry_p[found] * factor
                better = candidate > p[found_rows]
                p[found_rows[better]], place[found_rows[better]] = (
                    candidate[better],
                    table.places[found][better],
                )
        # the leak of an annotated spectrum: a finding it does not explain is rare in d, rarer the fewer
        # diseases show it
        elsewhere = min(max(settings.background_noise * len(rows) / n, settings.annotated_leak), 0.5)
        # a plain list's leak is a knowledge gap, the same for every finding its lists name; a finding they
        # never name (a clinician's term) takes its background leak, as an annotated spectrum does, but no
        # more than `leak`: that background is the share of the rare diseases showing f, and a common
        # disease's patient is not a syndrome's (microcephaly is not in one in seven with hypertension)
        plain = self._plain_rows
        plain_leak = self.leak if (p[plain] > 0).any() else min(self.leak, elsewhere)
        # a list of a disease's typical findings leaves out the common, unspecific ones it does not name
        # (fatigue in gastroenteritis): its leak for f is f's background among such lists, the share of them
        # explaining f (`typical_background` of it), at least `leak`
        typical = self._typical_rows
        typical_share = float((p[typical] > 0).mean()) if len(typical) else 0.0
        typical_leak = min(max(self.leak, settings.typical_background * typical_share), 0.5)
        p[plain] = np.maximum(p[plain], plain_leak)
        p[typical] = np.maximum(p[typical], typical_leak)
        # A risk factor is common in anyone (`risk_background`), more so with the diseases it favours
        # (`risk_share`); a disease whose knowledge names no risk factors takes the mean of those whose
        # knowledge does, so that naming one moves only what is known. Only f itself counts: through the
        # hierarchy, weight loss would be "underweight" and any hormone finding "an endocrine disease".
        risky = self.risks.of_concept(concept)[0]
        if len(risky):
            known = self._risks_known
            favoured = np.zeros(n, dtype=bool)
            favoured[risky] = True
            stated = np.where(favoured, settings.risk_share, settings.risk_background)
            unknown = float(stated[known].mean())
            elsewhere, plain_leak = max(elsewhere, unknown), max(plain_leak, unknown)
            p = np.maximum(p, np.where(known, stated, unknown))
        absent = np.unique(
            np.concatenate([self.absences.of_concept(c)[0] for c in reachable(concept, self._parents)])
        )
        absent = absent[p[absent] <= elsewhere]  # unless the knowledge lists it after all
        p[absent] = settings.stated_absent
        mask = p > elsewhere
        mask[plain] = p[plain] > plain_leak
        mask[absent] = True
        if len(risky):  # below the leak, the diseases known not to be favoured by it
            mask[self._risks_known] = True
        kept = np.flatnonzero(mask)
        return kept, p[kept], Leaks(elsewhere, plain_leak), place[kept]

    def explained(self, concept: str, row: int) -> str | None:
        """The symptom name under which disease `row` explains the finding, if it does."""
        self.sparse_likelihood(concept)
        rows, _, _, places = self._explained[concept]  # rows ascending
        k = int(np.searchsorted(rows, row))
        place = int(places[k]) if k < len(rows) and rows[k] == row else -1
        return self.model.diseases[row].symptoms[place] if place >= 0 else None

    def risk_factor(self, concept: str, row: int) -> str | None:
        """The risk factor of disease `row` that finding `concept` is, if it is one."""
        rows, places, _ = self.risks.of_concept(concept)
        place = places[rows == row]
        return self.model.diseases[row].risk_factors[int(place[0])] if len(place) else None


def _lineage(
    concept: str, parents: Mapping[str, Sequence[str]], reach: int | None = None
) -> list[tuple[str, int]]:
    """The concepts above `concept` (at most `reach` steps up), each with its fewest steps up, nearest
    first."""
    found: dict[str, int] = {}
    level, steps = list(parents.get(concept, ())), 1
    while level and (reach is None or steps <= reach):
        level = [c for c in dict.fromkeys(level) if c not in found]
        found.update((c, steps) for c in level)
        level = [p for c in level for p in parents.get(c, ())]
        steps += 1
    return list(found.items())


def leading(posterior: np.ndarray, n: int) -> np.ndarray:
    """The rows of the `n` most probable diseases, most probable first (ties: the lower row first), without
    sorting every disease."""
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    if n >= len(posterior):
        return np.argsort(-posterior, kind="stable")
    kth = np.partition(posterior, len(posterior) - n)[len(posterior) - n]
    rows = np.flatnonzero(posterior >= kth)  # ascending, so a stable sort keeps ties in row order
    return rows[np.argsort(-posterior[rows], kind="stable")][:n]
