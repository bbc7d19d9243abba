"""The `clinrag` command line."""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table
from typer.core import TyperGroup

from clinrag.app.common import check_argv, err, out, require_text, settings_from, usage_table
from clinrag.app.consult_commands import consult, read_text
from clinrag.app.eval_commands import eval_app
from clinrag.app.graph_commands import graph_app
from clinrag.app.kb_commands import kb_app
from clinrag.app.knowledge_commands import knowledge_app
from clinrag.app.patient_commands import patients_app
from clinrag.app.reproduce_commands import reproduce
from clinrag.app.serve_commands import serve
from clinrag.app.terms_commands import terms_app
from clinrag.core.errors import ClinragError


class _Commands(TyperGroup):
    """The root command. It refuses arguments that are not UTF-8 and ends a `ClinragError` with a one-line
    message and exit code 2, no traceback, for every caller: the `clinrag` script, `python -m clinrag` and
    typer's CliRunner."""

    def main(self, args: Sequence[str] | None = None, *rest: Any, **options: Any) -> Any:
        try:
            check_argv(sys.argv[1:] if args is None else args)
            return super().main(args, *rest, **options)
        except ClinragError as exc:
            err.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
            sys.exit(2)


app = typer.Typer(
    cls=_Commands,
    help="clinrag: doctor-like medical reasoning with evidence for every answer.",
    no_args_is_help=True,
)
config_app = typer.Typer(help="Inspect settings.", no_args_is_help=True)
llm_app = typer.Typer(help="Talk to the configured chat model.", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(llm_app, name="llm")
app.add_typer(kb_app, name="kb")
app.add_typer(knowledge_app, name="knowledge")
app.add_typer(patients_app, name="patients")
app.add_typer(eval_app, name="eval")
app.add_typer(terms_app, name="terms")
app.add_typer(graph_app, name="graph")
app.command("consult")(consult)
app.command("serve")(serve)
app.command("reproduce")(reproduce)


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML config file (else $CLINRAG_CONFIG).")
    ] = None,
) -> None:
    ctx.obj = {"config_file": config} if config else {}


@config_app.command("show")
def config_show(ctx: typer.Context) -> None:
    """Print the effective settings (secrets masked)."""
    out.print_json(json.dumps(settings_from(ctx).described()))


@llm_app.command("chat")
def llm_chat(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The user prompt; '-' reads it from standard input.")],
    system: Annotated[str | None, typer.Option(help="An optional system prompt.")] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="Completion length limit.")] = None,
    temperature: Annotated[float, typer.Option(min=0.0, max=2.0)] = 0.0,
) -> None:
    """Send one prompt to the configured chat model; print the answer and its usage."""
    from clinrag.llm.factory import build_chat_model

    prompt = require_text(read_text(prompt), "the prompt")
    model = build_chat_model(settings_from(ctx))
    completion = model.chat(prompt, system=system, max_tokens=max_tokens, temperature=temperature)
    out.print(completion.text, markup=False, highlight=False)
    out.print(usage_table(completion.usage))


@llm_app.command("choose")
def llm_choose(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The question.")],
    option: Annotated[list[str], typer.Option("--option", "-o", help="A candidate answer (repeat).")],
    normalize: Annotated[
        Literal["sum", "mean"], typer.Option(help="Whole-reply log-likelihood, or its mean per token.")
    ] = "sum",
) -> None:
    """Choose among given answers by the model's likelihood of each; print every option's probability."""
    from clinrag.llm.base import ChatRequest
    from clinrag.llm.factory import build_chat_model

    scores = build_chat_model(settings_from(ctx)).score_options(ChatRequest.of(prompt), option)
    table = Table("option", "log-likelihood", "tokens", "probability", title=f"scored by {scores.method}")
    for text, logprob, count, probability in zip(
        scores.options, scores.logprobs, scores.token_counts, scores.probabilities(normalize), strict=True
    ):
        table.add_row(text, "n/a" if logprob is None else f"{logprob:.3f}", str(count), f"{probability:.3f}")
    out.print(table)
    out.print(f"choice: {scores.options[scores.best(normalize)]}", markup=False, highlight=False)
    out.print(usage_table(scores.usage))


@app.command("embed")
def embed(
    ctx: typer.Context,
    texts: Annotated[list[str], typer.Argument(help="Texts to embed.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the vectors as JSON.")] = False,
) -> None:
    """Embed texts with the configured embedder; print dimension and pairwise cosine similarities."""
    from clinrag.embed.factory import build_embedder

    embedder = build_embedder(settings_from(ctx))
    vectors = embedder.encode(texts)
    if as_json:
        typer.echo(json.dumps({"model": embedder.name, "vectors": vectors.tolist()}))
        return
    out.print(f"model: {embedder.name}  dimension: {embedder.dimension}", markup=False)
    if len(texts) > 1:
        table = Table("", *[str(i) for i in range(len(texts))], title="cosine similarity")
        similarity = vectors @ vectors.T
        for i, row in enumerate(similarity):
            table.add_row(f"{i}: {texts[i][:40]}", *[f"{v:.3f}" for v in row])
        out.print(table)
    else:
        out.print(f"first values: {', '.join(f'{v:.4f}' for v in vectors[0][:8])}", markup=False)


def main() -> None:
    """The `clinrag` script and `python -m clinrag`: one command, then the process ends."""
    try:
        app()
    finally:
        # The loaded knowledge is about a million objects that live until the exit: without this, the
        # collector's passes over them as the interpreter shuts down add about 0.4 s to every command.
        gc.freeze()
