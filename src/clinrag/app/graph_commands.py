"""`clinrag graph …`: build the disease knowledge graph, count it, run one of its actions, stop its server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from clinrag.app.common import out, settings_from

if TYPE_CHECKING:
    from clinrag.graph.actions import ActionResult
    from clinrag.graph.importers import ImportReport
    from clinrag.graph.store import GraphStore

graph_app = typer.Typer(
    help="Build, count and query the disease knowledge graph (DeepDoctor-RAG).", no_args_is_help=True
)

UriOption = Annotated[
    str | None,
    typer.Option(
        "--uri",
        help="Graph server (redis://, falkor://, unix://, bolt://, neo4j://); else CLINRAG_GRAPH_URI, "
        "else clinrag's own FalkorDB server, started on the data directory.",
    ),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data directory of clinrag's FalkorDB server and of the import checkpoint "
        "(default: HOME/graph/falkordb).",
    ),
]
GraphOption = Annotated[str, typer.Option("--graph", help="Graph name on a FalkorDB server.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
ACTIONS = (
    "GET_SYMPTOMS, GET_TESTS, GET_DRUGS, GET_CURES, GET_COMORBIDITIES, INFER_DISEASES_BY_SYMPTOMS, "
    "INFER_DISEASES_BY_TESTS, INFER_DISEASES_BY_DRUGS, INFER_DISEASES_BY_CURES, "
    "INFER_DISEASES_BY_COMORBIDITIES"
)


def _data_dir(ctx: typer.Context, data_dir: Path | None) -> Path:
    return data_dir or settings_from(ctx).graph_data_dir


def _graph_uri(ctx: typer.Context, uri: str | None) -> str | None:
    """`--uri`, else the configured graph URI, as the methods use it; None: clinrag's own server."""
    return uri or settings_from(ctx).graph_uri


@contextmanager
def _opened(ctx: typer.Context, uri: str | None, data_dir: Path | None, graph: str) -> Iterator[GraphStore]:
    from clinrag.graph.factory import open_graph

    store = open_graph(_graph_uri(ctx, uri), _data_dir(ctx, data_dir), graph=graph)
    try:
        yield store
    finally:
        store.close()


@graph_app.command("build")
def graph_build(
    ctx: typer.Context,
    source: Annotated[
        list[str],
        typer.Option(
            "--source",
            "-s",
            help="ddxplus:FOLDER, packaged:hpo-diseases (or one database's: packaged:omim-diseases, "
            "packaged:orphanet-diseases), packaged:faker-diseases[-fr|-zh], "
            "pycmekg:PICKLE, medicalgraph:medical.json or text:FILE_OR_DIR (.txt/.md, a folder of them, "
            "PubMedQA JSON or JSONL: "
            "triples extracted by the chat model); repeat for several (imported in that order).",
        ),
    ],
    limit: Annotated[
        int | None,
        typer.Option(
            min=1, help="At most this many diseases per source (records — files, abstracts — for text:)."
        ),
    ] = None,
    uri: UriOption = None,
    data_dir: DataDirOption = None,
    graph: GraphOption = "clinrag",
    batch_size: Annotated[int, typer.Option(min=1, help="Diseases per batch and checkpoint.")] = 200,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bars.")] = True,
    as_json: JsonOption = False,
) -> None:
    """Import disease knowledge into the graph, in batches. Resumable: run the same command again after an
    interruption and finished batches (and, for text, chunks the model has read) are skipped. Prints the
    graph's counts and what each source added and skipped."""
    from clinrag.graph.importers.loader import import_sources

    report = import_sources(
        settings_from(ctx),
        source,
        _data_dir(ctx, data_dir),
        _graph_uri(ctx, uri),
        graph,
        limit=limit,
        batch_size=batch_size,
        progress=progress,
    )
    if as_json:
        typer.echo(json.dumps(report.as_dict(), ensure_ascii=False))
        return
    _print_import(report)


def _print_import(report: ImportReport) -> None:
    sources = Table(
        "source", "read", "diseases", "batches", "nodes added", "edges added", "skipped", title="sources"
    )
    for s in report.sources:
        batches = f"{s.batches}" + (f" ({s.resumed_batches} resumed)" if s.resumed_batches else "")
        sources.add_row(
            s.name,
            str(s.records_read),
            str(s.diseases),
            batches,
            "\n".join(f"{k}: {v}" for k, v in s.nodes_added.items()) or "0",
            "\n".join(f"{k}: {v}" for k, v in s.edges_added.items()) or "0",
            str(sum(s.skipped.values())),
        )
    out.print(sources)
    skipped = Table("source", "skipped", "reason", "e.g.", title="skipped, by reason")
    for s in report.sources:
        for reason, n in s.skipped.items():
            skipped.add_row(s.name, str(n), reason, ", ".join(s.skip_examples.get(reason, [])))
    if skipped.row_count:
        out.print(skipped)
    for s in report.sources:
        for note in s.notes:
            out.print(f"{s.name}: {note}", markup=False, highlight=False)
    _print_counts(report.nodes, report.relations)
    out.print(
        f"isolated nodes removed: {report.isolated_removed}; wall time {report.wall_time_s:.1f} s",
        markup=False,
    )


