"""`clinrag patients …`: build the patient base from a dataset, find similar patients, rank by coded sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from clinrag.app.common import (
    ExecutorOption,
    SchedulerOption,
    WorkersOption,
    out,
    require_text,
    settings_from,
)
from clinrag.core.errors import InvalidInputError

patients_app = typer.Typer(help="Build and query the patient base (experience).", no_args_is_help=True)

BaseOption = Annotated[
    Path | None, typer.Option("--base", help="Patient-base directory (else CLINRAG_PATIENTS_PATH).")
]


@patients_app.command("build")
def patients_build(
    ctx: typer.Context,
    dataset: Annotated[
        Literal["ddxplus", "dialmed", "icraft", "synthetic"],
        typer.Option(help="Dataset format; `synthetic` generates the labelled synthetic EXPRAG cohort."),
    ],
    path: Annotated[
        Path | None, typer.Option(help="Dataset file (DDXPlus: the patients CSV or its folder).")
    ] = None,
    n: Annotated[int, typer.Option(min=1, help="Patients to generate (synthetic only).")] = 1000,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None,
    executor: ExecutorOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = 2,
) -> None:
    """Load a dataset into patient records, embed their narratives, and save the patient base (with
    --executor dask, embedded in parallel partitions on a Dask cluster)."""
    from clinrag.patients.base import PatientBase
    from clinrag.patients.loaders import load_patient_dataset
    from clinrag.scale.embedding import embedder_for

    settings = settings_from(ctx)
    records, report = load_patient_dataset(dataset, path, n)
    if report is not None:
        out.print(report.summary(), markup=False, highlight=False)
    else:
        out.print(f"{len(records)} SYNTHETIC patients generated (not real patients, seed 0)", markup=False)
    with embedder_for(settings, executor, scheduler=scheduler, workers=workers) as embedder:
        base = PatientBase.create(records, embedder, progress=True)
    target = out_dir or settings.patient_base_path
    base.save(target)
    out.print(f"patient base written to {target}", markup=False)
    out.print_json(json.dumps(base.stats()))


def _show(rows, title: str) -> None:
    table = Table("rank", "score", "id", "diagnosis / codes", "presentation", title=title)
    for rank, (record, score) in enumerate(rows, start=1):
        label = record.structured.get("diagnosis") or ", ".join(
            f"{k}: {'; '.join(v[:3])}" for k, v in record.codes.items()
        )
        table.add_row(
            str(rank), f"{score:.3f}", record.id, str(label), " ".join(record.narrative.split())[:160]
        )
    out.print(table)


@patients_app.command("similar")
def patients_similar(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The patient's presentation.")],
    base_dir: BaseOption = None,
    k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    exclude: Annotated[
        list[str] | None, typer.Option(help="Record ids to leave out (leakage guard).")
    ] = None,
) -> None:
    """Most similar past patients by narrative (DoctorRAG eq. 2), with the leakage guard."""
    from clinrag.embed.factory import build_embedder
    from clinrag.patients.base import PatientBase

    require_text(text, "the patient's presentation")
    settings = settings_from(ctx)
    base = PatientBase.load(base_dir or settings.patient_base_path, build_embedder(settings))
    _show(base.similar(text, k, exclude=exclude or []), "similar patients")


def _parse_codes(items: list[str]) -> dict[str, list[str]]:
    codes: dict[str, list[str]] = {}
    for item in items:
        field, sep, values = item.partition("=")
        if not sep or not field.strip() or not values.strip():
            raise InvalidInputError(f"--codes takes FIELD=CODE,CODE…, got {item!r}")
        codes.setdefault(field.strip(), []).extend(v.strip() for v in values.split(",") if v.strip())
    return codes


@patients_app.command("rank")
def patients_rank(
    ctx: typer.Context,
    codes: Annotated[list[str], typer.Option(help="FIELD=CODE,CODE… (repeat per field).")],
    base_dir: BaseOption = None,
    k: Annotated[int, typer.Option(min=1, max=100)] = 5,
    preset: Annotated[Literal["uniform", "focused", "complementary"], typer.Option()] = "uniform",
    focus: Annotated[str | None, typer.Option(help="The task's field for focused/complementary.")] = None,
) -> None:
    """Rank past patients by weighted Jaccard over coded sets (EXPRAG eq. 4–7)."""
    from clinrag.embed.factory import build_embedder
    from clinrag.patients.base import PatientBase
    from clinrag.patients.ranker import preset_weights

    settings = settings_from(ctx)
    base = PatientBase.load(base_dir or settings.patient_base_path, build_embedder(settings))
    query = _parse_codes(codes)
    weights = preset_weights(preset, sorted(query), focus)
    _show(base.rank(query, k, weights), f"coded-set ranking ({preset})")
