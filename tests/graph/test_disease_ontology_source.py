"""`packaged:disease-ontology`: the Disease Ontology's disease–symptom report, as shipped (CC0), and the same
report read from the shared data folder give the same records; symptoms are named by HPO where HPO has the
name; a disease that is a condition of clinrag's knowledge base is named as it."""

from __future__ import annotations

from pathlib import Path

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.graph.importers import read_source
from clinrag.graph.schema import Relation
from clinrag.terms.hpo import hpo_terms


def test_the_report_reads_its_diseases_with_hpo_named_symptoms(data_dir: Path) -> None:
    packaged = read_source("packaged:disease-ontology")
    shared = read_source(f"disease-ontology:{data_dir / 'disease_ontology'}")
    assert [(r.key, r.name, r.relations) for r in packaged.records] == [
        (r.key, r.name, r.relations) for r in shared.records
    ]
    assert 800 < len(packaged.records) <= 864
    names = {term.name for term in hpo_terms().values()}
    symptoms = [s for r in packaged.records for s in r.relations[Relation.HAS_SYMPTOM]]
    assert 2000 < len(symptoms) <= 2222
    assert sum(s in names for s in symptoms) / len(symptoms) > 0.5  # most SYMP labels are HPO names
    by_key = {r.key: r for r in packaged.records}
    assert "ICD-10 I51.4" in (by_key["DOID:820"].description or "")  # myocarditis, with its code
    catalogue = packaged_catalogue()
    joined = [r for r in packaged.records if r.synonyms]
    assert joined and all(
        catalogue.same_condition(r.synonyms[0]) is not None or "ICD-10" in (r.description or "")
        for r in joined
    )
