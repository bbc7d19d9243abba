"""`imedrag`: i-MedRAG (Xiong et al. 2024, Algorithm 1) — m iterations of n follow-up queries.

The first iteration writes its queries from the question alone; each later one sees the question and the
history of (query, answer) pairs, analyses what is known, then writes new queries ("reason, then query").
Every query is answered by vanilla RAG over the corpus (`rag.answer_query`), the n queries of one iteration
concurrently; a query already asked is not asked again. The final answer sees the question and the whole
history, and with `final_analysis` (the paper's last step) an analysis of both the model writes first. With
`adaptive_stop` the model also says whether the history already suffices, and a "yes" ends the iterations
early (the paper's future work: measured, not assumed to help).

Queries are requested as JSON under a schema (a grammar for the embedded model), so a small model always
returns a parsable list; a reply that still fails validation ends the iterations, is recorded in the trace,
and the answer is given from the history so far."""

from __future__ import annotations

import asyncio
import re
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from clinrag.core.errors import StructuredOutputError
from clinrag.core.models import Answer, Case, Evidence, case_text
from clinrag.core.provenance import case_origins
from clinrag.knowledge.base import SearchMode
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import parse_structured
from clinrag.methods.answering import AnswerMode, answer_case, complete
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.rag import DocumentRetriever, answer_query, build_retriever
from clinrag.methods.registry import register
from clinrag.methods.resources import DataPath
from clinrag.tasks.render import options_block
from clinrag.tasks.templates import task_prompt

QUERY_CHARS = 200
ANALYSIS_CHARS = 600

FIRST_QUERIES = """You are a medical expert answering the question below. Before answering, you may look \
things up: write up to {n} short questions whose answers would help you answer it. Each must stand on its \
own (name the condition, drug or finding; do not write "this patient").

{question}

First analyse the question in a few sentences, then write the questions."""

NEXT_QUERIES = """You are a medical expert answering the question below. Questions you have already looked \
up, with the answers found:

{history}

{question}

First analyse what the answers above establish and what is still missing, then write up to {n} new short \
questions that would help you answer (not ones already asked). Each must stand on its own."""

FINAL_ANALYSIS = """Analyse the medical question below step by step, in a few sentences, using the answers \
found to the questions you looked up. Do not give the final answer yet.

Questions you looked up, with the answers found:

{history}

{question}"""

ADAPTIVE = ' If the information above is already enough to answer, set "enough_information" to true.'


class IMedRAGConfig(MethodConfig):
    """`imedrag` parameters (`--param name=value`)."""

    method_name: ClassVar[str] = "imedrag"

    corpus: DataPath | None = None  # a knowledge base directory (else CLINRAG_KB_PATH)
    iterations: int = Field(default=2, ge=1, le=10)  # m
    queries: int = Field(default=2, ge=1, le=10)  # n per iteration
    k: int = Field(default=5, ge=1, le=64)  # documents retrieved per query (N)
    retriever: SearchMode = "rrf"
    answer: AnswerMode = "score"
    adaptive_stop: bool = False
    query_tokens: int = Field(default=256, ge=32)  # the analysis and the queries of one iteration
    answer_tokens: int = Field(default=128, ge=16)  # one query's answer
    max_tokens: int = Field(default=256, ge=1)  # the final answer (free-text tasks)
    # the paper's last step: an analysis of the question and the history, written before the answer and
    # shown to it (off: the answer sees the history alone)
    final_analysis: bool = False
    analysis_tokens: int = Field(default=256, ge=32)


class FollowUp(BaseModel):
    analysis: str = ""
    enough_information: bool = False
    queries: list[str] = Field(default_factory=list)


class Exchange(BaseModel):
    """One follow-up query, its answer, the iteration that asked it and the documents the answer used."""

    iteration: int
    query: str
    answer: str
    documents: list[str] = Field(default_factory=list)


