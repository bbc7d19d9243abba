"""Method parameters that name something outside the request — a file or folder, a graph server — declare
it in their type (`DataPath`, `GraphUri`, `GraphSources`, `DatasetPath`), so a server can tell what a
client's parameters would reach and refuse what its operator did not allow (`ResourcePolicy`), whatever
the method. A graph URI of a scheme no store speaks is invalid input wherever it is given."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel

from clinrag.core.errors import InvalidInputError

Kind = Literal["path", "graph", "sources", "dataset"]


@dataclass(frozen=True)
class Resource:
    """What a parameter's value names: `path` a file or folder; `graph` a graph URI; `sources` graph
    sources, comma-separated, each KIND:PATH or a packaged source's exact name; `dataset` DATASET:PATH."""

    kind: Kind

    def locations(self, value: str) -> Iterator[tuple[Literal["path", "graph"], str]]:
        if self.kind == "path":
            yield "path", value
        elif self.kind == "graph":
            yield "graph", value
        elif self.kind == "dataset":
            yield "path", value.partition(":")[2]
        else:
            for spec in (part.strip() for part in value.split(",")):
                if spec and not _names_no_path(spec):
                    yield "path", spec.partition(":")[2]


def _names_no_path(spec: str) -> bool:
    """A registered source spelled in full (packaged:hpo-diseases) reads no path of the user's."""
    from clinrag.graph.importers.registry import PATH, source_forms

    return spec in source_forms() and not spec.endswith(f":{PATH}")


def _supported_graph_uri(uri: str) -> str:
    from clinrag.graph.factory import graph_scheme

    graph_scheme(uri)  # a ValueError naming the schemes a store speaks
    return uri


DataPath = Annotated[str, Resource("path")]
GraphUri = Annotated[str, AfterValidator(_supported_graph_uri), Resource("graph")]
GraphSources = Annotated[str, Resource("sources")]
DatasetPath = Annotated[str, Resource("dataset")]


def named_resources(config: BaseModel) -> Iterator[tuple[str, Literal["path", "graph"], str]]:
    """(parameter, kind, location) for every file, folder or graph URI the parameters name."""
    for name, field in type(config).model_fields.items():
        value = getattr(config, name)
        if not isinstance(value, str):
            continue
        metadata = (*field.metadata, *_nested_metadata(field.annotation))
        marker = next((m for m in metadata if isinstance(m, Resource)), None)
        if marker is not None:
            for kind, location in marker.locations(value):
                yield name, kind, location


def _nested_metadata(annotation: object) -> list[object]:
    """The metadata of an Annotated type inside an Optional (`DataPath | None`)."""
    found: list[object] = []
    for argument in get_args(annotation):
        found.extend(getattr(argument, "__metadata__", ()))
    return found


@dataclass(frozen=True)
class ResourcePolicy:
    """What a client's parameters may name on this server: files under `data_roots`, graphs among
    `graph_uris`. The check opens nothing and connects to nothing, and its refusal reads the same whether
    the thing exists or not."""

    data_roots: Sequence[Path] = ()
    graph_uris: Sequence[str] = ()

    def check(self, config: BaseModel) -> None:
        roots = [Path(os.path.realpath(root)) for root in self.data_roots]
        for name, kind, location in named_resources(config):
            if kind == "graph" and location not in self.graph_uris:
                raise InvalidInputError(
                    f"params.{name}: this server does not let requests name graph URIs other than those its "
                    "operator allows (CLINRAG_API_GRAPH_URIS); leave it out to use the server's own graph"
                )
            if kind == "path" and not any(_inside(location, root) for root in roots):
                raise InvalidInputError(
                    f"params.{name}: this server does not let requests name files outside the folders its "
                    "operator allows (CLINRAG_API_DATA_ROOTS)"
                )


def _inside(location: str, root: Path) -> bool:
    # realpath follows symbolic links, so a link under a root cannot lead outside it
    return Path(os.path.realpath(location)).is_relative_to(root)
