"""DeepDoctor-RAG's planner loop (Algorithm I): the LLM plans graph actions, the graph runs them, repeat.

Each round the retrieval state (triples, disease descriptions, inferred rankings) is summarised to text and
the model returns a JSON plan `{"actions": [{"action", "keywords"}]}` under a schema whose `action` is the
enum of the 10 actions (a grammar for the embedded model). Every planned action is validated again
(`parse_request`): an unknown action is rejected and recorded, never run. The model never writes Cypher: the
actions are fixed templates and the keywords reach them only as matched node names, as parameters. The loop
stops on an empty plan, on a plan with nothing new to run, on an unparsable plan (recorded), or after
`max_rounds`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from clinrag.core.errors import InvalidInputError, StructuredOutputError
from clinrag.core.models import Trace
from clinrag.core.usage import Usage
from clinrag.graph.actions import Action, ActionRequest, RankedDisease, Triple, parse_request, run_action
from clinrag.graph.matching import KeywordMatch, NodeMatcher
from clinrag.graph.store import GraphStore
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import parse_structured

ACTION_HELP: dict[Action, str] = {
    Action.GET_SYMPTOMS: "symptoms of the named diseases",
    Action.GET_TESTS: "tests recommended for the named diseases",
    Action.GET_DRUGS: "drugs recommended for the named diseases",
    Action.GET_CURES: "treatments recommended for the named diseases",
    Action.GET_COMORBIDITIES: "diseases that often occur with the named diseases",
    Action.INFER_DISEASES_BY_SYMPTOMS: "diseases that have the named symptoms, most matches first",
    Action.INFER_DISEASES_BY_TESTS: "diseases for which the named tests are recommended",
    Action.INFER_DISEASES_BY_DRUGS: "diseases for which the named drugs are recommended",
    Action.INFER_DISEASES_BY_CURES: "diseases for which the named treatments are recommended",
    Action.INFER_DISEASES_BY_COMORBIDITIES: "diseases that often occur with the named diseases, ranked",
}

PLAN_PROMPT = """You look things up in a medical knowledge graph of diseases, their symptoms, tests, drugs, \
treatments and comorbidities, to answer the question below. The actions you can run (keywords are names of \
diseases, symptoms, tests, drugs or treatments):
{actions}

Question:
{question}

Retrieved so far:
{state}

Plan the next actions as JSON: {{"actions": [{{"action": "...", "keywords": ["...", "..."]}}]}}. Return an \
empty list of actions when what was retrieved is enough to answer or nothing more can be found."""


class PlannedAction(BaseModel):
    action: str
    keywords: list[str] = Field(default_factory=list)


class Plan(BaseModel):
    actions: list[PlannedAction] = Field(default_factory=list)


@dataclass(frozen=True)
class PlannerConfig:
    max_rounds: int = 3
    max_actions: int = 3  # per round
    max_keywords: int = 8  # per action
    plan_tokens: int = 256
    min_match_count: int = 1
    top_k_items: int = 10
    state_triples: int = 60  # triples shown to the planner; the state keeps them all
    temperature: float = 0.0  # of the planner's sampling (the paper's is "moderately high", not stated)

    def __post_init__(self) -> None:
        for name in ("max_rounds", "max_actions", "max_keywords", "plan_tokens", "min_match_count"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"planner {name} must be at least 1")
        if not 0.0 <= self.temperature <= 2.0:
            raise InvalidInputError(f"planner temperature must be in [0, 2], got {self.temperature}")


def plan_schema(config: PlannerConfig) -> dict[str, Any]:
    action = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": [a.value for a in Action]},
            "keywords": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 80},
                "minItems": 1,
                "maxItems": config.max_keywords,
            },
        },
        "required": ["action", "keywords"],
    }
    return {
        "type": "object",
        "properties": {"actions": {"type": "array", "items": action, "maxItems": config.max_actions}},
        "required": ["actions"],
    }


@dataclass
class RetrievalState:
    """Everything the actions returned so far, in the order it was found."""

    triples: dict[Triple, None] = field(default_factory=dict)  # an ordered set
    descriptions: dict[str, str] = field(default_factory=dict)
    rankings: list[tuple[Action, tuple[RankedDisease, ...]]] = field(default_factory=list)
    matches: list[KeywordMatch] = field(default_factory=list)

    def merge(
        self,
        action: Action,
        triples: tuple[Triple, ...],
        ranked: tuple[RankedDisease, ...],
        descriptions: dict[str, str],
        matches: tuple[KeywordMatch, ...],
    ) -> int:
        """Add one action's result; returns how many triples were new."""
        before = len(self.triples)
        self.triples.update(dict.fromkeys(triples))
        self.descriptions.update(descriptions)
        if ranked:
            self.rankings.append((action, ranked))
        self.matches.extend(matches)
        return len(self.triples) - before

    def summary(self, max_triples: int) -> str:
        if not self.triples and not self.rankings:
            return "(nothing yet)"
        lines = []
        for action, ranked in self.rankings:
            ranking = "; ".join(f"{d.name} ({d.match_count}: {', '.join(d.matched)})" for d in ranked)
            lines.append(f"{action.value}: {ranking}")
        triples = list(self.triples)
        lines += [f"({t.head}) -[{t.relation}]-> ({t.tail})" for t in triples[:max_triples]]
        if len(triples) > max_triples:
            lines.append(f"… and {len(triples) - max_triples} more facts")
        lines += [f"{name}: {text[:200]}" for name, text in self.descriptions.items()]
        return "\n".join(lines)


