"""`packaged:conditions`, the knowledge base as graph records: features with their frequency and documents,
DDXPlus's conditions named as DDXPlus names them, DDXPlus antecedents as risk factors, and what the
consultation reads besides (onset, severity, prevalence)."""

from __future__ import annotations

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.conditions.records import FREQUENCY_SHARES, PREVALENCE_PER_1000
from clinrag.graph.importers import read_source
from clinrag.graph.schema import Relation


def test_every_condition_becomes_a_record_with_its_cited_features() -> None:
    catalogue = packaged_catalogue()
    source = read_source("packaged:conditions")
    assert source.read == len(catalogue.conditions) == len(source.records)
    by_key = {record.key: record for record in source.records}
    for condition in catalogue.conditions:
        record = by_key[condition.id]
        assert record.name == (condition.ddxplus or condition.name)
        assert f"ICD-10 {condition.icd10.upper()}" in (record.description or "")
        assert record.prevalence == PREVALENCE_PER_1000[condition.prevalence.primary_care]
        assert record.onset == condition.onset.ages
        symptoms = record.relations.get(Relation.HAS_SYMPTOM, [])
        listed = symptoms + record.risk_factors
        assert len(listed) == len({f.code for f in condition.features})  # none lost
        for symptom in symptoms:
            edge = (Relation.HAS_SYMPTOM, symptom)
            assert 0 < record.frequencies[edge] <= 1
            assert set(record.references[edge]) <= set(catalogue.sources)
        assert len(record.relations.get(Relation.RECOMMEND_TEST, [])) == len(condition.tests)
        assert Relation.RECOMMEND_DRUG not in record.relations  # management is in words, never a drug list


def test_a_feature_keeps_its_class_or_the_share_its_source_states() -> None:
    catalogue = packaged_catalogue()
    records = {r.key: r for r in read_source("packaged:conditions").records}
    checked = 0
    for condition in catalogue.conditions:
        for feature in condition.features:
            if feature.hpo is None:
                continue
            name = next(
                n for n in records[condition.id].relations[Relation.HAS_SYMPTOM] if n == feature.label
            )
            share = records[condition.id].frequencies[(Relation.HAS_SYMPTOM, name)]
            expected = (
                feature.frequency
                if isinstance(feature.frequency, float)
                else FREQUENCY_SHARES[feature.frequency]
            )
            assert share == expected
            checked += 1
    assert checked > 2000


def test_ddxplus_antecedents_are_risk_factors_named_as_ddxplus_asks() -> None:
    records = {r.name: r for r in read_source("packaged:conditions").records}
    copd = records["Acute COPD exacerbation / infection"]
    assert "Do you smoke cigarettes?" in copd.risk_factors
    assert "Do you smoke cigarettes?" not in copd.relations[Relation.HAS_SYMPTOM]