def followup_schema(n: int, adaptive: bool) -> dict[str, Any]:
    """JSON schema of one iteration's reply: analysis first (reason, then query), then the queries."""
    properties: dict[str, Any] = {"analysis": {"type": "string", "maxLength": ANALYSIS_CHARS}}
    if adaptive:
        properties["enough_information"] = {"type": "boolean"}
    properties["queries"] = {
        "type": "array",
        "items": {"type": "string", "minLength": 3, "maxLength": QUERY_CHARS},
        "minItems": 0 if adaptive else 1,
        "maxItems": n,
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


def render_history(history: list[Exchange]) -> str:
    return "\n".join(f"Q{i}: {item.query}\nA{i}: {item.answer}" for i, item in enumerate(history, 1))


def question_block(case: Case) -> str:
    text = f"Question: {case_text(case)}"
    return f"{text}\n\nOptions:\n{options_block(case.options)}" if case.options else text


def normalized_query(query: str) -> str:
    return re.sub(r"\W+", " ", query.casefold()).strip()


class IMedRAGMethod(Method):
    name = "imedrag"

    def __init__(
        self, model: ChatModel, retriever: DocumentRetriever, config: IMedRAGConfig | None = None
    ) -> None:
        self.model = model
        self.retriever = retriever
        self.config = config or IMedRAGConfig()

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        history: list[Exchange] = []
        evidence: dict[str, Evidence] = {}
        for iteration in range(self.config.iterations):
            followup = await self._follow_up(case, history, iteration, answer)
            if followup is None or (self.config.adaptive_stop and followup.enough_information):
                break
            queries = self._new_queries(followup.queries, history, iteration, answer)
            if not queries:
                continue
            results = await asyncio.gather(
                *(
                    answer_query(
                        self.model,
                        self.retriever,
                        query,
                        answer,
                        max_tokens=self.config.answer_tokens,
                        exclude=case_origins(case),
                    )
                    for query in queries
                )
            )
            for query, (reply, documents) in zip(queries, results, strict=True):
                evidence.update((item.id, item) for item in documents)
                history.append(
                    Exchange(
                        iteration=iteration,
                        query=query,
                        answer=reply,
                        documents=[item.id for item in documents],
                    )
                )
        answer.evidence = list(evidence.values())
        await self._final_answer(case, history, answer)
        return answer

    async def _follow_up(
        self, case: Case, history: list[Exchange], iteration: int, answer: Answer
    ) -> FollowUp | None:
        """The iteration's analysis and queries, or None when the reply was not valid (recorded)."""
        n = self.config.queries
        question = question_block(case)
        text = (
            NEXT_QUERIES.format(history=render_history(history), question=question, n=n)
            if history
            else FIRST_QUERIES.format(question=question, n=n)
        )
        asks_if_enough = self.config.adaptive_stop and bool(history)
        if asks_if_enough:
            text += ADAPTIVE
        request = ChatRequest.of(
            text,
            max_tokens=self.config.query_tokens,
            temperature=0.0,
            json_schema=followup_schema(n, asks_if_enough),
        )
        with answer.trace.step("imedrag.queries", iteration=iteration, history=len(history)) as step:
            completion = await complete(self.model, request, answer, step)
            try:
                followup = parse_structured(completion.text, FollowUp)
            except StructuredOutputError as exc:
                step.output = {"error": str(exc), "raw": completion.text}
                return None
            step.output = followup.model_dump(exclude=None if asks_if_enough else {"enough_information"})
        return followup

    def _new_queries(
        self, proposed: list[str], history: list[Exchange], iteration: int, answer: Answer
    ) -> list[str]:
        """The proposed queries not asked before (in this iteration or earlier), at most n."""
        seen = {normalized_query(item.query) for item in history}
        fresh, repeated = [], []
        for query in (q.strip() for q in proposed):
            key = normalized_query(query)
            if not key or key in seen:
                repeated.append(query)
                continue
            seen.add(key)
            fresh.append(query)
        fresh = fresh[: self.config.queries]
        with answer.trace.step("imedrag.dedupe", iteration=iteration) as step:
            step.output = {"asked": fresh, "repeated": repeated}
        return fresh

    async def _analysis(self, case: Case, history: list[Exchange], answer: Answer) -> str:
        """The analysis of the question and the history that precedes the answer."""
        request = ChatRequest.of(
            FINAL_ANALYSIS.format(history=render_history(history) or "(none)", question=question_block(case)),
            max_tokens=self.config.analysis_tokens,
            temperature=0.0,
        )
        with answer.trace.step("imedrag.analysis", exchanges=len(history)) as step:
            analysis = (await complete(self.model, request, answer, step)).text.strip()
            step.output = {"analysis": analysis}
        return analysis

    async def _final_answer(self, case: Case, history: list[Exchange], answer: Answer) -> None:
        prompt = task_prompt(case)
        context = render_history(history)
        if self.config.final_analysis:
            analysis = await self._analysis(case, history, answer)
            context = f"{context}\n\nAnalysis: {analysis}".strip() if analysis else context
        request = ChatRequest.of(
            prompt.render(case, context or None),
            system=prompt.system,
            max_tokens=self.config.max_tokens,
            temperature=0.0,
        )
        with answer.trace.step("imedrag.history", exchanges=len(history)) as step:
            step.output = {"history": [item.model_dump() for item in history]}
        await answer_case(self.model, request, case, prompt, answer, self.config.answer)


SPEC = register(
    MethodSpec(
        name="imedrag",
        description="i-MedRAG: m iterations of n follow-up queries answered by RAG, then the answer",
        config=IMedRAGConfig,
        factory=lambda context, config: IMedRAGMethod(
            context.chat_model, build_retriever(context, config.corpus, config.k, config.retriever), config
        ),
    )
)
