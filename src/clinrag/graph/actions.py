"""The 10 graph actions of DeepDoctor-RAG: fixed Cypher templates whose only inputs are parameters.

Forward actions (GET_*) list a disease's neighbours of one relation; inverse actions (INFER_DISEASES_BY_*)
rank diseases by how many of the given neighbours they have. Keywords first go through a `NodeMatcher`,
so the templates only ever see names of existing nodes, as parameters. One more parameterised read gives each
fact the ids of the text passages its edge was imported from (`text:` sources), so that it can cite them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clinrag.core.errors import InvalidInputError, validation_problems
from clinrag.graph.matching import KeywordMatch, NodeMatcher
from clinrag.graph.schema import SYMMETRIC, TRIPLE_TYPE, Label, Relation
from clinrag.graph.store import GraphStore

TOP_K_DEFAULT = 10
TOP_K_MAX = 50
MAX_KEYWORDS = 50
MAX_KEYWORD_CHARS = 300


class Action(StrEnum):
    GET_SYMPTOMS = "GET_SYMPTOMS"
    GET_TESTS = "GET_TESTS"
    GET_DRUGS = "GET_DRUGS"
    GET_CURES = "GET_CURES"
    GET_COMORBIDITIES = "GET_COMORBIDITIES"
    INFER_DISEASES_BY_SYMPTOMS = "INFER_DISEASES_BY_SYMPTOMS"
    INFER_DISEASES_BY_TESTS = "INFER_DISEASES_BY_TESTS"
    INFER_DISEASES_BY_DRUGS = "INFER_DISEASES_BY_DRUGS"
    INFER_DISEASES_BY_CURES = "INFER_DISEASES_BY_CURES"
    INFER_DISEASES_BY_COMORBIDITIES = "INFER_DISEASES_BY_COMORBIDITIES"


@dataclass(frozen=True)
class ActionSpec:
    relation: Relation
    inverse: bool

    @property
    def keyword_label(self) -> Label:
        """What the keywords name: a disease for forward actions, the neighbour for inverse ones."""
        return TRIPLE_TYPE[self.relation].target if self.inverse else Label.DISEASE


_RELATION_OF = {
    "SYMPTOMS": Relation.HAS_SYMPTOM,
    "TESTS": Relation.RECOMMEND_TEST,
    "DRUGS": Relation.RECOMMEND_DRUG,
    "CURES": Relation.RECOMMEND_CURE,
    "COMORBIDITIES": Relation.HAS_COMORBIDITY,
}
SPECS: dict[Action, ActionSpec] = {
    action: ActionSpec(_RELATION_OF[action.value.rsplit("_", 1)[1]], action.value.startswith("INFER_"))
    for action in Action
}


def _match(relation: Relation, keyed: str) -> str:
    """MATCH … WHERE for the relation, `keyed` ("d" or "x") being the node named by $names."""
    target = TRIPLE_TYPE[relation].target
    if relation in SYMMETRIC:
        return f"MATCH (d:Disease)-[:{relation}]-(x:{target}) WHERE {keyed}.name IN $names AND x <> d "
    return f"MATCH (d:Disease)-[:{relation}]->(x:{target}) WHERE {keyed}.name IN $names "


def _forward(relation: Relation) -> str:
    # Items sorted by name, at most $top_k per disease; `total` tells the caller what was cut.
    return (
        _match(relation, "d") + "WITH DISTINCT d, x ORDER BY x.name "
        "WITH d, collect(x.name) AS items "
        "RETURN d.name AS disease, items[0..$top_k] AS items, size(items) AS total "
        "ORDER BY disease"
    )


def _inverse(relation: Relation) -> str:
    # Most matched neighbours first, then by name, so equal counts rank the same on every backend.
    return (
        _match(relation, "x") + "WITH DISTINCT d, x ORDER BY x.name "
        "WITH d, collect(x.name) AS matched "
        "WITH d, matched, size(matched) AS match_count WHERE match_count >= $min_match_count "
        "RETURN d.name AS disease, matched, match_count "
        "ORDER BY match_count DESC, disease ASC LIMIT $top_k"
    )


TEMPLATES: dict[Action, str] = {
    action: (_inverse if spec.inverse else _forward)(spec.relation) for action, spec in SPECS.items()
}
PASSAGES_TEMPLATES: dict[Relation, str] = {
    relation: (
        f"UNWIND $pairs AS pair MATCH (d:Disease {{name: pair[0]}})-[e:{relation}]-"
        f"{'' if relation in SYMMETRIC else '>'}(x:{TRIPLE_TYPE[relation].target} {{name: pair[1]}}) "
        "WHERE e.passages IS NOT NULL RETURN pair[0] AS head, pair[1] AS tail, e.passages AS passages"
    )
    for relation in Relation
}
DESCRIPTIONS_TEMPLATE = (
    "MATCH (d:Disease) WHERE d.name IN $names AND d.description IS NOT NULL "
    "RETURN d.name AS name, d.description AS description"
)


class ActionRequest(BaseModel):
    """One planned action, as an LLM planner writes it (JSON) and the graph runs it.

    `min_match_count` only concerns inverse actions; `top_k_items` bounds the ranked diseases of an inverse
    action and the items per disease of a forward one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Action
    keywords: list[str] = Field(min_length=1, max_length=MAX_KEYWORDS)
    min_match_count: int = Field(default=1, ge=1)
    top_k_items: int = Field(default=TOP_K_DEFAULT, ge=1, le=TOP_K_MAX)

    @field_validator("action", mode="before")
    @classmethod
    def _canonical_action(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("keywords")
    @classmethod
    def _clean_keywords(cls, value: list[str]) -> list[str]:
        cleaned = list(dict.fromkeys(" ".join(k.split()) for k in value if k.strip()))
        if not cleaned:
            raise ValueError("keywords are all empty")
        if too_long := [k for k in cleaned if len(k) > MAX_KEYWORD_CHARS]:
            raise ValueError(f"keyword longer than {MAX_KEYWORD_CHARS} characters: {too_long[0][:60]}…")
        return cleaned


def parse_request(data: Mapping[str, Any]) -> ActionRequest:
    """Validate a planner's action; any problem (e.g. an unknown action) is an InvalidInputError."""
    try:
        return ActionRequest.model_validate(data)
    except ValidationError as exc:
        raise InvalidInputError(
            f"invalid graph action: {validation_problems(exc.errors(), 'request')}"
        ) from exc


@dataclass(frozen=True)
class Triple:
    head: str
    relation: Relation
    tail: str
    # The ids of the text passages the edge was read from (`text:` sources), for citation; not its identity.
    passages: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class RankedDisease:
    name: str
    match_count: int
    matched: tuple[str, ...]


@dataclass(frozen=True)
class ActionResult:
    request: ActionRequest
    matches: tuple[KeywordMatch, ...]
    triples: tuple[Triple, ...]
    ranked: tuple[RankedDisease, ...] = ()  # inverse actions only, best first
    totals: Mapping[str, int] | None = None  # forward actions only: each disease's item count before top_k
    descriptions: Mapping[str, str] = field(default_factory=dict)  # of the diseases named, where known

    @property
    def matched_nodes(self) -> list[str]:
        return list(dict.fromkeys(m.node for m in self.matches if m.node is not None))


def run_action(store: GraphStore, request: ActionRequest, matcher: NodeMatcher) -> ActionResult:
    spec = SPECS[request.action]
    matches = tuple(matcher.match_all(request.keywords, spec.keyword_label))
    names = list(dict.fromkeys(m.node for m in matches if m.node is not None))
    if not names:
        return ActionResult(request, matches, (), totals=None if spec.inverse else {})
    params: dict[str, Any] = {"names": names, "top_k": request.top_k_items}
    if spec.inverse:
        params["min_match_count"] = request.min_match_count
    rows = store.query(TEMPLATES[request.action], params)
    ranked: tuple[RankedDisease, ...] = ()
    totals: dict[str, int] | None = None
    if spec.inverse:
        ranked = tuple(RankedDisease(r["disease"], int(r["match_count"]), tuple(r["matched"])) for r in rows)
        triples = tuple(Triple(d.name, spec.relation, item) for d in ranked for item in d.matched)
    else:
        triples = tuple(Triple(r["disease"], spec.relation, item) for r in rows for item in r["items"])
        totals = {r["disease"]: int(r["total"]) for r in rows}
    triples = _with_passages(store, spec.relation, triples)
    return ActionResult(request, matches, triples, ranked, totals, _descriptions(store, spec, names, triples))


def _with_passages(store: GraphStore, relation: Relation, triples: tuple[Triple, ...]) -> tuple[Triple, ...]:
    """The triples with the passages their edges cite (a comorbidity stored both ways: both edges')."""
    if not triples:
        return triples
    pairs = [[t.head, t.tail] for t in triples]
    cited: dict[tuple[str, str], set[str]] = {}
    for row in store.query(PASSAGES_TEMPLATES[relation], {"pairs": pairs}):
        cited.setdefault((row["head"], row["tail"]), set()).update(row["passages"])
    return tuple(
        Triple(t.head, t.relation, t.tail, tuple(sorted(cited.get((t.head, t.tail), ())))) for t in triples
    )


def _descriptions(
    store: GraphStore, spec: ActionSpec, names: list[str], triples: tuple[Triple, ...]
) -> dict[str, str]:
    diseases = {t.head for t in triples}
    if spec.keyword_label is Label.DISEASE:
        diseases |= set(names)
    if TRIPLE_TYPE[spec.relation].target is Label.DISEASE:
        diseases |= {t.tail for t in triples}
    if not diseases:
        return {}
    rows = store.query(DESCRIPTIONS_TEMPLATE, {"names": sorted(diseases)})
    return dict(sorted((r["name"], r["description"]) for r in rows))
