"""`clinrag reproduce PAPER`: a paper's headline experiments and the table beside the paper's figures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from clinrag.app.common import err, settings_from


def reproduce(
    ctx: typer.Context,
    paper: Annotated[str, typer.Argument(help="doctorrag, imedrag, deepdoctor, exprag or meddx.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Where the runs and the report go (resumed).")],
    data: Annotated[
        Path | None, typer.Option("--data", help="The data root (else CLINRAG_DATA_DIR).")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="A seeded sample of N cases a dataset.")] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Cases answered at the same time.")] = 4,
) -> None:
    """Run PAPER's headline experiments on the datasets available here, with the configured model and each
    method's paper parameter set where it has one; write the runs and report.md, which puts the paper's
    published figure (its table and row) beside ours."""
    from clinrag.eval.reproduce import Reproduction

    settings = settings_from(ctx)
    if data is not None:
        settings = settings.model_copy(update={"data_dir": data})
    reproduction = Reproduction(
        settings,
        out_dir,
        limit=limit,
        seed=seed,
        concurrency=concurrency,
        progress=sys.stderr.isatty(),
        say=lambda line: err.print(line, markup=False, highlight=False),
    )
    reproduction.run(paper)
    typer.echo((out_dir / "report.md").read_text(encoding="utf-8"), nl=False)
