"""`graph-infer`: no LLM — one INFER_DISEASES_BY_SYMPTOMS action over the disease graph with the patient's
findings as keywords; the differential is the diseases ranked by how many of those findings they have.

It is what the graph alone can do (DeepDoctor-RAG's retrieval without its planner or answerer), and the
baseline for `deepdoctor`. A finding is a keyword as written, except that a yes/no finding ("Do you have a
cough? Yes") is looked up by its question, which is how DDXPlus symptoms are named in the graph; a finding
answered otherwise ("How intense is the pain? 6") is an attribute, not a symptom, and is not looked up.
When the case has options, the differential keeps the diseases that are options.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from pydantic import Field

from clinrag.core.models import DDX_SIZE, Answer, Case, RankedDiagnosis, StructuredResult
from clinrag.graph.actions import MAX_KEYWORDS, TOP_K_MAX, Action, ActionRequest, run_action
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.planner import RetrievalState
from clinrag.graph.store import GraphStore
from clinrag.methods.base import Method, MethodConfig, MethodContext, MethodSpec
from clinrag.methods.evidence_pack import graph_evidence
from clinrag.methods.options import option_key
from clinrag.methods.registry import register
from clinrag.methods.resources import GraphUri

YES = " Yes"


class GraphInferConfig(MethodConfig):
    """`graph-infer` parameters (`--param name=value`)."""

    method_name: ClassVar[str] = "graph-infer"

    graph: GraphUri | None = None  # a graph URI (else CLINRAG_GRAPH_URI, else clinrag's own server)
    min_match_count: int = Field(default=1, ge=1)
    top_k_items: int = Field(default=TOP_K_MAX, ge=1, le=TOP_K_MAX)  # diseases the action returns
    fuzzy_threshold: float = Field(default=88.0, gt=0, le=100)


def symptom_keywords(case: Case) -> list[str]:
    """The patient's findings that can name a symptom: yes/no findings by their question, plain ones as
    written; attribute findings (a question or label followed by another value) are left out."""
    keywords = []
    for finding in case.patient.findings if case.patient else ():
        text = " ".join(finding.split())
        if text.endswith("?" + YES):
            keywords.append(text[: -len(YES)])
        elif "?" not in text and ":" not in text and text:
            keywords.append(text)
    return list(dict.fromkeys(keywords))


class GraphInfer(Method):
    name = "graph-infer"

    def __init__(
        self, store: GraphStore, config: GraphInferConfig | None = None, *, graph_source: str = "graph"
    ) -> None:
        self.store = store
        self.config = config or GraphInferConfig()
        self.matcher = NodeMatcher(store, fuzzy_threshold=self.config.fuzzy_threshold)
        self.graph_source = graph_source

    async def aanswer(self, case: Case) -> Answer:
        return await asyncio.to_thread(self._infer, case)

    def _infer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        keywords = symptom_keywords(case)
        if not keywords:
            answer.error = "InvalidInputError: the case has no findings to look up in the graph"
            return answer
        request = ActionRequest(
            action=Action.INFER_DISEASES_BY_SYMPTOMS,
            keywords=keywords[:MAX_KEYWORDS],
            min_match_count=self.config.min_match_count,
            top_k_items=self.config.top_k_items,
        )
        with answer.trace.step(
            "graph.action", action=request.action.value, keywords=len(keywords), used=len(request.keywords)
        ) as step:
            result = run_action(self.store, request, self.matcher)
            step.output = {
                "matched": len(result.matched_nodes),
                "matches": [[m.keyword, m.node, m.method, round(m.score, 1)] for m in result.matches],
                "ranked": [[d.name, d.match_count] for d in result.ranked],
            }
        ranked = [
            d for d in result.ranked if not case.options or option_key(d.name, case.options) in case.options
        ]
        if not ranked:
            answer.error = "the graph matched no disease to these findings"
            answer.text = "No disease in the graph has these findings."
            return answer
        matched = len(result.matched_nodes)
        ddx = [RankedDiagnosis(name=d.name, probability=d.match_count / matched) for d in ranked[:DDX_SIZE]]
        answer.result = StructuredResult(choice=option_key(ddx[0].name, case.options), ddx=ddx)
        answer.text = "Diseases by matched findings: " + "; ".join(
            f"{d.name} ({d.match_count}/{matched})" for d in ranked[:DDX_SIZE]
        )
        state = RetrievalState()
        top = {d.name for d in ranked[:DDX_SIZE]}
        state.merge(
            request.action,
            tuple(t for t in result.triples if t.head in top),
            (),
            {name: text for name, text in result.descriptions.items() if name in top},
            result.matches,
        )
        facts, descriptions = graph_evidence(state, self.graph_source)
        answer.evidence = [*descriptions, *facts]
        return answer


def build(context: MethodContext, config: GraphInferConfig) -> GraphInfer:
    uri = config.graph or context.settings.graph_uri
    return GraphInfer(context.graph_store(uri), config, graph_source=uri or "graph")


SPEC = register(
    MethodSpec(
        name="graph-infer",
        description="no LLM: diseases ranked by the patient's findings they have in the disease graph",
        config=GraphInferConfig,
        factory=build,
        uses_llm=False,
    )
)
