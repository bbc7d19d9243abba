"""The differential's arithmetic on a small hand-made model: the leading rows without a full sort, and the
questions' expected information gain summed over the few diseases that explain a finding, checked against the
definition computed over every disease."""

from __future__ import annotations

import numpy as np
import pytest

from clinrag.graph.importers.records import SourceTraits
from clinrag.methods.consult.differential import Differential, LikelihoodSettings, leading
from clinrag.methods.consult.diseases import Disease, DiseaseModel
from clinrag.methods.consult.listings import Listings
from clinrag.methods.consult.questions import questions_about
from clinrag.methods.consult.vocabulary import Vocabulary

pytestmark = pytest.mark.unit
TRAITS = SourceTraits(lay=True, askable=True, salience_ordered=True)
TABLE = {
    "Influenza": ["Fever", "Cough", "Muscle Pain", "Headache"],
    "Measles": ["Rash", "Fever", "Cough"],
    "Migraine": ["Headache", "Nausea"],
    "Gastroenteritis": ["Nausea", "Vomiting", "Diarrhea", "Fever"],
    "Eczema": ["Rash", "Itching"],
}


def _differential(settings: LikelihoodSettings | None = None) -> Differential:
    diseases = [
        Disease(name, "table", name, symptoms=list(symptoms), ranked=len(symptoms) if k % 2 else 0)
        for k, (name, symptoms) in enumerate(TABLE.items())
    ]
    model = DiseaseModel(["table"], diseases, {"table": TRAITS})
    names = sorted({s for symptoms in TABLE.values() for s in symptoms})
    vocabulary = Vocabulary.from_names(names, "table", TRAITS)
    return Differential(model, vocabulary, settings=settings or LikelihoodSettings())


def _entropy(p: np.ndarray) -> float:
    q = p[p > 0] / p.sum()
    return float(-(q * np.log(q)).sum())


@pytest.mark.parametrize("n", [0, 1, 3, 5, 9])
def test_leading_rows_are_those_of_a_stable_sort(n: int) -> None:
    posterior = np.array([0.1, 0.3, 0.1, 0.3, 0.05, 0.1, 0.05])
    assert leading(posterior, n).tolist() == np.argsort(-posterior, kind="stable")[:n].tolist()


def test_the_gain_summed_over_the_explaining_diseases_is_the_gain_over_all() -> None:
    differential = _differential()
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
