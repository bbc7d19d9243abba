"""The resumable batch loader: disease records of several sources into the graph, with a counts report.

Each source's diseases are written in batches (UNWIND + MERGE through the schema helpers): the diseases, then
their neighbours by label, then the edges. After each batch a checkpoint file records it as done with what it
added, so a rerun after an interruption skips the finished batches (and finished sources); a batch cut short
is simply written again, which MERGE makes harmless (what it had created before the cut is in the graph but
not in the source's "added" numbers, which come from the checkpoint). At the end, nodes left without any
relation are removed and the graph is counted per label and per relation.

Names are canonicalised: a name that normalises like an existing node's (case, accents, punctuation, as the
keyword matcher does) is written as that node's name, so "Chest Pain" from one source and "Chest pain" from
another are one Symptom; a source with synonyms (MeSH names for text) also joins a name to the node one of
its synonyms names. A disease keeps the first description it was given.

Edges a source read from passages of text carry their ids in the edge's `passages` list (a Cypher parameter,
added to what the edge already lists), so a graph fact can cite the text it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from clinrag.core.settings import Settings
from clinrag.graph.importers.records import DiseaseRecord, SourceRecords
from clinrag.graph.matching import Synonyms, normalize
from clinrag.graph.schema import (
    TRIPLE_TYPE,
    Label,
    Relation,
    counts,
    ensure_schema,
    merge_nodes,
    merge_relations,
    remove_isolated_nodes,
)
from clinrag.graph.store import GraphStore, redact

CHECKPOINT_VERSION = 1
DEFAULT_BATCH_SIZE = 200  # diseases per batch (and checkpoint step)
ROWS_PER_WRITE = 1000  # rows per UNWIND query
BatchCallback = Callable[[str, int, int], None]  # (source name, batch index, number of batches)
_DESCRIBED = "MATCH (d:Disease) WHERE d.name IN $names AND d.description IS NOT NULL RETURN d.name AS name"


@dataclass
class SourceReport:
    name: str
    spec: str
    records_read: int
    diseases: int
    edges_listed: int  # (disease, relation, neighbour) triples the source gave, before merging
    batches: int
    resumed_batches: int  # batches a previous run had finished
    nodes_added: dict[str, int]
    edges_added: dict[str, int]
    skipped: dict[str, int]
    skip_examples: dict[str, list[str]]
    notes: list[str] = field(default_factory=list)


@dataclass
class ImportReport:
    sources: list[SourceReport]
    nodes: dict[str, int]  # the whole graph after the import, per label
    relations: dict[str, int]  # and per relation
    isolated_removed: int
    wall_time_s: float

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["total_nodes"] = sum(self.nodes.values())
        data["total_relations"] = sum(self.relations.values())
        return data


class Checkpoint:
    """Finished batches per source, in a JSON file written atomically after every batch."""

    def __init__(self, path: Path, graph_id: str) -> None:
        self.path = path
        self.graph_id = graph_id
        self.sources: dict[str, dict[str, Any]] = {}
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if (
            isinstance(raw, dict)
            and raw.get("version") == CHECKPOINT_VERSION
            and raw.get("graph") == graph_id
            and isinstance(raw.get("sources"), dict)
        ):
            self.sources = raw["sources"]

    def entry(self, name: str, fingerprint: str) -> dict[str, Any]:
        """The source's progress; started afresh when the source or the batching has changed."""
        entry = self.sources.get(name)
        if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
            entry = self.sources[name] = {"fingerprint": fingerprint, "batches": {}, "complete": False}
        return entry

    def has_work(self) -> bool:
        return any(entry.get("batches") for entry in self.sources.values())

    def reset(self) -> None:
        self.sources = {}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        payload = {"version": CHECKPOINT_VERSION, "graph": self.graph_id, "sources": self.sources}
        tmp.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.path)


def checkpoint_location(folder: Path, uri: str | None, graph: str) -> tuple[Path, str]:
    """The checkpoint file of a graph (clinrag's own server when `uri` is None; `folder` is the graph data
    directory) and the identity of the graph it belongs to."""
    if not uri:
        return folder / f"import-checkpoint-{graph}.json", f"packaged:{folder.resolve()}:{graph}"
    identity = f"{redact(uri)}#{graph}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return folder / f"import-checkpoint-{digest}.json", identity


