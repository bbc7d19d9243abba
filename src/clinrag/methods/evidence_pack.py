"""DeepDoctor-RAG's evidence pack: graph facts, disease descriptions, MeSH mappings and literature citations,
each an `Evidence` with its provenance, numbered for the prompt so an answer can cite them ([E1], [E2], …)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from clinrag.core.models import Evidence
from clinrag.graph.planner import RetrievalState
from clinrag.terms.mesh_mapper import MeshMapping

DESCRIPTION_CHARS = 600


class EvidencePack(BaseModel):
    facts: list[Evidence] = Field(default_factory=list)
    descriptions: list[Evidence] = Field(default_factory=list)
    terms: list[Evidence] = Field(default_factory=list)
    citations: list[Evidence] = Field(default_factory=list)

    def evidence(self) -> list[Evidence]:
        return [*self.descriptions, *self.facts, *self.terms, *self.citations]

    def render(self, max_facts: int = 80) -> str:
        """The numbered context block; facts beyond `max_facts` are left out of the prompt (not the pack)."""
        shown = [*self.descriptions, *self.facts[:max_facts], *self.terms, *self.citations]
        return "\n".join(f"[E{i}] {item.text}" for i, item in enumerate(shown, 1))


def graph_evidence(state: RetrievalState, source: str) -> tuple[list[Evidence], list[Evidence]]:
    """(facts, descriptions) of a planner's retrieval state; `source` names the graph they resolve in."""
    facts = [
        Evidence(
            id=f"graph:{t.head}|{t.relation}|{t.tail}",
            kind="graph_fact",
            text=f"{t.head} {t.relation.lower().replace('_', ' ')} {t.tail}",
            source=source,
            provenance={"head": t.head, "relation": str(t.relation), "tail": t.tail}
            | ({"passages": list(t.passages)} if t.passages else {}),
        )
        for t in state.triples
    ]
    descriptions = [
        Evidence(
            id=f"graph:{name}",
            kind="graph_fact",
            text=f"{name}: {text[:DESCRIPTION_CHARS]}",
            source=source,
            provenance={"disease": name, "field": "description"},
        )
        for name, text in state.descriptions.items()
    ]
    return facts, descriptions


def mesh_evidence(mappings: list[MeshMapping]) -> list[Evidence]:
    """One `term` evidence per mapped name; the whole decision record is its provenance."""
    evidence = []
    for mapping in mappings:
        if mapping.descriptor is None:
            continue
        descriptor = mapping.descriptor
        definition = f": {descriptor.scope_note}" if descriptor.scope_note else ""
        evidence.append(
            Evidence(
                id=f"mesh:{descriptor.ui}",
                kind="term",
                text=f"{mapping.input} = MeSH {descriptor.name} ({descriptor.ui}){definition}",
                score=mapping.score,
                source=f"mesh:{mapping.db_version}",
                provenance=mapping.model_dump(mode="json"),
            )
        )
    return evidence
