"""`clinrag consult`: the main job — DoctorRAG + Med-TextGrad on a patient's description, with evidence."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from clinrag.app.common import (
    PatientsDatasetOption,
    PatientsOption,
    PatientsPathOption,
    out,
    settings_from,
    usage_table,
)
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case


def consult(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The patient's description and question; '-' reads stdin.")],
    kb: Annotated[Path | None, typer.Option(help="A built knowledge base (`clinrag kb build`).")] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            "-s",
            help="Build the knowledge base from these sources (as `kb build -s`; built once, then reused).",
        ),
    ] = None,
    patients: PatientsOption = None,
    patients_dataset: PatientsDatasetOption = None,
    patients_path: PatientsPathOption = None,
    iterations: Annotated[int, typer.Option(min=0, max=10, help="Med-TextGrad iterations T (0 = off).")] = 3,
    k_statements: Annotated[int, typer.Option(min=1, max=50, help="Knowledge statements retrieved.")] = 5,
    k_patients: Annotated[int, typer.Option(min=1, max=50, help="Similar patients retrieved.")] = 3,
    language: Annotated[Literal["en", "zh", "fr"], typer.Option(help="Language of the question.")] = "en",
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole Answer as JSON.")] = False,
) -> None:
    """Answer a consultation with DoctorRAG: knowledge statements + similar patients, refined by Med-TextGrad.
    Without --kb/--source and --patients/--patients-dataset it uses the bases configured (CLINRAG_KB_PATH,
    CLINRAG_PATIENTS_PATH) or else builds the packaged defaults once (several minutes the first time)."""
    from clinrag.embed.factory import build_embedder
    from clinrag.knowledge.defaults import open_knowledge_base
    from clinrag.methods.base import MethodContext
    from clinrag.methods.registry import get_method
    from clinrag.patients.defaults import open_patient_base

    question = sys.stdin.read() if text == "-" else text
    if not question.strip():
        raise InvalidInputError("the consultation text is empty")
    if patients_dataset not in (None, "synthetic") and patients_path is None:
        raise InvalidInputError(f"--patients-dataset {patients_dataset} needs --patients-path")
    settings = settings_from(ctx)
    embedder = build_embedder(settings)
    context = MethodContext(
        settings=settings,
        params={
            "k_statements": k_statements,
            "k_patients": k_patients,
            "refine_iterations": iterations,
            "fallback": settings.kb_fallback,
        },
        embedder_factory=lambda _: embedder,
        knowledge=open_knowledge_base(settings, embedder, kb, sources=source or ()),
        patient_base=open_patient_base(
            settings, embedder, patients, dataset=patients_dataset, data_path=patients_path
        ),
    )
    method = get_method("doctorrag").build(context)
    answer = method.answer(Case(id="consult", language=language, task="free_text", question=question))
    if as_json:
        out.print_json(answer.model_dump_json())
        return
    _print_answer(answer)


def _print_answer(answer: Answer) -> None:
    if answer.error:
        out.print(f"[bold red]no valid answer:[/] {answer.error}", soft_wrap=True)
    out.print("[bold]Answer[/]")
    out.print(answer.text.strip() or "(empty)", soft_wrap=True, highlight=False, markup=False)
    table = Table(title="evidence", title_justify="left")
    for column in ("id", "kind", "score", "cited", "text"):
        table.add_column(column, overflow="fold")
    for item in answer.evidence:
        snippet = " ".join(item.text.split())
        snippet = snippet if len(snippet) <= 200 else snippet[:200] + " …"
        score = "" if item.score is None else f"{item.score:.3f}"
        cited = "yes" if item.provenance.get("cited") else ""
        table.add_row(item.id, item.kind, score, cited, snippet)
    out.print(table)
    summary = next((step for step in answer.trace.steps if step.name == "medtextgrad.summary"), None)
    if summary is not None:
        out.print(summary.output["trajectory_text"], soft_wrap=True, highlight=False, markup=False)
    out.print(usage_table(answer.usage))
