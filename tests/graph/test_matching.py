"""Keyword → node matching against the DDXPlus node names on a live server."""

from __future__ import annotations

import uuid

import pytest
from rapidfuzz import fuzz

from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.matching import NodeMatcher, normalize
from clinrag.graph.schema import Label, ensure_schema, merge_nodes
from tests.graph.conftest import DdxGraph

SYNONYMS = {
    "heart attack": ["Myocardial infarction", "Possible NSTEMI / STEMI"],
    "asthma attack": ["Status asthmaticus", "Bronchospasm / acute asthma exacerbation"],
    "whooping kough": ["pertusis"],
}


def test_normalize() -> None:
    assert normalize("  Guillain-Barré   syndrome! ") == "guillain barre syndrome"
    assert normalize("Bronchospasm / acute asthma exacerbation") == "bronchospasm acute asthma exacerbation"
    assert normalize("HIV (initial infection)") == "hiv initial infection"
    assert normalize("?!") == ""


def test_every_node_name_matches_itself_exactly(ddx_store: FalkorDBStore, ddx: DdxGraph) -> None:
    matcher = NodeMatcher(ddx_store)
    for label in Label:
        names = ddx.node_names(label)
        assert set(matcher.names(label).values()) == names
        for name in names:
            found = matcher.match(name, label)
            assert (found.node, found.method, found.score) == (name, "exact", 100.0)


def test_exact_synonym_fuzzy_and_no_match(ddx_store: FalkorDBStore) -> None:
    matcher = NodeMatcher(ddx_store, synonyms=lambda keyword: SYNONYMS.get(keyword.lower(), []))
    cases = {
        "guillain barre SYNDROME": ("Guillain-Barré syndrome", "exact"),
        "Heart attack": ("Possible NSTEMI / STEMI", "synonym"),
        "asthma attack": ("Bronchospasm / acute asthma exacerbation", "synonym"),
        "Pulmonary embolsm": ("Pulmonary embolism", "fuzzy"),
        "pneumothorax spontaneous": ("Spontaneous pneumothorax", "fuzzy"),  # word order
        "whooping kough": ("Whooping cough", "fuzzy"),
        "Hepatitis C": (None, "none"),
        "": (None, "none"),
    }
    for keyword, (node, method) in cases.items():
        found = matcher.match(keyword, Label.DISEASE)
        assert (found.node, found.method) == (node, method), keyword
        assert found.keyword == keyword and found.label is Label.DISEASE
        if method == "fuzzy":  # word order alone scores 100 with token_sort_ratio; typos less
            assert matcher.fuzzy_threshold <= found.score <= 100
            assert (found.score == 100) == (keyword == "pneumothorax spontaneous")
        if method == "synonym":
            assert found.via == normalize(node or "")
    # the right label only: a disease name is not a symptom
    assert matcher.match("Pulmonary embolism", Label.SYMPTOM).node is None


def test_threshold_and_scorer_decide_fuzzy_matches(ddx_store: FalkorDBStore) -> None:
    strict = NodeMatcher(ddx_store, fuzzy_threshold=99)
    assert strict.match("Pulmonary embolsm", Label.DISEASE).method == "none"
    lenient = NodeMatcher(ddx_store, fuzzy_threshold=90, scorer=fuzz.partial_ratio)
    found = lenient.match("sarcoid", Label.DISEASE)
    assert (found.node, found.method) == ("Sarcoidosis", "fuzzy")
    with pytest.raises(ValueError):
        NodeMatcher(ddx_store, fuzzy_threshold=0)


def test_names_are_cached_until_refreshed(store: FalkorDBStore) -> None:
    assert store.server is not None and store.server.url is not None
    graph = FalkorDBStore(store.server.url, f"matching_{uuid.uuid4().hex[:8]}")
    try:
        ensure_schema(graph)
        merge_nodes(graph, Label.DRUG, ["Salbutamol"])
        matcher = NodeMatcher(graph)
        assert matcher.match("salbutamol", Label.DRUG).node == "Salbutamol"
        merge_nodes(graph, Label.DRUG, ["Ipratropium bromide"])
        assert matcher.match("ipratropium bromide", Label.DRUG).node is None  # cached names
        matcher.refresh(Label.SYMPTOM)
        assert matcher.match("ipratropium bromide", Label.DRUG).node is None
        matcher.refresh(Label.DRUG)
        assert matcher.match("ipratropium bromide", Label.DRUG).node == "Ipratropium bromide"
        merge_nodes(graph, Label.DRUG, ["Prednisone"])
        matcher.refresh()
        assert [m.node for m in matcher.match_all(["PREDNISONE", "salbutamol"], Label.DRUG)] == [
            "Prednisone",
            "Salbutamol",
        ]
    finally:
        graph.write("MATCH (n) DETACH DELETE n")
        graph.close()
