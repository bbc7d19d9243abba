"""Benchmark validity of an evaluation run: what the method could retrieve from, and whether that lets it see
the answers.

- Overlap: a knowledge base built from a file the evaluated dataset reads (the MedQA test file as the corpus
  of a MedQA run) holds the cases' answers. A run refuses it unless allowed (`--allow-overlap`); retrieval
  leaves each case's own record out either way (`clinrag.core.provenance`).
- The generating table: DDXPlus patients were generated from `release_conditions.json`. A DDXPlus run whose
  knowledge base, graph or parameters use that table sees the generator; the report says so beside its
  numbers."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.errors import InvalidInputError
from clinrag.core.provenance import case_origins
from clinrag.eval.datasets import Dataset
from clinrag.eval.results import Corpus, RunConfig
from clinrag.graph.importers.loader import imported_sources
from clinrag.graph.store import redact
from clinrag.methods.base import MethodContext

GRAPH_NAME = "clinrag"  # the graph every method opens
DDXPLUS_TABLE_FILE = "release_conditions.json"
DDXPLUS_GRAPH_SOURCE = "ddxplus"  # the graph importer's source name for that table
DDXPLUS_PACKAGED = "packaged:ddxplus"  # the same table as shipped inside clinrag
GENERATOR_NOTE = (
    "DDXPlus patients were generated from the DDXPlus conditions table (release_conditions.json), and this "
    "run's knowledge or parameters use that table: its numbers measure how well the method recovers the "
    "generator, not diagnosis from independent knowledge. Compare with the same method on packaged "
    "knowledge only (e.g. `graph build -s packaged:hpo-diseases -s packaged:faker-diseases`)."
)
UNKNOWN_GRAPH_NOTE = (
    "The sources of the graph {location} are not recorded (no `graph build` checkpoint beside it): if it "
    "was built with `-s ddxplus:…`, it holds the table the DDXPlus patients were generated from."
)


def method_corpora(context: MethodContext) -> list[Corpus]:
    """The knowledge bases and graphs the method was built with, with their recorded sources."""
    found = []
    seen: set[int] = set()
    for base in context.corpora:
        if id(base) in seen:
            continue
        seen.add(id(base))
        sources = list(base.info.get("sources") or {})
        location = str(base.directory) if base.directory is not None else "a knowledge base in memory"
        found.append(Corpus(kind="knowledge", location=location, sources=sources, files=base.source_files))
    folder = context.settings.graph_data_dir
    for uri in dict.fromkeys(context.graphs):
        location = redact(uri) if uri else f"clinrag's graph server ({folder})"
        sources = imported_sources(folder, uri, GRAPH_NAME)
        found.append(Corpus(kind="graph", location=location, sources=sources))
    return found


def dataset_files(dataset: Dataset) -> set[str]:
    """The fingerprints of the files the dataset's cases were read from."""
    return {origin.file for case in dataset.cases for origin in case_origins(case)}


def check_overlap(corpora: list[Corpus], files: set[str], *, allow: bool) -> list[str]:
    """The corpus sources that are files of the dataset (fingerprints in `files`). Without `allow`, any such
    source — or a knowledge base whose source files were never recorded, when the dataset's are known — is
    an `InvalidInputError`."""
    shared = sorted(
        {source for corpus in corpora for fp, source in (corpus.files or {}).items() if fp in files}
    )
    if allow:
        return shared
    if shared:
        raise InvalidInputError(
            f"the corpus holds files the evaluated dataset reads ({', '.join(shared)}): retrieval would find "
            "the cases' answers. Build the corpus from other sources (e.g. the MedQA dev split "
            "mediq_dev_atomic_facts.jsonl, MedMCQA explanations or packaged:… for MedQA), or pass "
            "--allow-overlap (each case's own record is still left out)"
        )
    unknown = [c.location for c in corpora if c.kind == "knowledge" and c.files is None]
    if unknown and files:
        raise InvalidInputError(
            f"the knowledge base at {', '.join(unknown)} predates recorded source fingerprints, so whether "
            "it holds this dataset's answers cannot be checked: rebuild it with `clinrag kb build`, or pass "
            "--allow-overlap"
        )
    return shared


def generator_notes(config: RunConfig) -> list[str]:
    """Footnotes for a DDXPlus run that uses (or may use) the table its patients were generated from."""
    if not config.dataset.startswith("ddxplus"):
        return []
    uses_table = any(_names_the_table(name, value) for name, value in _effective_params(config).items())
    notes = []
    for corpus in config.corpora:
        if corpus.sources is None:
            if corpus.kind == "graph":
                notes.append(UNKNOWN_GRAPH_NOTE.format(location=corpus.location))
            continue
        if corpus.kind == "graph":
            uses_table |= DDXPLUS_GRAPH_SOURCE in corpus.sources
        else:
            uses_table |= any(Path(source).name == DDXPLUS_TABLE_FILE for source in corpus.sources)
    return ([GENERATOR_NOTE] if uses_table else []) + notes


def _effective_params(config: RunConfig) -> dict[str, object]:
    """The run's method parameters with the method's defaults and parameter set filled in (`consult`'s
    default sources include the packaged DDXPlus table); the parameters as given where the method or its
    parameters cannot be read here (another version's run, a file this machine lacks)."""
    from clinrag.methods.registry import get_method

    try:
        return get_method(config.method).config.from_params(config.method_params).model_dump()
    except (InvalidInputError, ValueError):
        return dict(config.method_params)


def _names_the_table(name: str, value: object) -> bool:
    """A method parameter naming the table: its file, or a graph source `ddxplus:FOLDER` or its packaged copy
    `packaged:ddxplus` (as in `consult`'s comma-separated `sources`). `patients=ddxplus:…` names the
    generated patients, not the table."""
    if name == "patients" or not isinstance(value, str):
        return False
    parts = [part.strip() for part in value.split(",")]
    return any(
        Path(part).name == DDXPLUS_TABLE_FILE or part.startswith("ddxplus:") or part == DDXPLUS_PACKAGED
        for part in parts
    )