def imported_sources(folder: Path, uri: str | None, graph: str) -> list[str] | None:
    """The names of the sources `graph build` imported into the graph, from its checkpoint; None when there
    is no checkpoint for it (the graph was built elsewhere: its sources are unknown)."""
    path, identity = checkpoint_location(folder, uri, graph)
    sources = Checkpoint(path, identity).sources
    return sorted(sources) if sources else None


class NameRegistry:
    """Normalised name → the node name used for it, per label: the graph's names first, then first seen. A
    name no node has yet joins the node of its first synonym that one has (when `synonyms` is given)."""

    def __init__(self, store: GraphStore, synonyms: Synonyms | None = None) -> None:
        self.store = store
        self.synonyms = synonyms
        self._names: dict[Label, dict[str, str]] = {}

    def canonical(self, label: Label, name: str) -> str:
        if label not in self._names:
            rows = self.store.query(f"MATCH (n:{label}) RETURN n.name AS name ORDER BY name")
            self._names[label] = {}
            for row in rows:
                if isinstance(row["name"], str):
                    self._names[label].setdefault(normalize(row["name"]) or row["name"], row["name"])
        names = self._names[label]
        key = normalize(name) or name
        if key not in names and self.synonyms is not None:
            joined = (names.get(normalize(other) or other) for other in self.synonyms(name))
            if (found := next((n for n in joined if n is not None), None)) is not None:
                names[key] = found
        return names.setdefault(key, name)


def canonical_records(records: Iterable[DiseaseRecord], registry: NameRegistry) -> list[DiseaseRecord]:
    """The records with canonical names; diseases that become one are merged (first description kept)."""
    merged: dict[str, DiseaseRecord] = {}
    for record in records:
        name = registry.canonical(Label.DISEASE, record.name)
        target = merged.setdefault(name, DiseaseRecord(record.key, name, record.description))
        target.description = target.description or record.description
        for relation, tails in record.relations.items():
            label = TRIPLE_TYPE[relation].target
            for tail in tails:
                canonical = registry.canonical(label, tail)
                if not (label is Label.DISEASE and canonical == name):
                    target.link(relation, canonical, record.passages.get((relation, tail), []))
    return list(merged.values())


def write_batch(store: GraphStore, batch: Sequence[DiseaseRecord]) -> dict[str, dict[str, int]]:
    """Write one batch of (canonical) records; returns the nodes and edges it created, by label / type."""
    names = [record.name for record in batch]
    described = {row["name"] for row in store.query(_DESCRIBED, {"names": names})}
    rows = [{"name": r.name, "description": None if r.name in described else r.description} for r in batch]
    nodes = {str(Label.DISEASE): merge_nodes(store, Label.DISEASE, rows, batch_size=ROWS_PER_WRITE)}
    for relation in Relation:
        label = TRIPLE_TYPE[relation].target
        tails = dict.fromkeys(tail for record in batch for tail in record.relations.get(relation, []))
        if tails:
            created = merge_nodes(store, label, list(tails), batch_size=ROWS_PER_WRITE)
            nodes[str(label)] = nodes.get(str(label), 0) + created
    edges = {}
    for relation in Relation:
        plain: list[tuple[str, str]] = []
        cited: list[dict[str, Any]] = []
        for record in batch:
            for tail in record.relations.get(relation, []):
                passages = record.passages.get((relation, tail))
                if passages:
                    cited.append({"head": record.name, "tail": tail, "passages": passages})
                else:
                    plain.append((record.name, tail))
        if plain or cited:
            created = merge_relations(store, relation, plain, batch_size=ROWS_PER_WRITE)
            edges[str(relation)] = created + _merge_cited(store, relation, cited)
    return {"nodes": nodes, "edges": edges}


def _merge_cited(store: GraphStore, relation: Relation, rows: list[dict[str, Any]]) -> int:
    """MERGE edges between existing nodes, adding the passages of each row to the edge's `passages` list."""
    triple = TRIPLE_TYPE[relation]
    cypher = (
        f"UNWIND $rows AS row MATCH (h:{triple.source} {{name: row.head}}) "
        f"MATCH (t:{triple.target} {{name: row.tail}}) MERGE (h)-[e:{relation}]->(t) "
        "SET e.passages = coalesce(e.passages, []) + "
        "[p IN row.passages WHERE NOT p IN coalesce(e.passages, [])]"
    )
    return sum(
        store.write(cypher, {"rows": rows[i : i + ROWS_PER_WRITE]}).relationships_created
        for i in range(0, len(rows), ROWS_PER_WRITE)
    )


