"""The disease knowledge's facts cited as evidence: a graph fact `(disease)-[relation]->(target)` (a symptom,
a test, a drug, a care), the risk factors a record names, and a source's severity rating; each provenance
names the source for a reader (`SourceTraits.title`). A fact already among the evidence is kept."""

from __future__ import annotations

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.conditions.records import how_often
from clinrag.consult.diseases import Disease, DiseaseModel
from clinrag.consult.understand.finding_names import symptom_name
from clinrag.consult.understand.vocabulary import Vocabulary
from clinrag.core.models import Evidence
from clinrag.graph.schema import Relation


def cite_fact(
    model: DiseaseModel,
    vocabulary: Vocabulary,
    disease: Disease,
    relation: Relation,
    target: str,
    evidence: dict[str, Evidence],
) -> str:
    """The graph fact `(disease)-[relation]->(target)` as evidence; its provenance names the source for a
    reader (`SourceTraits.title`)."""
    fact_id = disease.fact_id(relation, target)
    if fact_id not in evidence:
        evidence[fact_id] = _fact(model, vocabulary, disease, relation, target)
    return fact_id


def _fact(
    model: DiseaseModel, vocabulary: Vocabulary, disease: Disease, relation: Relation, target: str
) -> Evidence:
    """The fact as evidence: what it says, with its frequency where the source gives one, and where it is
    stated (the knowledge base's documents, else the references a source gives)."""
    symptom = relation is Relation.HAS_SYMPTOM and target in disease.symptoms
    place = disease.symptoms.index(target) if symptom else -1
    # a disease named in two sources: the symptom is cited to the source that lists it
    source = disease.origins[place] if symptom else disease.source
    named = symptom_name(vocabulary, target) if symptom else target
    text = f"{disease.name} {relation.lower().replace('_', ' ')} {named}"
    provenance = {"head": disease.name, "relation": str(relation), "tail": target}
    if source == disease.source:
        provenance["key"] = disease.key
    traits = model.traits.get(source)
    if traits is not None and traits.title:
        provenance["title"] = traits.title
    cited = disease.references[place] if symptom else disease.cited.get(f"{relation}|{target}", "")
    references = [ref for ref in cited.split(";") if ref]
    if symptom and (share := disease.frequencies[place]) is not None:
        text += f" ({how_often(share)} people with it)"
        provenance["frequency"] = share
    documents = packaged_catalogue().documents(references)
    if documents:  # the knowledge base's documents: named, with where to read them
        fields = {"issuer", "title", "year", "url"}
        provenance["documents"] = [d.model_dump(include=fields) for d in documents]
        provenance["title"] = "; ".join(f"{d.citation()} {d.url}" for d in documents)
    elif references:  # the publications and records that state it, for the reader to open
        text += f"; stated in {', '.join(references)}"
        provenance["references"] = references
    return Evidence(
        id=disease.fact_id(relation, target),
        kind="graph_fact",
        text=text,
        source=f"graph:{source}",
        provenance=provenance,
    )


def cite_risk_factor(
    model: DiseaseModel, vocabulary: Vocabulary, disease: Disease, risk: str, evidence: dict[str, Evidence]
) -> str:
    """The knowledge's fact that `risk` makes `disease` likelier, as evidence (a record's attribute, as
    severity is, not a graph edge)."""
    cited = f"graph:{disease.name}|risk factor|{risk}"
    source = model.risk_source(disease) or disease.source  # of two sources, the one naming risk factors
    provenance = {
        "head": disease.name,
        "relation": "risk factor",
        "tail": risk,
        "title": model.traits[source].title,
    }
    if source == disease.source:
        provenance["key"] = disease.key
    evidence.setdefault(
        cited,
        Evidence(
            id=cited,
            kind="graph_fact",
            text=f"{disease.name} has risk factor {symptom_name(vocabulary, risk)}",
            source=f"graph:{source}",
            provenance=provenance,
        ),
    )
    return cited


def cite_severity(model: DiseaseModel, disease: Disease, evidence: dict[str, Evidence]) -> str:
    """The source's severity rating of `disease` (1: most severe … 5: least, as DDXPlus rates) as evidence."""
    cited = f"graph:{disease.name}|severity"
    traits = model.traits.get(disease.source)
    evidence.setdefault(
        cited,
        Evidence(
            id=cited,
            kind="graph_fact",
            text=f"{disease.name} has severity {disease.severity} (1: most severe, 5: least)",
            source=f"graph:{disease.source}",
            provenance={"key": disease.key, "title": traits.title if traits else disease.source},
        ),
    )
    return cited
