"""`deepdoctor`: DeepDoctor-RAG — the planner loop over the disease graph, then an answer from the evidence
pack.

The planner (`graph.planner`) chooses template actions round by round; the retrieval state becomes an
evidence pack of graph facts and disease descriptions, plus the MeSH mappings of the diseases found (when a
MeSH index is configured) and literature citations about the leading diseases (when a literature source is
configured: PubMed, Wikipedia or the offline PubMedQA index — best effort, under a deadline, failures
recorded in the trace, never failing the answer). The answer sees the numbered pack. The `strict` prompt
(deployment) answers only from the evidence and abstains otherwise; the `unstrict` prompt (evaluation, as in
the paper) lets the model use its own knowledge too. Tasks with options are answered by option scoring or by
generation (`answer`); an abstention is a recorded `AnswerParseError` on the case, never a guessed option.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from clinrag.core.models import Answer, Case, Evidence, case_text
from clinrag.graph.matching import NodeMatcher
from clinrag.graph.planner import GraphPlanner, PlannerConfig, RetrievalState
from clinrag.graph.store import GraphStore
from clinrag.literature.search import LiteratureSearch
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import AnswerMode, answer_case
from clinrag.methods.base import Method, MethodConfig, MethodContext, MethodSpec
from clinrag.methods.evidence_pack import EvidencePack, graph_evidence, mesh_evidence
from clinrag.methods.registry import register
from clinrag.methods.resources import DataPath, GraphUri
from clinrag.tasks.templates import task_prompt
from clinrag.terms.mesh_mapper import MeshMapper

STRICT = (
    " Answer only from the numbered evidence given. If the evidence does not support an answer, reply "
    "exactly: Insufficient evidence."
)
UNSTRICT = " Use the numbered evidence given where it helps; you may also use your own medical knowledge."
ABSTAIN = "insufficient evidence"


class DeepDoctorConfig(MethodConfig):
    """`deepdoctor` parameters (`--param name=value`)."""

    method_name: ClassVar[str] = "deepdoctor"

    graph: GraphUri | None = None  # a graph URI (else CLINRAG_GRAPH_URI, else clinrag's own server)
    mesh: DataPath | None = None  # a MeSH index (else <CLINRAG_HOME>/mesh/mesh.sqlite when it exists)
    prompt: Literal["strict", "unstrict"] = "strict"
    answer: AnswerMode = "score"
    max_rounds: int = Field(default=3, ge=1, le=10)
    max_actions: int = Field(default=3, ge=1, le=10)
    min_match_count: int = Field(default=1, ge=1)
    top_k_items: int = Field(default=10, ge=1, le=50)
    # the planner's sampling temperature: the paper samples "moderately high" without a figure; 0 here, so a
    # plan is reproducible and cached
    planner_temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_facts: int = Field(default=80, ge=1)  # graph facts shown in the answer prompt
    cited_diseases: int = Field(default=2, ge=0, le=10)  # leading diseases searched in the literature
    citations: int = Field(default=2, ge=1, le=10)  # citations kept per disease searched
    max_tokens: int = Field(default=256, ge=1)
    # off: the paper's non-retrieval baseline, the same (unstrict) prompt with no graph, MeSH or literature
    retrieval: bool = True

    @model_validator(mode="after")
    def _baseline_prompt(self) -> Self:
        if not self.retrieval and self.prompt == "strict":
            raise ValueError("retrieval=false is the unstrict prompt's baseline (the strict one abstains)")
        return self


class DeepDoctorMethod(Method):
    name = "deepdoctor"

    def __init__(
        self,
        model: ChatModel,
        store: GraphStore | None,
        config: DeepDoctorConfig | None = None,
        *,
        mesh: MeshMapper | None = None,
        literature: LiteratureSearch | None = None,
        graph_source: str = "graph",
    ) -> None:
        self.model = model
        self.store = store
        self.config = config or DeepDoctorConfig()
        self.mesh = mesh
        self.literature = literature if literature is not None and literature.sources else None
        self.graph_source = graph_source
        self.planner: GraphPlanner | None = None
        if store is None:  # the non-retrieval baseline
            return
        planner_config = PlannerConfig(
            max_rounds=self.config.max_rounds,
            max_actions=self.config.max_actions,
            min_match_count=self.config.min_match_count,
            top_k_items=self.config.top_k_items,
            temperature=self.config.planner_temperature,
        )
        self.planner = GraphPlanner(model, store, NodeMatcher(store), planner_config)

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        if self.planner is None:  # the non-retrieval baseline: the same prompt, no evidence
            await self._answer(case, EvidencePack(), answer)
            return answer
        question = case_text(case)
        run = await self.planner.run(question, answer.trace)
        answer.usage += run.usage  # the planner's own ledger: its calls, once
        with answer.trace.step("deepdoctor.planner", rounds=run.rounds) as step:
            step.output = {"stop_reason": run.stop_reason, "facts": len(run.state.triples)}
        diseases = leading_diseases(run.state)
        pack = self._pack(run.state, diseases, answer)
        if self.literature is not None and self.config.cited_diseases and diseases:
            pack.citations = await self._cite(diseases[: self.config.cited_diseases], answer)
        answer.evidence = pack.evidence()
        await self._answer(case, pack, answer)
        return answer

    def _pack(self, state: RetrievalState, diseases: list[str], answer: Answer) -> EvidencePack:
        facts, descriptions = graph_evidence(state, self.graph_source)
        pack = EvidencePack(facts=facts, descriptions=descriptions)
        if self.mesh is not None and diseases:
            with answer.trace.step("deepdoctor.mesh", names=len(diseases)) as step:
                mappings = self.mesh.map_many(diseases)
                pack.terms = mesh_evidence(mappings)
                step.output = {m.input: m.descriptor.ui if m.descriptor else None for m in mappings}
        return pack

    async def _cite(self, diseases: list[str], answer: Answer) -> list[Evidence]:
        """Citations about each disease, deduplicated; every source's outcome goes to the trace."""
        assert self.literature is not None
        with answer.trace.step(
            "deepdoctor.literature", queries=diseases, sources=self.literature.source_names
        ) as step:
            results = await asyncio.gather(
                *(self.literature.search(name, self.config.citations) for name in diseases)
            )
            step.output = {
                result.query: {
                    "citations": [e.id for e in result.evidence],
                    "failures": [f.model_dump(mode="json") for f in result.failures],
                    "elapsed_s": round(result.elapsed_s, 3),
                }
                for result in results
            }
        found = {e.id: e for result in results for e in result.evidence}
        return list(found.values())

    async def _answer(self, case: Case, pack: EvidencePack, answer: Answer) -> None:
        prompt = task_prompt(case)
        strict = self.config.prompt == "strict"
        request = ChatRequest.of(
            prompt.render(case, pack.render(self.config.max_facts) or "(no evidence was found)"),
            system=prompt.system + (STRICT if strict else UNSTRICT),
            max_tokens=self.config.max_tokens,
            temperature=0.0,
        )
        if strict and self.config.answer == "score" and not pack.evidence():
            # Scoring must pick an option; with nothing to answer from, the strict prompt abstains.
            answer.error = "AnswerParseError: abstained: the graph returned no evidence"
            answer.text = "Insufficient evidence."
            return
        await answer_case(self.model, request, case, prompt, answer, self.config.answer)
        if strict and answer.error and ABSTAIN in answer.text.casefold():
            answer.error = "AnswerParseError: abstained: the evidence does not support an answer"


