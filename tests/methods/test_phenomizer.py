"""`phenomizer`, the classic phenotype-similarity baseline: clinrag's vectorised Resnik/funSimAvg gives
pyhpo's own `HPOSet.similarity` numbers on real published patients, and ranks their diseases."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.eval.datasets.phenopackets import load_phenopackets
from clinrag.methods.phenomizer import Phenomizer
from clinrag.terms.hpo_similarity import PhenotypeSimilarity

COHORTS = ["AAGAB", "SC5D"]


@pytest.fixture(scope="module")
def cases(data_dir: Path) -> list[Case]:
    return load_phenopackets(data_dir / "phenopackets", COHORTS).cases


@pytest.mark.slow  # pyhpo's Ontology takes about 30 s to load
def test_the_scores_are_pyhpos(cases: list[Case]) -> None:
    from pyhpo import HPOSet, Ontology
    from pyhpo.annotations import Omim

    Ontology()
    similarity = PhenotypeSimilarity("OMIM")
    for case in cases[:2]:
        terms = case.patient.codes["hpo"]
        ours = similarity.scores(terms)
        patient = HPOSet.from_queries(terms)
        for k in (0, 500, 4000):
            disease = Omim.get(similarity.diseases[k].number)
            annotated = HPOSet([Ontology.get_hpo_object(term) for term in disease.hpo])
            theirs = patient.similarity(annotated, kind="omim", method="resnik", combine="funSimAvg")
            assert ours[k] == pytest.approx(theirs, abs=1e-9)


def test_published_patients_find_their_disease(cases: list[Case]) -> None:
    method = Phenomizer()
    ranks = []
    for case in cases:
        answer = method.answer(case)
        codes = [d.code for d in answer.result.ddx]
        ranks.append(codes.index(case.gold.answers[0]) + 1 if case.gold.answers[0] in codes else 11)
        assert answer.evidence and all(e.id.startswith("hpo-disease:") for e in answer.evidence)
    assert sum(r <= 10 for r in ranks) >= len(ranks) // 2, ranks


def test_a_case_without_terms_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="HPO-coded"):
        Phenomizer().answer(Case(id="words", question="A boy with long fingers."))
