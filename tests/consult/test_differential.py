"""The differential's arithmetic on a small hand-made model: the leading rows without a full sort, and the
questions' expected information gain summed over the few diseases that explain a finding, checked against the
definition computed over every disease."""

from __future__ import annotations

import numpy as np
import pytest

from clinrag.consult.diseases import Disease, DiseaseModel
from clinrag.consult.reason.differential import Differential, LikelihoodSettings, leading
from clinrag.consult.reason.listings import Listings
from clinrag.consult.reason.questions import danger_gain, next_questions, questions_about
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.graph.importers.records import SourceTraits

pytestmark = pytest.mark.unit
TRAITS = SourceTraits(lay=True, askable=True, salience_ordered=True)
TABLE = {
    "Influenza": ["Fever", "Cough", "Muscle Pain", "Headache"],
    "Measles": ["Rash", "Fever", "Cough"],
    "Migraine": ["Headache", "Nausea"],
    "Gastroenteritis": ["Nausea", "Vomiting", "Diarrhea", "Fever"],
    "Eczema": ["Rash", "Itching"],
}


# diseases whose source says how often each finding occurs (an annotated spectrum, as HPO's), and the ages
# each begins within where it says
ANNOTATED = {
    "Rare rash syndrome": (["Rash", "Itching", "Nausea"], [0.9, None, 0.2], (0.0, 1.0)),
    "Rare fever syndrome": (["Fever", "Headache", "Tremor"], [0.5, 0.05, 0.3], (16.0, 130.0)),
    "Rare itch syndrome": (["Itching", "Tremor"], [None, None], None),  # its source states no share for it
}


def _differential(settings: LikelihoodSettings | None = None, annotated: bool = False) -> Differential:
    diseases = [
        Disease(name, "table", name, symptoms=list(symptoms), ranked=len(symptoms) if k % 2 else 0)
        for k, (name, symptoms) in enumerate(TABLE.items())
    ]
    if annotated:
        diseases += [
            Disease(name, "atlas", name, symptoms=symptoms, frequencies=shares, onset=onset)
            for name, (symptoms, shares, onset) in ANNOTATED.items()
        ]
    atlas = SourceTraits(askable=True, rare=True, frequencies=True)
    model = DiseaseModel(["table", "atlas"], diseases, {"table": TRAITS, "atlas": atlas})
    names = sorted({s for symptoms, *_ in [*TABLE.values(), *ANNOTATED.values()] for s in symptoms})
    vocabulary = Vocabulary.from_names(names, "table", TRAITS)
    return Differential(model, vocabulary, settings=settings or LikelihoodSettings())


def _entropy(p: np.ndarray) -> float:
    q = p[p > 0] / p.sum()
    return float(-(q * np.log(q)).sum())


@pytest.mark.parametrize("n", [0, 1, 3, 5, 9])
def test_leading_rows_are_those_of_a_stable_sort(n: int) -> None:
    posterior = np.array([0.1, 0.3, 0.1, 0.3, 0.05, 0.1, 0.05])
    assert leading(posterior, n).tolist() == np.argsort(-posterior, kind="stable")[:n].tolist()


@pytest.mark.parametrize("annotated", [False, True])
def test_the_gain_summed_over_the_explaining_diseases_is_the_gain_over_all(annotated: bool) -> None:
    differential = _differential(annotated=annotated)
    # with annotated spectra, the diseases that do not explain a finding take two leaks: the finding's own
    # (annotated) and the plain lists' constant
    assert differential.annotated.any() == annotated
    vocabulary = differential.vocabulary
    fever, rash = (vocabulary.lookup(name).id for name in ("fever", "rash"))
    posterior = differential.posterior({fever: True, rash: False})
    findings = {concept.id: concept.name for concept in vocabulary.concepts}
    questions = questions_about(differential, posterior, findings)
    assert len(questions) == len(findings)
    for question in questions:
        p = differential.likelihood(question.concept)
        yes = posterior * p
        p_yes = yes.sum()
        gain = _entropy(posterior) - (p_yes * _entropy(yes) + (1 - p_yes) * _entropy(posterior - yes))
        assert question.gain == pytest.approx(gain, abs=1e-12)
        assert question.p_yes == pytest.approx(p_yes, abs=1e-12)


def _binary_entropy(p: np.ndarray) -> np.ndarray:
    return -(p * np.log(p) + (1 - p) * np.log(1 - p))