def leading_diseases(state: RetrievalState) -> list[str]:
    """The diseases found, best first: those the inference actions ranked (in rank order), then the heads
    of the other facts, then the other described diseases."""
    ranked = [d.name for _, ranking in state.rankings for d in ranking]
    heads = [t.head for t in state.triples]
    return list(dict.fromkeys([*ranked, *heads, *state.descriptions]))


def build(context: MethodContext, config: DeepDoctorConfig) -> DeepDoctorMethod:
    from clinrag.literature.config import build_literature_search, literature_config

    if not config.retrieval:
        return DeepDoctorMethod(context.chat_model, None, config)
    uri = config.graph or context.settings.graph_uri
    mesh_path = Path(config.mesh) if config.mesh else context.settings.mesh_index_path
    mesh = None
    if config.mesh or mesh_path.is_file():
        from clinrag.terms.mesh import MeshIndex

        mesh = MeshMapper(MeshIndex(mesh_path))
    literature = build_literature_search(literature_config(context.settings))
    return DeepDoctorMethod(
        context.chat_model,
        context.graph_store(uri),
        config,
        mesh=mesh,
        literature=literature,
        graph_source=uri or "graph",
    )


SPEC = register(
    MethodSpec(
        name="deepdoctor",
        description="DeepDoctor-RAG: LLM-planned graph actions, then an answer from the evidence pack",
        config=DeepDoctorConfig,
        factory=build,
    )
)
