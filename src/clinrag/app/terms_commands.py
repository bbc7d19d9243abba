"""`clinrag terms …`: build the MeSH index and map names to MeSH descriptors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from clinrag.app.common import err, out, settings_from

terms_app = typer.Typer(help="Terminology: the MeSH index, name → descriptor mapping.", no_args_is_help=True)


def _default_db(ctx: typer.Context) -> Path:
    return settings_from(ctx).mesh_index_path


DbOption = Annotated[
    Path | None, typer.Option("--db", help="MeSH index file (else <CLINRAG_HOME>/mesh/mesh.sqlite).")
]


@terms_app.command("mesh-build")
def mesh_build(
    ctx: typer.Context,
    source: Annotated[
        list[Path],
        typer.Option(
            "--source",
            "-s",
            help="MeSH descriptor XML (desc20xx.xml), a MeSH TSV table (terms, tree-numbers, symptoms) "
            "or a folder of them; repeat for several.",
        ),
    ],
    out_path: Annotated[
        Path | None, typer.Option("--out", help="Index file to write (else <CLINRAG_HOME>/mesh/mesh.sqlite).")
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if the index is up to date.")] = False,
    mesh_version: Annotated[
        str | None, typer.Option(help="MeSH release to record when no XML file names it (e.g. 2015).")
    ] = None,
) -> None:
    """Build the SQLite MeSH index (atomic; a rebuild from the same files is skipped unless --force)."""
    from clinrag.terms.mesh import build_mesh_index

    target = out_path or _default_db(ctx)
    report = build_mesh_index(
        source,
        target,
        force=force,
        version=mesh_version,
        progress=lambda message: err.print(message, markup=False, highlight=False),
    )
    state = "up to date" if report.skipped else "written"
    out.print(f"MeSH index {state}: {target}", markup=False, highlight=False)
    summary = {k: v for k, v in report.as_dict().items() if k != "sources"}
    summary["sources"] = [{k: s[k] for k in ("path", "kind", "rows")} for s in report.sources]
    out.print_json(json.dumps(summary))


@terms_app.command("mesh-map")
def mesh_map(
    ctx: typer.Context,
    names: Annotated[list[str], typer.Argument(help="Names to map (diseases, symptoms, drugs, …).")],
    db: DbOption = None,
    threshold: Annotated[
        float | None, typer.Option(min=0.0, max=100.0, help="Lowest fuzzy score accepted (default 90).")
    ] = None,
    candidates: Annotated[int, typer.Option(min=1, max=100, help="Candidates kept in the record.")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full decision records as JSON.")] = False,
) -> None:
    """Map names to MeSH descriptors: exact name or entry term first, then fuzzy above the threshold."""
    from clinrag.terms.mesh import MeshIndex
    from clinrag.terms.mesh_mapper import DEFAULT_THRESHOLD, MeshMapper

    with MeshIndex(db or _default_db(ctx)) as index:
        mapper = MeshMapper(
            index,
            threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            max_candidates=candidates,
        )
        mappings = mapper.map_many(names)
    if as_json:
        typer.echo(json.dumps([m.model_dump(mode="json") for m in mappings], ensure_ascii=False))
        return
    table = Table("input", "ui", "descriptor", "match", "score", "best other candidate", title="MeSH mapping")
    for mapping in mappings:
        chosen = mapping.descriptor
        others = [c for c in mapping.candidates if chosen is None or c.ui != chosen.ui]
        other = f"{others[0].ui} {others[0].name} ({others[0].score:g})" if others else "-"
        score = "-" if mapping.score is None else f"{mapping.score:g}"
        match = mapping.match + (" (ambiguous)" if mapping.ambiguous else "")
        table.add_row(
            mapping.input, chosen.ui if chosen else "-", chosen.name if chosen else "-", match, score, other
        )
    out.print(table)
    out.print(
        f"MeSH {mappings[0].db_version}, index {mappings[0].db_fingerprint[:12]}, "
        f"fuzzy threshold {mappings[0].threshold:g}",
        markup=False,
        highlight=False,
    )
