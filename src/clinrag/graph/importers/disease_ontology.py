"""The Human Disease Ontology's curated disease–symptom report (`DOreports/disease-symptom.tsv`: 864
diseases, 2,222 pairs, mostly infections) with its ICD-10-CM cross-references (`ICD10inDO.tsv`), CC0 1.0.

`packaged:disease-ontology` reads the copy shipped in `data/disease_ontology/` (repository
DiseaseOntology/HumanDiseaseOntology at commit 9fbefd6 of 2026-08-19, with its licence);
`disease-ontology:PATH` a folder holding the same two reports. Each disease's symptoms (Symptom Ontology
labels) → HAS_SYMPTOM, named by the HPO term whose name or synonym the label is (case and punctuation
aside), else by the label itself; a plain list, without frequencies. A disease whose label is the name of a
condition of clinrag's knowledge base, or whose ICD-10-CM code is that condition's, is named as it, so their
facts join; its code and DOID make the description."""

from __future__ import annotations

import csv
import hashlib
from functools import cache
from pathlib import Path

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.core.errors import DataFormatError
from clinrag.graph.importers.ddxplus import icd10_description
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, SourceTraits, clean_name
from clinrag.graph.importers.registry import PATH, GraphSource, register
from clinrag.graph.matching import normalize
from clinrag.graph.schema import Relation
from clinrag.terms.hpo import PHENOTYPIC_ABNORMALITY, descendants, hpo_terms

NAME = "disease-ontology"
PACKAGED = Path(__file__).parent / "data" / "disease_ontology"
PAIRS, CODES = "disease-symptom.tsv", "ICD10inDO.tsv"
NO_SYMPTOM = "diseases without a symptom"


def read_disease_ontology(
    folder: str | Path, *, limit: int | None = None, spec: str | None = None
) -> SourceRecords:
    folder = Path(folder)
    pairs, codes = folder / PAIRS, folder / CODES
    for needed in (pairs, codes):
        if not needed.is_file():
            raise DataFormatError(f"Disease Ontology source {folder}: {needed.name} not found")
    digest = hashlib.sha256(pairs.read_bytes() + codes.read_bytes()).hexdigest()[:16]
    result = SourceRecords(NAME, spec or f"{NAME}:{folder}", f"{digest}:limit={limit}")
    icd10 = _codes(codes)
    records: dict[str, DiseaseRecord] = {}
    with pairs.open(encoding="utf-8", newline="") as rows:
        for row in csv.DictReader(rows, delimiter="\t"):
            doid, label = row.get("disease_id") or "", clean_name(row.get("disease_label"))
            if doid not in records:
                if limit is not None and len(records) >= limit:
                    continue
                result.read += 1
                if label is None:
                    result.skips.add("diseases without a label", doid)
                    continue
                code = icd10.get(doid)
                same = packaged_catalogue().same_condition(label, code)
                description = f"{doid}" + (f"; {icd10_description(code) or f'ICD-10 {code}'}" if code else "")
                records[doid] = DiseaseRecord(
                    doid, (same.ddxplus or same.name) if same else label, description
                )
                if same is not None:
                    records[doid].synonyms.append(label)
            symptom = clean_name(row.get("symptom_label"))
            if doid in records and symptom is not None:
                records[doid].add(
                    Relation.HAS_SYMPTOM, _hpo_names().get(normalize(symptom), symptom), result.skips
                )
    for record in records.values():
        result.keep(record, NO_SYMPTOM)
    return result


def _codes(path: Path) -> dict[str, str]:
    """DOID → its first ICD-10-CM code."""
    found: dict[str, str] = {}
    with path.open(encoding="utf-8", newline="") as rows:
        for row in csv.DictReader(rows, delimiter="\t"):
            for xref in (row.get("xrefs") or "").split("|"):
                if xref.startswith("ICD10CM:"):
                    found.setdefault(row["id"], xref.removeprefix("ICD10CM:"))
    return found


@cache
def _hpo_names() -> dict[str, str]:
    """A normalised name or synonym of a phenotypic-abnormality term → the term's name (names first)."""
    phenotypes = descendants(PHENOTYPIC_ABNORMALITY)
    terms = [t for t in hpo_terms().values() if t.id in phenotypes and not t.obsolete]
    names: dict[str, str] = {}
    for term in terms:
        names.setdefault(normalize(term.name), term.name)
    for term in terms:
        for synonym in term.synonyms:
            names.setdefault(normalize(synonym), term.name)
    return names


TRAITS = SourceTraits(
    lay=True,
    askable=True,
    title="Human Disease Ontology, disease–symptom report (CC0 1.0)",
)
register(GraphSource(f"{NAME}:{PATH}", lambda path, limit: read_disease_ontology(path, limit=limit), TRAITS))
register(
    GraphSource(
        f"packaged:{NAME}",
        lambda _, limit: read_disease_ontology(PACKAGED, limit=limit, spec=f"packaged:{NAME}"),
        TRAITS,
    )
)
