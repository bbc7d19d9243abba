"""The 10 actions on the DDXPlus graph, checked against answers computed from the JSON sets."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clinrag.core.errors import InvalidInputError
from clinrag.graph.actions import (
    SPECS,
    TEMPLATES,
    TOP_K_DEFAULT,
    TOP_K_MAX,
    Action,
    ActionRequest,
    Triple,
    parse_request,
    run_action,
)
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.schema import Label, Relation, counts
from tests.graph.conftest import DdxGraph

FORWARD = [a for a in Action if not SPECS[a].inverse]
INVERSE = [a for a in Action if SPECS[a].inverse]
INJECTION = '"}) DETACH DELETE n //'


@pytest.fixture(scope="module")
def matcher(ddx_store: FalkorDBStore) -> NodeMatcher:
    return NodeMatcher(ddx_store)


def test_ten_actions_one_per_relation_and_direction() -> None:
    assert len(Action) == 10 and len(FORWARD) == 5 and len(INVERSE) == 5
    assert {SPECS[a].relation for a in FORWARD} == set(Relation) == {SPECS[a].relation for a in INVERSE}
    assert SPECS[Action.INFER_DISEASES_BY_TESTS].keyword_label is Label.TEST
    assert SPECS[Action.GET_DRUGS].keyword_label is Label.DISEASE
    for template in TEMPLATES.values():
        assert "$names" in template and "$top_k" in template and "'" not in template and '"' not in template


@pytest.mark.parametrize("action", FORWARD)
def test_forward_action_lists_each_disease_neighbours(
    action: Action, ddx_store: FalkorDBStore, matcher: NodeMatcher, ddx: DdxGraph
) -> None:
    relation = SPECS[action].relation
    for disease in sorted(ddx.descriptions):
        expected = sorted(ddx.items(relation, disease))
        result = run_action(
            ddx_store, ActionRequest(action=action, keywords=[disease], top_k_items=50), matcher
        )
        assert result.matches[0].node == disease and result.matches[0].method == "exact"
        assert result.triples == tuple(Triple(disease, relation, item) for item in expected), disease
        assert result.totals == ({disease: len(expected)} if expected else {})
        assert result.descriptions[disease] == ddx.descriptions[disease]
        if relation is Relation.HAS_COMORBIDITY:
            assert set(result.descriptions) == {disease, *expected}


def test_forward_action_covers_several_diseases_and_truncates_per_disease(
    ddx_store: FalkorDBStore, matcher: NodeMatcher, ddx: DdxGraph
) -> None:
    diseases = ["Pneumonia", "HIV (initial infection)", "Anaphylaxis"]
    request = ActionRequest(action="GET_SYMPTOMS", keywords=diseases, top_k_items=4)
    result = run_action(ddx_store, request, matcher)
    expected = [
        Triple(d, Relation.HAS_SYMPTOM, s)
        for d in sorted(diseases)
        for s in sorted(ddx.items(Relation.HAS_SYMPTOM, d))[:4]
    ]
    assert list(result.triples) == expected
    assert result.totals == {d: len(ddx.items(Relation.HAS_SYMPTOM, d)) for d in diseases}
    assert all(total > 4 for total in result.totals.values())  # so the cut really happened
    assert set(result.descriptions) == set(diseases)


def _keyword_sets(ddx: DdxGraph, relation: Relation) -> list[set[str]]:
    """Realistic queries: part of one disease's items plus items of another; and one whole item set."""
    with_items = sorted(d for d in ddx.descriptions if ddx.items(relation, d))
    sets = []
    for first, second in [(with_items[0], with_items[-1]), (with_items[3], with_items[7])]:
        sets.append(
            set(sorted(ddx.items(relation, first))[:3]) | set(sorted(ddx.items(relation, second))[:1])
        )
    sets.append(set(ddx.items(relation, with_items[len(with_items) // 2])))
    return sets


@pytest.mark.parametrize("action", INVERSE)
def test_inverse_action_ranks_diseases_by_matched_neighbours(
    action: Action, ddx_store: FalkorDBStore, matcher: NodeMatcher, ddx: DdxGraph
) -> None:
    relation = SPECS[action].relation
    for keywords in _keyword_sets(ddx, relation):
        expected = ddx.expected_ranking(relation, keywords, top_k=TOP_K_DEFAULT)
        result = run_action(ddx_store, ActionRequest(action=action, keywords=sorted(keywords)), matcher)
        assert [(r.name, r.match_count, list(r.matched)) for r in result.ranked] == expected
        assert len(expected) > 1  # a real ranking, not a single hit
        assert result.triples == tuple(
            Triple(name, relation, item) for name, _, items in expected for item in items
        )
        assert all(m.method == "exact" for m in result.matches)
        ranked_names = {name for name, _, _ in expected}
        assert ranked_names <= set(result.descriptions)


@pytest.mark.parametrize("action", INVERSE)
def test_min_match_count_and_top_k_are_honoured(
    action: Action, ddx_store: FalkorDBStore, matcher: NodeMatcher, ddx: DdxGraph
) -> None:
    relation = SPECS[action].relation
    keywords = set().union(*_keyword_sets(ddx, relation))
    full = ddx.expected_ranking(relation, keywords, top_k=10_000)
    assert full[0][1] >= 2 and full[-1][1] == 1  # counts spread over several levels
    for min_count, top_k in [(1, 50), (2, 50), (3, 5), (1, 1), (full[0][1], 50), (full[0][1] + 1, 50)]:
        request = ActionRequest(
            action=action, keywords=sorted(keywords), min_match_count=min_count, top_k_items=top_k
        )
        result = run_action(ddx_store, request, matcher)
        expected = ddx.expected_ranking(relation, keywords, min_count, top_k)
        assert [(r.name, r.match_count, list(r.matched)) for r in result.ranked] == expected
        assert all(r.match_count >= min_count for r in result.ranked)
        assert len(result.ranked) <= top_k
    assert not run_action(ddx_store, request, matcher).ranked  # min_match_count above the best: none


def test_keywords_are_matched_by_normalisation_and_fuzzily(
    ddx_store: FalkorDBStore, matcher: NodeMatcher, ddx: DdxGraph
) -> None:
    pain = "Do you have pain somewhere, related to your reason for consulting?"
    fever = "Do you have a fever (either felt or measured with a thermometer)?"
    assert {pain, fever} <= ddx.node_names(Label.SYMPTOM)
    request = ActionRequest(
        action="INFER_DISEASES_BY_SYMPTOMS",
        keywords=[
            "do you have PAIN somewhere related to your reason for consulting",
            "Do you have a fevre (either felt or measured with a thermometer)",
            "xylophone lessons",
        ],
    )
    result = run_action(ddx_store, request, matcher)
    assert [(m.node, m.method) for m in result.matches] == [(pain, "exact"), (fever, "fuzzy"), (None, "none")]
    assert 88 <= result.matches[1].score < 100
    expected = ddx.expected_ranking(Relation.HAS_SYMPTOM, {pain, fever})
    assert [(r.name, r.match_count) for r in result.ranked] == [(n, c) for n, c, _ in expected]


def test_no_matching_keyword_gives_an_empty_result(ddx_store: FalkorDBStore, matcher: NodeMatcher) -> None:
    result = run_action(ddx_store, ActionRequest(action="GET_DRUGS", keywords=["Unicorn fever"]), matcher)
    assert result.triples == () and result.ranked == () and result.totals == {}
    assert result.matches[0].node is None and result.matches[0].method == "none"


def test_unknown_or_out_of_bounds_requests_are_rejected() -> None:
    with pytest.raises(ValidationError, match="GET_SYMPTOMS"):
        ActionRequest(action="DROP_GRAPH", keywords=["x"])
    with pytest.raises(InvalidInputError, match="action"):
        parse_request({"action": "GET_EVERYTHING", "keywords": ["Pneumonia"]})
    with pytest.raises(InvalidInputError, match="top_k_items"):
        parse_request({"action": "GET_SYMPTOMS", "keywords": ["Pneumonia"], "top_k_items": TOP_K_MAX + 1})
    with pytest.raises(InvalidInputError, match="min_match_count"):
        parse_request({"action": "GET_SYMPTOMS", "keywords": ["Pneumonia"], "min_match_count": 0})
    with pytest.raises(InvalidInputError, match="keywords"):
        parse_request({"action": "GET_SYMPTOMS", "keywords": ["  ", ""]})
    with pytest.raises(InvalidInputError, match="cypher"):
        parse_request({"action": "GET_SYMPTOMS", "keywords": ["Pneumonia"], "cypher": "MATCH (n) DELETE n"})
    request = parse_request({"action": " get_symptoms ", "keywords": [" Pneumonia ", "Pneumonia"]})
    assert request.action is Action.GET_SYMPTOMS and request.keywords == ["Pneumonia"]
    assert request.min_match_count == 1 and request.top_k_items == TOP_K_DEFAULT


@pytest.mark.parametrize("action", [Action.GET_SYMPTOMS, Action.INFER_DISEASES_BY_SYMPTOMS])
def test_cypher_injection_keyword_matches_nothing_and_changes_nothing(
    action: Action, ddx_store: FalkorDBStore, matcher: NodeMatcher
) -> None:
    before = counts(ddx_store)
    assert before.total_nodes > 0
    result = run_action(ddx_store, ActionRequest(action=action, keywords=[INJECTION]), matcher)
    assert result.matches[0].node is None and result.triples == ()
    # Even handed straight to the template, the text is only ever a value.
    params = {"names": [INJECTION], "top_k": 10, "min_match_count": 1}
    assert ddx_store.query(TEMPLATES[action], params) == []
    assert counts(ddx_store) == before
