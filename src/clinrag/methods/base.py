"""The contract every method implements, the context a method is built from, and its registered spec."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from clinrag.core.buildcache import BuildCache
from clinrag.core.errors import InvalidInputError, validation_problems
from clinrag.core.models import Answer, Case
from clinrag.core.settings import Settings
from clinrag.embed.base import Embedder
from clinrag.llm.base import ChatModel
from clinrag.methods.parameter_sets import preset_values
from clinrag.patients.record import PatientRecord

if TYPE_CHECKING:
    from clinrag.graph.store import GraphStore
    from clinrag.knowledge.base import KnowledgeBase
    from clinrag.patients.base import PatientBase
    from clinrag.patients.similarity import SimilarPatients


T = TypeVar("T")
SHARED_PARTS = 4  # heavy parts a context's cache keeps by default


class Method(ABC):
    """Answers cases. `aanswer` is the one entry point a method implements (a method whose work blocks runs
    it in a worker thread); `answer` runs it to completion from synchronous code. `model` is the chat model
    the method answers with (None for methods without one)."""

    name: str
    model: ChatModel | None = None

    @abstractmethod
    async def aanswer(self, case: Case) -> Answer: ...

    def answer(self, case: Case) -> Answer:
        return run_sync(self.aanswer(case))


def run_sync(coroutine: Coroutine[object, object, T]) -> T:
    """Run a coroutine to completion from synchronous code — in a thread of its own when this thread is
    already running an event loop (asyncio.run cannot nest)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


class MethodConfig(BaseModel):
    """A method's parameters (`--param name=value`): subclasses name the method and declare the fields;
    an unknown name or an invalid value is an `InvalidInputError` that lists every problem. `preset` names a
    parameter set of the method (`preset=paper`: the paper's published configuration, `parameter_sets`),
    applied under the parameters given with it."""

    # Infinity and NaN (which JSON readers accept) are no parameter value: a number must be finite
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
    method_name: ClassVar[str]
    preset: str | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Self:
        if isinstance(name := params.get("preset"), str):
            params = {**preset_values(cls.method_name, name, set(cls.model_fields)), **params}
        try:
            return cls(**params)
        except ValidationError as exc:
            problems = validation_problems(exc.errors(), root="parameters")
            raise InvalidInputError(f"invalid {cls.method_name} parameters: {problems}") from None

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, values: Any) -> Any:
        """`true` is not the number 1: a boolean given for a numeric parameter is refused."""
        if isinstance(values, dict):
            for name, value in values.items():
                field = cls.model_fields.get(name)
                if isinstance(value, bool) and field is not None and _numeric(field.annotation):
                    raise ValueError(f"{name}: expected a number, got {str(value).lower()}")
        return values


def _numeric(annotation: object) -> bool:
    """An int or float field, optional or not."""
    return annotation in (int, float) or any(a in (int, float) for a in get_args(annotation))


@dataclass
class MethodContext:
    """What a method may be built from. Models are built on first use, so a method that needs no LLM never
    loads one; `experience` is the patient base (e.g. the training split of the evaluated dataset) and
    `labels` maps each of its record ids to labels in the cases' answer space; `patient_base` is the same
    records as a saved base whose narratives are already embedded, when there is one. `corpora` and `graphs`
    record every knowledge base and graph the method was given (what it may retrieve from), for the
    evaluation's overlap check and report. `shared` holds the heavy parts a method builds from data (a
    loaded knowledge base, the consultation's disease model): contexts given the same cache share them, so
    methods that differ only in light parameters cost one copy."""

    settings: Settings
    params: dict[str, Any] = field(default_factory=dict)
    experience: Sequence[PatientRecord] = ()
    labels: dict[str, list[str]] = field(default_factory=dict)
    chat_model_factory: Callable[[Settings], ChatModel] | None = None
    embedder_factory: Callable[[Settings], Embedder] | None = None
    patient_base: PatientBase | None = None
    knowledge: KnowledgeBase | None = None  # a loaded base used where a method is given no path
    corpora: list[KnowledgeBase] = field(default_factory=list)
    graphs: list[str | None] = field(default_factory=list)  # their URIs (None: clinrag's own server)
    shared: BuildCache[Any] = field(default_factory=lambda: BuildCache(SHARED_PARTS))

    def similar_patients(self) -> SimilarPatients:
        """Similar-patient search over the experience (the saved base's index when there is one)."""
        from clinrag.patients.similarity import SimilarPatients

        if self.patient_base is not None:
            return SimilarPatients.from_base(self.patient_base)
        return SimilarPatients(self.experience, embedder=lambda: self.embedder)

    @cached_property
    def chat_model(self) -> ChatModel:
        if self.chat_model_factory is None:
            from clinrag.llm.factory import build_chat_model

            return build_chat_model(self.settings)
        return self.chat_model_factory(self.settings)

    def knowledge_base(self, path: str | None, *, param: str, without: str | None = None) -> KnowledgeBase:
        """The knowledge base (or document corpus) at `path` — a method parameter named `param` — else at
        the configured place (CLINRAG_KB_PATH / the clinrag home); `without` names the parameter that runs
        the method without one, for the error message."""
        from clinrag.knowledge.base import INFO_FILE, KnowledgeBase

        if path is None and self.knowledge is not None:
            base = self.knowledge
        else:
            directory = Path(path) if path else self.settings.knowledge_base_path
            if not (directory / INFO_FILE).is_file():
                hint = f", or run without one (--param {without})" if without else ""
                raise InvalidInputError(
                    f"no knowledge base at {directory}: build one with `clinrag kb build` and pass "
                    f"--param {param}=PATH or set CLINRAG_KB_PATH{hint}"
                )
            embedder = self.embedder
            base = self.shared.get(
                ("knowledge-base", directory.resolve(), id(embedder)),
                lambda: KnowledgeBase.load(directory, embedder),
            )
        self.corpora.append(base)
        return base

    def graph_store(self, uri: str | None) -> GraphStore:
        """The disease graph at `uri` (a method parameter), else at CLINRAG_GRAPH_URI, else clinrag's own
        FalkorDB server on its home directory (started if it is not running)."""
        from clinrag.graph.factory import open_graph

        uri = uri or self.settings.graph_uri
        self.graphs.append(uri)
        return open_graph(uri, None if uri else self.settings.graph_data_dir)

    @cached_property
    def embedder(self) -> Embedder:
        if self.embedder_factory is None:
            from clinrag.embed.factory import build_embedder

            return build_embedder(self.settings)
        return self.embedder_factory(self.settings)


C = TypeVar("C", bound=MethodConfig)


@dataclass(frozen=True)
class MethodSpec(Generic[C]):
    """A registered method: its name, a one-line description, its parameters, and how to build it from a
    context and validated parameters. `uses_patients`: it draws on the context's patient base (a server
    opens its default base only for such a method); `needs_experience`: it cannot answer without one."""

    name: str
    description: str
    config: type[C]
    factory: Callable[[MethodContext, C], Method]
    uses_llm: bool = True
    needs_experience: bool = False
    uses_patients: bool = False

    def build(self, context: MethodContext) -> Method:
        """The method for `context`; invalid parameters are an `InvalidInputError` naming each field."""
        return self.factory(context, self.config.from_params(context.params))