def test_the_danger_gain_is_the_expected_fall_of_each_dangerous_diagnosis_uncertainty() -> None:
    differential = _differential(annotated=True)
    vocabulary = differential.vocabulary
    posterior = differential.posterior({vocabulary.lookup("fever").id: True})
    dangerous = np.array([list(TABLE).index("Measles"), len(TABLE) + 1])  # Measles, Rare fever syndrome
    findings = {concept.id: concept.name for concept in vocabulary.concepts}
    questions = questions_about(differential, posterior, findings)
    settled = danger_gain(differential, posterior, questions, dangerous)
    for question, gain in zip(questions, settled, strict=True):
        p = differential.likelihood(question.concept)  # every disease's likelihood, dense
        p_yes = float((posterior * p).sum())
        after_yes, after_no = posterior * p / p_yes, posterior * (1 - p) / (1 - p_yes)
        expected = p_yes * _binary_entropy(after_yes[dangerous]) + (1 - p_yes) * _binary_entropy(
            after_no[dangerous]
        )
        assert gain == pytest.approx((_binary_entropy(posterior[dangerous]) - expected).sum(), abs=1e-12)
    # a rash settles Measles (one of the two) more than itching, which neither dangerous diagnosis lists
    by_name = {q.name.lower(): g for q, g in zip(questions, settled, strict=True)}
    assert by_name["rash"] > by_name["itching"] >= 0


def test_the_danger_weight_puts_first_the_question_that_settles_the_dangerous_diagnoses() -> None:
    differential = _differential(annotated=True)
    fever = differential.vocabulary.lookup("fever").id
    posterior = differential.posterior({fever: True})
    dangerous = [list(TABLE).index("Gastroenteritis")]  # as if it were one not to miss
    asked = {"n": 20, "candidate_diseases": 10}
    plain = next_questions(differential, posterior, {fever}, **asked, danger_weight=0.0)
    weighted = next_questions(
        differential, posterior, {fever}, **asked, dangerous=dangerous, danger_weight=10.0
    )
    assert all(q.danger == 0 for q in plain)  # no weight: information gain alone, as before
    assert [q.concept for q in plain] == [q.concept for q in sorted(plain, key=lambda q: -q.gain)]
    assert weighted[0].danger == max(q.danger for q in weighted) > 0
    assert weighted[0].concept != plain[0].concept


def test_a_finding_implied_by_a_narrower_one_present_counts_once() -> None:
    differential = _differential()
    vocabulary = differential.vocabulary
    pain = Vocabulary.from_names(["Pain", "Muscle Pain"], "table", TRAITS).with_head_parents()
    assert pain.lookup("muscle pain").parents == (pain.lookup("pain").id,)
    differential = Differential(differential.model, vocabulary.merge(pain).with_head_parents())
    muscle, general = (differential.vocabulary.lookup(name).id for name in ("muscle pain", "pain"))
    alone = differential.posterior({muscle: True}, unsaid=False)
    both = differential.posterior({muscle: True, general: True}, unsaid=False)
    assert np.allclose(alone, both)
    # an absent broader finding still counts: it says the narrower one is absent too
    assert not np.allclose(alone, differential.posterior({muscle: True, general: False}, unsaid=False))


def test_what_goes_unsaid_counts_once_for_a_disease_named_in_two_sources() -> None:
    """A disease two sources list counts each finding not mentioned as the mean over its sources' lists: as
    much as the two lists apart, halved, not as both lists in full."""
    table, survey = ["Fever", "Cough", "Headache"], ["Rash", "Itching", "Nausea", "Vomiting", "Diarrhea"]
    diseases = [
        Disease("Joined", "table", "J", symptoms=table + survey, origins=["table"] * 3 + ["survey"] * 5),
        Disease("Table only", "table", "T", symptoms=list(table)),
        Disease("Survey only", "survey", "S", symptoms=list(survey)),
        Disease("Bare", "table", "B"),
    ]
    traits = {"table": TRAITS, "survey": TRAITS}
    model = DiseaseModel(["table", "survey"], diseases, traits)
    vocabulary = Vocabulary.from_names(sorted({*table, *survey}), "table", TRAITS)
    differential = Differential(model, vocabulary)
    for said in ({}, {vocabulary.lookup("fever").id: True, vocabulary.lookup("rash").id: True}):
        silence = differential.unmentioned(said)
        joined, table_only, survey_only, bare = silence
        assert joined < bare  # it still costs something
        assert joined - bare == pytest.approx(((table_only - bare) + (survey_only - bare)) / 2)


