"""`rag`: MedRAG-style vanilla retrieval-augmented generation — retrieve N documents from a corpus index
(`rrf`: dense + BM25 fused by reciprocal rank, the default; `dense`; `lexical` BM25; or the
concept-constrained `concept` / `hybrid`), put them before the question, answer.

The corpus is any knowledge base (`clinrag kb build`; a document corpus is built with `--no-rewrite` so its
chunks stay as written). The retrieval query is the question with its options, as in MedRAG. A retrieval that
finds nothing is answered without documents, and the trace says so. Documents derived from the case's own
record (its `Case.meta["provenance"]`) are never retrieved. `DocumentRetriever` and `answer_query` are also
i-MedRAG's per-query RAG."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any, ClassVar

from pydantic import Field

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, Evidence, case_text
from clinrag.core.provenance import Origin, case_origins
from clinrag.knowledge.base import KnowledgeBase, SearchMode
from clinrag.knowledge.tagging import Tagger
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import AnswerMode, Ledger, answer_case, complete
from clinrag.methods.base import Method, MethodConfig, MethodContext, MethodSpec
from clinrag.methods.registry import register
from clinrag.methods.resources import DataPath
from clinrag.tasks.templates import task_prompt

NOTHING_FOUND = "No relevant documents were found for this question."

QUERY_PROMPT = """Here are documents that may help:
{documents}

Answer the question briefly (one or two sentences), using the documents. If they do not contain the answer, \
say so.

Question: {query}"""


class RAGConfig(MethodConfig):
    """`rag` parameters (`--param name=value`)."""

    method_name: ClassVar[str] = "rag"

    corpus: DataPath | None = None  # a knowledge base directory (else CLINRAG_KB_PATH)
    k: int = Field(default=5, ge=1, le=64)  # documents retrieved (MedRAG's N)
    retriever: SearchMode = "rrf"
    answer: AnswerMode = "score"  # options: by likelihood, or generated and parsed
    max_tokens: int = Field(default=256, ge=1)


class DocumentRetriever:
    """Top-k documents of a corpus for a query, as evidence, with the record of how they were found."""

    def __init__(
        self, corpus: KnowledgeBase, *, k: int, retriever: SearchMode, tagger: Tagger | None
    ) -> None:
        if retriever in ("concept", "hybrid") and tagger is None:
            raise InvalidInputError(f"the {retriever} retriever needs a concept tagger")
        self.corpus = corpus
        self.k = k
        self.retriever = retriever
        self.tagger = tagger

    def retrieve(self, query: str, exclude: Collection[Origin] = ()) -> tuple[list[Evidence], dict[str, Any]]:
        """The top-k documents, none derived from an origin in `exclude` (the case being answered)."""
        search = self.corpus.search(query, k=self.k, mode=self.retriever, tagger=self.tagger, exclude=exclude)
        record = {"retriever": self.retriever, "query_tags": search.query_tags, **search.record}
        return search.evidence(), record

    async def aretrieve(
        self, query: str, exclude: Collection[Origin] = ()
    ) -> tuple[list[Evidence], dict[str, Any]]:
        return await asyncio.to_thread(self.retrieve, query, exclude)


def render_documents(documents: list[Evidence]) -> str:
    return "\n".join(f"Document [{item.id}]: {item.text}" for item in documents)


async def answer_query(
    model: ChatModel,
    retriever: DocumentRetriever,
    query: str,
    ledger: Ledger,
    *,
    max_tokens: int,
    exclude: Collection[Origin] = (),
) -> tuple[str, list[Evidence]]:
    """A short answer to one query from the documents retrieved for it (none derived from `exclude`); when
    nothing is retrieved the answer says so, without a model call."""
    with ledger.trace.step("query", query=query) as step:
        documents, record = await retriever.aretrieve(query, exclude)
        step.output = {"retrieval": record, "documents": [item.id for item in documents]}
        if not documents:
            step.output["answer"] = NOTHING_FOUND
            return NOTHING_FOUND, []
        prompt = QUERY_PROMPT.format(documents=render_documents(documents), query=query)
        request = ChatRequest.of(prompt, max_tokens=max_tokens, temperature=0.0)
        completion = await complete(model, request, ledger, step)
        step.output["answer"] = completion.text.strip()
    return completion.text.strip(), documents


def retrieval_query(case: Case) -> str:
    """The question with its options (MedRAG retrieves with both)."""
    options = " ".join(case.options.values())
    return f"{case_text(case)} {options}".strip()


class RAGMethod(Method):
    name = "rag"

    def __init__(
        self, model: ChatModel, retriever: DocumentRetriever, config: RAGConfig | None = None
    ) -> None:
        self.model = model
        self.retriever = retriever
        self.config = config or RAGConfig()

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        with answer.trace.step("retrieve", k=self.config.k) as step:
            documents, record = await self.retriever.aretrieve(retrieval_query(case), case_origins(case))
            step.output = {**record, "documents": [item.id for item in documents]}
            if not documents:
                step.output["note"] = NOTHING_FOUND
        answer.evidence = documents
        prompt = task_prompt(case)
        context = render_documents(documents) if documents else None
        request = ChatRequest.of(
            prompt.render(case, context),
            system=prompt.system,
            max_tokens=self.config.max_tokens,
            temperature=0.0,
        )
        await answer_case(self.model, request, case, prompt, answer, self.config.answer)
        return answer


def build_retriever(
    context: MethodContext, corpus: str | None, k: int, retriever: SearchMode
) -> DocumentRetriever:
    """The retriever over the corpus at `corpus` (else CLINRAG_KB_PATH), with the configured tagger where the
    retriever is concept-constrained."""
    from clinrag.knowledge.factory import build_tagger

    knowledge = context.knowledge_base(corpus, param="corpus")
    tagger = build_tagger(context.settings, context.embedder) if retriever in ("concept", "hybrid") else None
    return DocumentRetriever(knowledge, k=k, retriever=retriever, tagger=tagger)


SPEC = register(
    MethodSpec(
        name="rag",
        description="vanilla RAG (MedRAG): N documents from a corpus index, then the answer",
        config=RAGConfig,
        factory=lambda context, config: RAGMethod(
            context.chat_model, build_retriever(context, config.corpus, config.k, config.retriever), config
        ),
    )
)
