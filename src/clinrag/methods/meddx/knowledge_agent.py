"""MEDDxAgent's knowledge-retrieval agent: the driver's query becomes at most three keyword searches (LLM,
typed JSON), each run against every configured source — the knowledge base (statements), the disease graph
(a disease's symptoms, or the diseases with a symptom) and the literature (best effort, under its deadline,
failures recorded) — and what was found is synthesised into a short summary citing it as [E1], [E2], …

Only the evidence the summary cites is kept with the note (all of it when the summary cites nothing, so
nothing the model read is hidden)."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from clinrag.core.models import Answer, Evidence
from clinrag.core.provenance import Origin, case_origins
from clinrag.graph.actions import Action, ActionRequest, run_action
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.planner import RetrievalState
from clinrag.graph.store import GraphStore
from clinrag.knowledge.base import KnowledgeBase
from clinrag.literature.search import LiteratureSearch
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import complete, complete_structured
from clinrag.methods.evidence_pack import graph_evidence
from clinrag.methods.meddx.consultation import Consultation, KnowledgeNote

MAX_SEARCHES = 3
MAX_EVIDENCE_CHARS = 300

SEARCH_PROMPT = """Patient: {profile}

Question: {query}

Write at most {limit} short keyword searches (a disease or a symptom name each) that would find the medical \
knowledge needed to answer the question. Reply in JSON as {{"searches": [...]}}."""

SUMMARY_PROMPT = """Question: {query}

Evidence:
{evidence}

Summarise in at most four sentences what this evidence says that helps answer the question. Cite the \
evidence you use as [E1], [E2], … Use only the evidence given."""


Keyword = Annotated[str, StringConstraints(strip_whitespace=True, min_length=2, max_length=100)]


class Searches(BaseModel):
    searches: list[Keyword] = Field(min_length=1, max_length=MAX_SEARCHES)


@dataclass
class GraphSource:
    store: GraphStore
    name: str = "graph"
    items: int = 5

    def __post_init__(self) -> None:
        self.matcher = NodeMatcher(self.store)

    def search(self, keyword: str) -> list[Evidence]:
        """A disease's symptoms when the keyword names a disease, else the diseases having that symptom."""
        state = RetrievalState()
        for action in (Action.GET_SYMPTOMS, Action.INFER_DISEASES_BY_SYMPTOMS):
            request = ActionRequest(action=action, keywords=[keyword], top_k_items=self.items)
            result = run_action(self.store, request, self.matcher)
            if result.matched_nodes:
                state.merge(action, result.triples, result.ranked, dict(result.descriptions), result.matches)
                break
        facts, descriptions = graph_evidence(state, self.name)
        return [*descriptions[:1], *facts[: self.items]]


@dataclass
class KnowledgeAgent:
    model: ChatModel
    knowledge_base: KnowledgeBase | None = None
    graph: GraphSource | None = None
    literature: LiteratureSearch | None = None
    per_source: int = 3
    max_tokens: int = 160

    @property
    def source_names(self) -> list[str]:
        names = ["kb"] if self.knowledge_base is not None else []
        names += ["graph"] if self.graph is not None else []
        return names + (self.literature.source_names if self.literature is not None else [])

    async def retrieve(self, consultation: Consultation, query: str, answer: Answer) -> KnowledgeNote:
        with answer.trace.step("meddx.knowledge.searches", query=query) as step:
            request = ChatRequest.of(
                SEARCH_PROMPT.format(profile=consultation.profile_text(), query=query, limit=MAX_SEARCHES),
                max_tokens=96,
            )
            parsed, _ = await complete_structured(self.model, request, Searches, answer, step)
            searches = list(dict.fromkeys(parsed.searches))
            step.output = {"searches": searches}
        found: dict[str, Evidence] = {}
        with answer.trace.step("meddx.knowledge.sources", sources=self.source_names) as step:
            step.output = {}
            for keyword in searches:
                hits, failures = await self._search(keyword, case_origins(consultation.case))
                step.output[keyword] = {source: [e.id for e in items] for source, items in hits.items()}
                if failures:
                    step.output[keyword]["failures"] = failures
                for items in hits.values():
                    found.update((e.id, e) for e in items)
        evidence = list(found.values())
        if not evidence:
            summary = f"Nothing was found for: {'; '.join(searches) or query}."
            return KnowledgeNote(query, summary)
        with answer.trace.step("meddx.knowledge.summary", evidence=len(evidence)) as step:
            numbered = "\n".join(f"[E{i}] {e.text[:MAX_EVIDENCE_CHARS]}" for i, e in enumerate(evidence, 1))
            request = ChatRequest.of(
                SUMMARY_PROMPT.format(query=query, evidence=numbered), max_tokens=self.max_tokens
            )
            completion = await complete(self.model, request, answer, step)
            cited = sorted(
                {int(n) for n in re.findall(r"\[E(\d+)\]", completion.text) if 0 < int(n) <= len(evidence)}
            )
            step.output = {"summary": completion.text, "cited": [evidence[n - 1].id for n in cited]}
        kept = [evidence[n - 1] for n in cited] or evidence
        # The summary's [E#] are renumbered as evidence ids, so the note reads on its own.
        summary = re.sub(
            r"\[E(\d+)\]",
            lambda m: f"[{evidence[int(m.group(1)) - 1].id}]" if 0 < int(m.group(1)) <= len(evidence) else "",
            completion.text.strip(),
        )
        return KnowledgeNote(query, summary, kept)

    async def _search(
        self, keyword: str, exclude: Collection[Origin]
    ) -> tuple[dict[str, list[Evidence]], list[dict]]:
        """Each source's hits (no statement derived from `exclude`, the case's own record), and the
        literature failures as records (they never fail the search)."""
        hits: dict[str, list[Evidence]] = {}
        failures: list[dict] = []
        if self.knowledge_base is not None:
            search = self.knowledge_base.search(keyword, k=self.per_source, mode="rrf", exclude=exclude)
            hits["kb"] = search.evidence()
        if self.graph is not None:
            hits["graph"] = self.graph.search(keyword)
        if self.literature is not None:
            result = await self.literature.search(keyword, self.per_source)
            hits["literature"] = result.evidence
            failures = [f.model_dump(mode="json") for f in result.failures]
        return hits, failures