def test_listings_keep_each_findings_first_place_and_load_as_saved(tmp_path) -> None:
    differential = _differential()
    listings = differential.listings
    rows, places, shares = listings.of_concept(differential.vocabulary.lookup("fever").id)
    assert np.isnan(shares).all()  # the table says nothing of how often
    names = list(TABLE)
    assert {names[r]: int(p) for r, p in zip(rows, places, strict=True)} == {
        "Influenza": 0,
        "Measles": 1,
        "Gastroenteritis": 3,
    }
    listings.save(tmp_path / "listings.npz")
    loaded = Listings.load(tmp_path / "listings.npz")
    assert loaded.concepts == listings.concepts
    assert np.array_equal(loaded.rows, listings.rows) and np.array_equal(loaded.places, listings.places)
    assert np.array_equal(loaded.shares, listings.shares, equal_nan=True)
    # typical 0.8, less 0.1 a place where the disease's findings are ranked (measles, gastroenteritis), the
    # constant leak (0.02) where fever is not listed
    constant = _differential(LikelihoodSettings(background_noise=0.0))
    fever = constant.vocabulary.lookup("fever").id
    assert constant.likelihood(fever).tolist() == pytest.approx([0.8, 0.8 * 0.9, 0.02, 0.8 * 0.7, 0.02])
    # a plain list's leak is a knowledge gap: the background leak of annotated spectra does not change it
    assert differential.likelihood(fever).tolist() == pytest.approx(constant.likelihood(fever).tolist())


def test_annotated_shares_and_stated_absences_set_the_likelihood() -> None:
    traits = SourceTraits(rare=True, frequencies=True)
    diseases = [
        Disease("A", "hpo", "OMIM:1", symptoms=["Seizure", "Ataxia"], frequencies=[0.9, None]),
        Disease("B", "hpo", "OMIM:2", symptoms=["Ataxia"], frequencies=[0.1], excluded=["Seizure"]),
        Disease("C", "hpo", "OMIM:3", symptoms=["Tremor"], frequencies=[0.5]),
    ]
    model = DiseaseModel(["hpo"], diseases, {"hpo": traits})
    vocabulary = Vocabulary.from_names(["Seizure", "Ataxia", "Tremor"], "hpo", traits)
    settings = LikelihoodSettings(background_noise=0.0)
    differential = Differential(model, vocabulary, settings=settings)
    seizure, ataxia, tremor = (vocabulary.lookup(name).id for name in ("seizure", "ataxia", "tremor"))
    # A's share (0.9); B is stated not to show it; C lists nothing of it: the annotated leak
    assert differential.likelihood(seizure).tolist() == pytest.approx([0.9, 0.002, 0.001])
    # the background leak: a finding 1 of 3 diseases explains is a third as likely in the others
    background = differential.with_settings(LikelihoodSettings(background_noise=1.0))
    assert background.likelihood(tremor).tolist() == pytest.approx([1 / 3, 1 / 3, 0.5])
    # A gives no share for ataxia: `unstated_share` (0.3); B's own 0.1
    assert differential.likelihood(ataxia).tolist() == pytest.approx([0.3, 0.1, 0.001])
    # a record of codes leaves nothing unsaid; an absent finding weighs 1 − 0.3 · P(f | d)
    posterior = differential.posterior({seizure: False}, unsaid=False)
    prior = np.exp(differential.log_prior)
    expected = prior * (1 - 0.3 * np.array([0.9, 0.002, 0.001]))
    assert posterior.tolist() == pytest.approx((expected / expected.sum()).tolist())


def test_a_source_stating_shares_annotates_all_its_diseases_and_bounds_the_unstated() -> None:
    settings = LikelihoodSettings(unstated_share=0.3, annotated_spectrum=0.75, background_noise=0.1)
    differential = _differential(settings, annotated=True)
    rows = {disease.name: row for row, disease in enumerate(differential.model.diseases)}
    assert differential.annotated.tolist() == [False] * len(TABLE) + [True] * len(ANNOTATED)
    itching = differential.likelihood(differential.vocabulary.lookup("itching").id)
    assert itching[rows["Rare itch syndrome"]] == pytest.approx(0.3)  # 0.75 / its 2 findings is more
    assert itching[rows["Rare rash syndrome"]] == pytest.approx(0.25)  # 0.75 / its 3 findings
    assert itching[rows["Eczema"]] == pytest.approx(0.8)  # a plain list's typical share