@dataclass
class PlannerRun:
    state: RetrievalState
    rounds: int
    stop_reason: str
    usage: Usage


class GraphPlanner:
    def __init__(
        self, model: ChatModel, store: GraphStore, matcher: NodeMatcher, config: PlannerConfig | None = None
    ) -> None:
        self.model = model
        self.store = store
        self.matcher = matcher
        self.config = config or PlannerConfig()

    async def run(self, question: str, trace: Trace) -> PlannerRun:
        state, usage = RetrievalState(), Usage()
        done: set[tuple[Action, tuple[str, ...]]] = set()
        for round_index in range(self.config.max_rounds):
            plan, cost = await self._plan(question, state, round_index, trace)
            usage += cost
            if plan is None:
                return PlannerRun(state, round_index + 1, "invalid plan", usage)
            if not plan.actions:
                return PlannerRun(state, round_index + 1, "empty plan", usage)
            requests = self._validate(plan, done, round_index, trace)
            if not requests:
                return PlannerRun(state, round_index + 1, "nothing new to run", usage)
            for request in requests:
                done.add((request.action, tuple(sorted(request.keywords))))
                self._run(request, state, round_index, trace)
        return PlannerRun(state, self.config.max_rounds, "max rounds", usage)

    async def _plan(
        self, question: str, state: RetrievalState, round_index: int, trace: Trace
    ) -> tuple[Plan | None, Usage]:
        """The round's plan (None when the reply is not a valid plan, recorded) and the call's usage."""
        actions = "\n".join(f"- {action.value}: {text}" for action, text in ACTION_HELP.items())
        prompt = PLAN_PROMPT.format(
            actions=actions, question=question, state=state.summary(self.config.state_triples)
        )
        request = ChatRequest.of(
            prompt,
            max_tokens=self.config.plan_tokens,
            temperature=self.config.temperature,
            json_schema=plan_schema(self.config),
        )
        with trace.step("deepdoctor.plan", round=round_index) as step:
            completion = await self.model.acomplete(request)
            step.usage = completion.usage
            try:
                plan = parse_structured(completion.text, Plan)
            except StructuredOutputError as exc:
                step.output = {"error": str(exc), "raw": completion.text}
                return None, completion.usage
            step.output = plan.model_dump()
        return plan, completion.usage

    def _validate(
        self, plan: Plan, done: set[tuple[Action, tuple[str, ...]]], round_index: int, trace: Trace
    ) -> list[ActionRequest]:
        """The plan's valid actions not run before; rejected and repeated ones are recorded."""
        accepted: list[ActionRequest] = []
        rejected, repeated = [], []
        for planned in plan.actions[: self.config.max_actions]:
            try:
                request = parse_request(
                    {
                        "action": planned.action,
                        "keywords": planned.keywords[: self.config.max_keywords],
                        "min_match_count": self.config.min_match_count,
                        "top_k_items": self.config.top_k_items,
                    }
                )
            except InvalidInputError as exc:
                rejected.append({"action": planned.action, "keywords": planned.keywords, "error": str(exc)})
                continue
            key = (request.action, tuple(sorted(request.keywords)))
            if key in done or any((a.action, tuple(sorted(a.keywords))) == key for a in accepted):
                repeated.append(json.loads(request.model_dump_json(include={"action", "keywords"})))
                continue
            accepted.append(request)
        with trace.step("deepdoctor.validate", round=round_index) as step:
            step.output = {
                "accepted": [r.model_dump(mode="json", include={"action", "keywords"}) for r in accepted],
                "rejected": rejected,
                "repeated": repeated,
            }
        return accepted

    def _run(self, request: ActionRequest, state: RetrievalState, round_index: int, trace: Trace) -> None:
        with trace.step(
            "deepdoctor.action", round=round_index, action=request.action.value, keywords=request.keywords
        ) as step:
            result = run_action(self.store, request, self.matcher)
            new = state.merge(
                request.action, result.triples, result.ranked, dict(result.descriptions), result.matches
            )
            step.output = {
                "matches": [
                    {"keyword": m.keyword, "node": m.node, "method": m.method, "score": m.score}
                    for m in result.matches
                ],
                "triples": len(result.triples),
                "new_triples": new,
                "ranked": [{"disease": d.name, "match_count": d.match_count} for d in result.ranked],
            }
