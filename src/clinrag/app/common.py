"""What every command group shares: consoles, settings from the command context, the usage table, options."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.table import Table

from clinrag.core.errors import InvalidInputError
from clinrag.core.settings import Settings, load_settings
from clinrag.core.usage import Usage

out = Console()
err = Console(stderr=True)


def check_argv(args: Sequence[str]) -> None:
    """Refuse command-line arguments that are not UTF-8 before any work: Python keeps their bytes as lone
    surrogates, which would only fail later, deep inside a model, an index or a cache."""
    for position, arg in enumerate(args, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"argument {position} is not UTF-8 text (at character {exc.start}): {ascii(arg)[:80]}"
            ) from None


def require_text(text: str, what: str) -> str:
    """`text` when it has content: checked before a model or a base is loaded."""
    if not text.strip():
        raise InvalidInputError(f"{what} is empty")
    return text


def settings_from(ctx: typer.Context) -> Settings:
    """Settings with the root command's `--config` applied."""
    root = ctx.find_root()
    return load_settings(**root.obj) if root.obj else load_settings()


def usage_table(usage: Usage) -> Table:
    table = Table(title="usage", show_header=False, title_justify="left")
    for name, value in [
        ("model calls", usage.calls),
        ("prompt tokens", usage.prompt_tokens),
        ("completion tokens", usage.completion_tokens),
        ("wall time (s)", f"{usage.wall_time_s:.2f}"),
        ("cache hits", usage.cache_hits),
        ("cache misses", usage.cache_misses),
    ]:
        table.add_row(name, str(value))
    return table


# The patient-base options shared by `consult` and `serve`.
PatientsOption = Annotated[Path | None, typer.Option(help="A built patient base (`clinrag patients build`).")]
PatientsDatasetOption = Annotated[
    Literal["ddxplus", "dialmed", "icraft", "synthetic"] | None,
    typer.Option(help="Build the patient base from this dataset (with --patients-path; built once)."),
]
PatientsPathOption = Annotated[Path | None, typer.Option(help="The dataset's file or folder.")]

# Scale-out options shared by `eval run`, `kb build` and `patients build`.
ExecutorOption = Annotated[
    Literal["local", "dask"], typer.Option(help="local: this process; dask: partitions on a Dask cluster.")
]
SchedulerOption = Annotated[
    str | None,
    typer.Option(help="Dask scheduler address (tcp://host:8786); none: a LocalCluster on 127.0.0.1."),
]
WorkersOption = Annotated[int, typer.Option(min=1, help="Worker processes of the LocalCluster.")]