def test_a_finding_no_plain_list_names_takes_its_background_leak_in_them_too_at_most_the_plain_leak() -> None:
    differential = _differential(annotated=True)
    vocabulary, leak = differential.vocabulary, differential.settings.leak
    plain = ~differential.annotated
    tremor = differential.likelihood(vocabulary.lookup("tremor").id)
    _, _, leaks = differential.sparse_likelihood(vocabulary.lookup("tremor").id)
    # two of the eight diseases show it: its background among them is 2 / 8, but a plain list's disease is
    # not one of those syndromes, so a finding it does not name is no likelier in it than a knowledge gap
    assert leaks.annotated == pytest.approx(2 / 8)
    assert leaks.plain == pytest.approx(leak) and tremor[plain] == pytest.approx(leak)
    # a finding rarer among the diseases than a knowledge gap: its background, in the plain lists too
    rare_background = _differential(LikelihoodSettings(background_noise=0.05), annotated=True)
    _, _, leaks = rare_background.sparse_likelihood(vocabulary.lookup("tremor").id)
    assert leak > 0.05 * 2 / 8
    assert leaks.annotated == leaks.plain == pytest.approx(0.05 * 2 / 8)
    fever = differential.likelihood(vocabulary.lookup("fever").id)
    unlisted = [
        row for row, d in enumerate(differential.model.diseases[: len(TABLE)]) if "Fever" not in d.symptoms
    ]
    assert unlisted and fever[unlisted] == pytest.approx(leak)  # the plain lists name fever: a gap is `leak`


def test_a_risk_factor_moves_only_the_diseases_whose_knowledge_names_risk_factors() -> None:
    """Smoking: 0.67 in a disease whose source names it a risk factor, the 0.1 background in one whose source
    names risk factors but not it, and their mean in one whose source names none (so it neither helps nor
    harms what is not known); a symptom the source lists keeps its own likelihood."""
    checklist = SourceTraits(lay=True, askable=True, risk_factors=True, listed_share=0.68)
    diseases = [
        Disease("COPD", "checklist", "1", symptoms=["Cough"], risk_factors=["Smoking"]),
        Disease("Asthma", "checklist", "2", symptoms=["Cough", "Wheezing"], risk_factors=["Allergy"]),
        Disease("Croup", "checklist", "3", symptoms=["Cough"]),
        Disease("Bronchitis", "table", "4", symptoms=["Cough", "Fever"]),
        Disease("Smoker's plaque", "table", "5", symptoms=["Smoking"]),  # a plain list naming it a symptom
    ]
    model = DiseaseModel(["checklist", "table"], diseases, {"checklist": checklist, "table": TRAITS})
    vocabulary = Vocabulary.from_names(["Cough", "Wheezing", "Fever", "Smoking", "Allergy"], "table", TRAITS)
    differential = Differential(model, vocabulary, settings=LikelihoodSettings(risk_share=0.67))
    smoking, cough = (vocabulary.lookup(name).id for name in ("smoking", "cough"))
    unknown = (0.67 + 0.1 + 0.1) / 3
    assert differential.likelihood(smoking).tolist() == pytest.approx([0.67, 0.1, 0.1, unknown, 0.8])
    assert differential.likelihood(cough).tolist() == pytest.approx([0.68, 0.68, 0.68, 0.8, 0.02])
    assert differential.risk_factor(smoking, 0) == "Smoking"
    assert differential.risk_factor(smoking, 1) is None and differential.risk_factor(cough, 0) is None
    # a risk factor goes unsaid without counting against anyone (only listed symptoms do)
    assert not differential._counted(vocabulary.lookup("allergy").id)


def test_an_onset_at_other_ages_than_a_diseases_weighs_onset_mismatch() -> None:
    differential = _differential(LikelihoodSettings(onset_mismatch=0.2), annotated=True)
    rows = {disease.name: row for row, disease in enumerate(differential.model.diseases)}
    itching = {differential.vocabulary.lookup("itching").id: True}
    before = differential.posterior(itching, unsaid=False)
    infant = differential.posterior(itching, unsaid=False, onset=(28 / 365.25, 1.0))
    ratio = (infant / before) / (infant[rows["Eczema"]] / before[rows["Eczema"]])
    assert ratio[rows["Rare fever syndrome"]] == pytest.approx(0.2)  # begins in adults
    assert ratio[rows["Rare rash syndrome"]] == pytest.approx(1.0)  # begins before 1 year
    assert ratio[rows["Rare itch syndrome"]] == pytest.approx(1.0)  # its onset is not stated


def test_the_knowledges_names_are_remembered_and_a_patients_words_are_not() -> None:
    vocabulary = _differential(annotated=True).vocabulary
    for name in ("Itching", "itching", "Tremor", "no such finding"):
        assert vocabulary.known(name) == vocabulary.lookup(name)
    vocabulary.lookup("my hands shake when I hold a cup")
    assert set(vocabulary._known) == {"Itching", "itching", "Tremor", "no such finding"}
