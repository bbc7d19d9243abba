"""A small real disease graph from DDXPlus, loaded into a FalkorDB server that the code under test starts.

DDXPlus gives 49 pathologies with their symptoms and antecedents (evidence codes; `question_en` names them).
It has no tests, drugs, cures or comorbidities, so this fixture (not medical knowledge) fills those relations
from the real data deterministically, so that all five relations hold real, overlapping sets:
- HAS_SYMPTOM: the pathology's `symptoms`;
- RECOMMEND_TEST / RECOMMEND_DRUG / RECOMMEND_CURE: its `antecedents`, split by evidence number mod 3;
- HAS_COMORBIDITY: two pathologies sharing at least 3 antecedents, stored from the alphabetically first to the
  other, and also backwards when they share 5 or more (so both stored directions are exercised).
Expected answers are computed from these sets in Python, never from the graph.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.schema import Label, Relation, ensure_schema, merge_nodes, merge_relations
from tests.conftest import shared_data

ANTECEDENT_RELATIONS = (Relation.RECOMMEND_TEST, Relation.RECOMMEND_DRUG, Relation.RECOMMEND_CURE)
COMORBID_SHARED = 3
BOTH_WAYS_SHARED = 5


def clean(text: str) -> str:
    return " ".join(text.split())


@dataclass
class DdxGraph:
    descriptions: dict[str, str]
    # relation → disease → neighbour names (comorbidity: symmetric, both sides listed)
    neighbours: dict[Relation, dict[str, set[str]]]
    stored_edges: dict[Relation, list[tuple[str, str]]] = field(default_factory=dict)

    def items(self, relation: Relation, disease: str) -> set[str]:
        return self.neighbours[relation].get(disease, set())

    def node_names(self, label: Label) -> set[str]:
        if label is Label.DISEASE:
            return set(self.descriptions)
        relation = {
            Label.SYMPTOM: Relation.HAS_SYMPTOM,
            Label.TEST: Relation.RECOMMEND_TEST,
            Label.DRUG: Relation.RECOMMEND_DRUG,
            Label.CURE: Relation.RECOMMEND_CURE,
        }[label]
        return set().union(*self.neighbours[relation].values())

    def expected_ranking(
        self, relation: Relation, keywords: set[str], min_count: int = 1, top_k: int = 10
    ) -> list[tuple[str, int, list[str]]]:
        """Diseases by number of neighbours among `keywords` (desc), then name; as the actions promise."""
        ranked = []
        for disease in self.descriptions:
            matched = sorted((self.items(relation, disease) & keywords) - {disease})
            if len(matched) >= min_count:
                ranked.append((disease, len(matched), matched))
        ranked.sort(key=lambda r: (-r[1], r[0]))
        return ranked[:top_k]


def build_ddx_graph(ddx_dir: Path) -> DdxGraph:
    conditions = json.loads((ddx_dir / "release_conditions.json").read_text(encoding="utf-8"))
    evidences = json.loads((ddx_dir / "release_evidences.json").read_text(encoding="utf-8"))
    question = {code: clean(e["question_en"]) for code, e in evidences.items()}
    descriptions: dict[str, str] = {}
    neighbours: dict[Relation, dict[str, set[str]]] = {r: {} for r in Relation}
    antecedents: dict[str, set[str]] = {}
    for condition in conditions.values():
        name = clean(condition["cond-name-eng"])
        descriptions[name] = (
            f"{name} (ICD-10 {condition['icd10-id']}), DDXPlus severity {condition['severity']}; "
            f"in French: {condition['cond-name-fr']}"
        )
        neighbours[Relation.HAS_SYMPTOM][name] = {question[c] for c in condition["symptoms"]}
        antecedents[name] = set(condition["antecedents"])
        for code in condition["antecedents"]:
            relation = ANTECEDENT_RELATIONS[int(code.removeprefix("E_")) % 3]
            neighbours[relation].setdefault(name, set()).add(question[code])
    stored: dict[Relation, list[tuple[str, str]]] = {
        r: sorted((d, x) for d, xs in neighbours[r].items() for x in xs)
        for r in Relation
        if r is not Relation.HAS_COMORBIDITY
    }
    comorbid = neighbours[Relation.HAS_COMORBIDITY]
    stored[Relation.HAS_COMORBIDITY] = []
    for a, b in itertools.combinations(sorted(antecedents), 2):
        shared = len(antecedents[a] & antecedents[b])
        if shared >= COMORBID_SHARED:
            comorbid.setdefault(a, set()).add(b)
            comorbid.setdefault(b, set()).add(a)
            stored[Relation.HAS_COMORBIDITY].append((a, b))
            if shared >= BOTH_WAYS_SHARED:
                stored[Relation.HAS_COMORBIDITY].append((b, a))
    return DdxGraph(descriptions, neighbours, stored)


def load_ddx_graph(store: FalkorDBStore, ddx: DdxGraph, *, batch_size: int = 100) -> None:
    ensure_schema(store)
    merge_nodes(
        store,
        Label.DISEASE,
        [{"name": n, "description": d} for n, d in ddx.descriptions.items()],
        batch_size=batch_size,
    )
    for relation, edges in ddx.stored_edges.items():
        merge_relations(store, relation, edges, batch_size=batch_size)


@pytest.fixture(scope="session")
def ddx(data_dir: Path) -> DdxGraph:
    ddx_dir = data_dir / "ddxplus"
    shared_data(ddx_dir / "release_conditions.json", "the DDXPlus release files")
    return build_ddx_graph(ddx_dir)


@pytest.fixture(scope="module")
def falkordb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("falkordb")


@pytest.fixture(scope="module")
def store(falkordb_dir: Path) -> Iterator[FalkorDBStore]:
    """clinrag's own FalkorDB server on a fresh data dir, stopped (last client leaves) after the module."""
    opened = FalkorDBStore.embedded(falkordb_dir)
    server = opened.server
    assert server is not None and server.running()
    yield opened
    opened.close()
    assert not server.running()


@pytest.fixture(scope="module")
def ddx_store(store: FalkorDBStore, ddx: DdxGraph) -> FalkorDBStore:
    load_ddx_graph(store, ddx)
    return store