def load_sources(
    store: GraphStore,
    sources: Sequence[SourceRecords],
    checkpoint_path: str | Path,
    *,
    graph_id: str,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool = True,
    on_batch: BatchCallback | None = None,
) -> ImportReport:
    """Import `sources` in order, resuming from `checkpoint_path` (see the module docstring).

    `graph_id` names the graph the checkpoint belongs to: a checkpoint of another graph is ignored, and so is
    one whose graph is empty (its data was wiped). `on_batch` is called after each finished batch."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    started = time.perf_counter()
    ensure_schema(store)
    checkpoint = Checkpoint(Path(checkpoint_path), graph_id)
    if checkpoint.has_work() and not store.query("MATCH (n) RETURN n LIMIT 1"):
        checkpoint.reset()
    reports = [_load_source(store, source, checkpoint, batch_size, progress, on_batch) for source in sources]
    removed = remove_isolated_nodes(store)
    final = counts(store)
    return ImportReport(
        sources=reports,
        nodes={str(label): n for label, n in final.nodes.items()},
        relations={str(relation): n for relation, n in final.relations.items()},
        isolated_removed=removed,
        wall_time_s=round(time.perf_counter() - started, 3),
    )


def import_sources(
    settings: Settings,
    specs: Sequence[str],
    folder: Path,
    uri: str | None = None,
    graph: str = "clinrag",
    *,
    limit: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: bool = True,
) -> ImportReport:
    """Read the sources `specs` (as `clinrag graph build -s` names them) and import them into the graph at
    `uri` (None: clinrag's own server on the data directory `folder`), resuming from its checkpoint in
    `folder`."""
    from clinrag.graph.factory import open_graph
    from clinrag.graph.importers.registry import SourceContext, read_source

    context = SourceContext(settings, folder, progress=progress)
    records = [read_source(spec, limit=limit, context=context) for spec in specs]
    checkpoint, identity = checkpoint_location(folder, uri, graph)
    store = open_graph(uri, folder, graph=graph)
    try:
        return load_sources(
            store, records, checkpoint, graph_id=identity, batch_size=batch_size, progress=progress
        )
    finally:
        store.close()


def _load_source(
    store: GraphStore,
    source: SourceRecords,
    checkpoint: Checkpoint,
    batch_size: int,
    progress: bool,
    on_batch: BatchCallback | None,
) -> SourceReport:
    entry = checkpoint.entry(source.name, f"{source.fingerprint}:batch={batch_size}")
    done: dict[str, dict[str, dict[str, int]]] = entry["batches"]
    resumed = len(done)
    if not entry["complete"]:
        records = canonical_records(source.records, NameRegistry(store, source.synonyms))
        batches = [records[i : i + batch_size] for i in range(0, len(records), batch_size)]
        with tqdm(
            total=len(batches), initial=resumed, desc=source.name, unit="batch", disable=not progress
        ) as bar:
            for index, batch in enumerate(batches):
                if str(index) in done:
                    continue
                done[str(index)] = write_batch(store, batch)
                checkpoint.save()
                bar.update(1)
                if on_batch is not None:
                    on_batch(source.name, index, len(batches))
        entry.update(
            complete=True,
            diseases=len(records),
            edges_listed=sum(record.edge_count for record in records),
            n_batches=len(batches),
        )
        checkpoint.save()
    return SourceReport(
        name=source.name,
        spec=source.spec,
        records_read=source.read,
        diseases=entry["diseases"],
        edges_listed=entry["edges_listed"],
        batches=entry["n_batches"],
        resumed_batches=resumed,
        nodes_added=_sum(stats["nodes"] for stats in done.values()),
        edges_added=_sum(stats["edges"] for stats in done.values()),
        skipped=dict(source.skips.counts),
        skip_examples=dict(source.skips.examples),
        notes=list(source.notes),
    )


def _sum(parts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total
