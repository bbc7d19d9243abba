"""The registry of graph sources: each importer module registers how its sources are named and read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clinrag.core.errors import InvalidInputError
from clinrag.core.registry import Registry
from clinrag.graph.importers.records import SourceRecords

PATH = "PATH"


@dataclass(frozen=True)
class GraphSource:
    """`form` is how the source is named on the command line: "KIND:PATH" for a source read from a path,
    else the exact spec ("packaged:hpo-diseases"). `read(argument, limit)` gets the part of the spec after
    the first colon (the path) and the most diseases to read."""

    form: str
    read: Callable[[str, int | None], SourceRecords]


IMPORTERS: Registry[GraphSource] = Registry(
    "graph source", packages=["clinrag.graph.importers"], entry_point_group="clinrag.graph_importers"
)


def register(source: GraphSource) -> GraphSource:
    return IMPORTERS.register(source.form, source)


def source_forms() -> tuple[str, ...]:
    return tuple(IMPORTERS.names())


def read_source(spec: str, *, limit: int | None = None) -> SourceRecords:
    """The disease records of one source spec (see `clinrag.graph.importers`); at most `limit` diseases."""
    kind, _, rest = spec.partition(":")
    sources = IMPORTERS.items()
    found = sources.get(spec) or (sources.get(f"{kind}:{PATH}") if rest else None)
    if found is None:
        raise InvalidInputError(f"unknown graph source {spec!r}; use one of: {', '.join(source_forms())}")
    return found.read(rest, limit)
