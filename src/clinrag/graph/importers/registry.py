"""The registry of graph sources: each importer module registers how its sources are named and read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clinrag.core.errors import InvalidInputError
from clinrag.core.registry import Registry
from clinrag.core.settings import Settings
from clinrag.graph.importers.records import FindingTerm, SourceRecords, SourceTraits
from clinrag.llm.base import ChatModel

PATH = "PATH"


@dataclass
class SourceContext:
    """What a source that runs a model needs besides its spec: the settings (chat model, MeSH index), a
    folder for its own resumable work, and whether to show progress. `chat_model` is built from the
    settings on first use unless one is given."""

    settings: Settings
    work_dir: Path
    progress: bool = True
    chat_model: ChatModel | None = None

    def model(self) -> ChatModel:
        if self.chat_model is None:
            from clinrag.llm.factory import build_chat_model

            self.chat_model = build_chat_model(self.settings)
        return self.chat_model


@dataclass(frozen=True)
class GraphSource:
    """`form` is how the source is named on the command line: "KIND:PATH" for a source read from a path,
    else the exact spec ("packaged:hpo-diseases"). `read(argument, limit)` gets the part of the spec after
    the first colon (the path) and the most diseases (records) to read; a source that `needs_context` is
    read as `read(argument, limit, context)` with a `SourceContext`. `traits` declares what its knowledge
    is; `findings(argument)`, when the source names its findings in a vocabulary of its own (DDXPlus'
    evidences), lists them (else its diseases' symptom names are its findings); `names_in(language)`, when
    the source names its findings in other languages too, maps each of its names to those of `language`."""

    form: str
    read: Callable[..., SourceRecords]
    traits: SourceTraits
    needs_context: bool = False
    findings: Callable[[str], list[FindingTerm]] | None = None
    names_in: Callable[[str], dict[str, tuple[str, ...]]] | None = None


IMPORTERS: Registry[GraphSource] = Registry(
    "graph source", packages=["clinrag.graph.importers"], entry_point_group="clinrag.graph_importers"
)


def register(source: GraphSource) -> GraphSource:
    return IMPORTERS.register(source.form, source)


def source_forms() -> tuple[str, ...]:
    return tuple(IMPORTERS.names())


def graph_source(spec: str) -> GraphSource:
    """The registered source a spec names ("packaged:hpo-diseases", "ddxplus:PATH")."""
    kind, _, rest = spec.partition(":")
    sources = IMPORTERS.items()
    found = sources.get(spec) or (sources.get(f"{kind}:{PATH}") if rest else None)
    if found is None:
        raise InvalidInputError(f"unknown graph source {spec!r}; use one of: {', '.join(source_forms())}")
    return found


def source_findings(spec: str) -> list[FindingTerm]:
    """The findings a source names in its own vocabulary (none when its symptom names are its findings)."""
    found = graph_source(spec)
    return found.findings(spec.partition(":")[2]) if found.findings is not None else []


def read_source(
    spec: str, *, limit: int | None = None, context: SourceContext | None = None
) -> SourceRecords:
    """The disease records of one source spec (see `clinrag.graph.importers`); at most `limit` diseases."""
    found = graph_source(spec)
    rest = spec.partition(":")[2]
    if not found.needs_context:
        return found.read(rest, limit)
    if context is None:
        raise InvalidInputError(
            f"graph source {spec!r} runs the chat model: import it with `clinrag graph build`"
        )
    return found.read(rest, limit, context)