def _print_counts(nodes: dict[str, int], relations: dict[str, int]) -> None:
    node_table = Table("label", "nodes", title="nodes by label")
    for label, n in nodes.items():
        node_table.add_row(label, f"{n:,}")
    node_table.add_row("total", f"{sum(nodes.values()):,}")
    relation_table = Table("relation", "edges", title="edges by relation")
    for relation, n in relations.items():
        relation_table.add_row(relation, f"{n:,}")
    relation_table.add_row("total", f"{sum(relations.values()):,}")
    out.print(node_table)
    out.print(relation_table)


@graph_app.command("counts")
def graph_counts(
    ctx: typer.Context,
    uri: UriOption = None,
    data_dir: DataDirOption = None,
    graph: GraphOption = "clinrag",
    as_json: JsonOption = False,
) -> None:
    """Nodes per label and edges per relation."""
    from clinrag.graph.schema import counts

    with _opened(ctx, uri, data_dir, graph) as store:
        found = counts(store)
    nodes = {str(label): n for label, n in found.nodes.items()}
    relations = {str(relation): n for relation, n in found.relations.items()}
    if as_json:
        typer.echo(json.dumps({"nodes": nodes, "relations": relations}))
        return
    _print_counts(nodes, relations)


@graph_app.command("action")
def graph_action(
    ctx: typer.Context,
    action: Annotated[str, typer.Argument(help=f"One of: {ACTIONS}.")],
    keywords: Annotated[list[str], typer.Argument(help="Disease names (GET_*) or neighbours (INFER_*).")],
    min_match: Annotated[
        int, typer.Option("--min-match", min=1, help="INFER_*: least matched neighbours per disease.")
    ] = 1,
    top_k: Annotated[
        int, typer.Option("--top-k", min=1, max=50, help="Diseases ranked (INFER_*) or items each (GET_*).")
    ] = 10,
    uri: UriOption = None,
    data_dir: DataDirOption = None,
    graph: GraphOption = "clinrag",
    as_json: JsonOption = False,
) -> None:
    """Run one of the 10 fixed graph actions; keywords are matched to nodes first (exact, then fuzzy)."""
    from clinrag.graph.actions import parse_request, run_action
    from clinrag.graph.matching import NodeMatcher

    request = parse_request(
        {"action": action, "keywords": keywords, "min_match_count": min_match, "top_k_items": top_k}
    )
    with _opened(ctx, uri, data_dir, graph) as store:
        result = run_action(store, request, NodeMatcher(store))
    if as_json:
        typer.echo(json.dumps(_action_dict(result), ensure_ascii=False))
        return
    _print_action(result)


def _action_dict(result: ActionResult) -> dict[str, Any]:
    return {
        "request": result.request.model_dump(mode="json"),
        "matches": [
            {"keyword": m.keyword, "node": m.node, "method": m.method, "score": m.score, "via": m.via}
            for m in result.matches
        ],
        "triples": [
            {"head": t.head, "relation": str(t.relation), "tail": t.tail, "passages": list(t.passages)}
            for t in result.triples
        ],
        "ranked": [
            {"disease": d.name, "match_count": d.match_count, "matched": list(d.matched)}
            for d in result.ranked
        ],
        "totals": dict(result.totals) if result.totals is not None else None,
        "descriptions": dict(result.descriptions),
    }


def _print_action(result: ActionResult) -> None:
    matches = Table("keyword", "node", "match", "score", title="keywords")
    for m in result.matches:
        matches.add_row(m.keyword, m.node or "-", m.method, f"{m.score:g}")
    out.print(matches)
    if result.ranked:
        ranked = Table("rank", "disease", "matched", "neighbours", title=str(result.request.action))
        for rank, disease in enumerate(result.ranked, start=1):
            ranked.add_row(str(rank), disease.name, str(disease.match_count), "; ".join(disease.matched))
        out.print(ranked)
    elif result.totals:
        items: dict[str, list[str]] = {}
        for triple in result.triples:
            items.setdefault(triple.head, []).append(triple.tail)
        forward = Table("disease", "items", "shown / total", title=str(result.request.action))
        for disease, total in result.totals.items():
            shown = items.get(disease, [])
            forward.add_row(disease, "; ".join(shown), f"{len(shown)} / {total}")
        out.print(forward)
    else:
        out.print("no results", markup=False)


@graph_app.command("stop")
def graph_stop(ctx: typer.Context, data_dir: DataDirOption = None) -> None:
    """Stop the FalkorDB server clinrag started on the data directory, whoever else is using it."""
    from clinrag.graph.falkordb_server import FalkorDBServer

    folder = _data_dir(ctx, data_dir)
    server = FalkorDBServer(folder)
    if not server.running():
        out.print(f"no clinrag FalkorDB server is running on {folder}", markup=False, highlight=False)
        return
    server.stop()
    out.print(f"stopped the FalkorDB server on {folder}", markup=False, highlight=False)
