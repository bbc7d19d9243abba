"""What every command group shares: consoles, settings from the command context, the usage table."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from clinrag.core.settings import Settings, load_settings
from clinrag.core.usage import Usage

out = Console()
err = Console(stderr=True)


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
