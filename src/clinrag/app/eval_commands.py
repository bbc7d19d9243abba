"""`clinrag eval …`: run a method over a dataset (resumable), compare two runs, write a report."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from clinrag.app.common import (
    ExecutorOption,
    SchedulerOption,
    WorkersOption,
    err,
    out,
    settings_from,
    usage_table,
)
from clinrag.core.errors import InvalidInputError

eval_app = typer.Typer(help="Evaluate methods on benchmark datasets.", no_args_is_help=True)

DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="The dataset's file or folder, or a data root (else CLINRAG_DATA_DIR)."),
]


def parse_params(pairs: list[str]) -> dict[str, object]:
    """`name=value` pairs; a value is read as JSON when it parses (numbers, booleans), else as a string."""
    params: dict[str, object] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise InvalidInputError(f"a --param must look like name=value, got {pair!r}")
        try:
            params[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[name.strip()] = value
    return params


@eval_app.command("run")
def eval_run(
    ctx: typer.Context,
    method: Annotated[str, typer.Option(help="Method name (see `clinrag eval methods`).")],
    dataset: Annotated[str, typer.Option(help="Dataset name (see `clinrag eval datasets`).")],
    out_dir: Annotated[Path, typer.Option("--out", help="Run directory (resumed if it exists).")],
    data: DataOption = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Evaluate a seeded sample of N cases.")] = None,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Cases answered at the same time.")] = 4,
    param: Annotated[list[str] | None, typer.Option(help="Method parameter name=value (repeatable).")] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help="A parameter set of the method, under the --param values: `paper` is the paper's published "
            "configuration (the same as --param preset=NAME)."
        ),
    ] = None,
    executor: ExecutorOption = "local",
    scheduler: SchedulerOption = None,
    workers: WorkersOption = 2,
    partitions: Annotated[
        int | None, typer.Option(min=1, help="Dask partitions (default 4 per worker).")
    ] = None,
    allow_overlap: Annotated[
        bool,
        typer.Option(
            "--allow-overlap",
            help="Run even though the corpus shares source files with the dataset (each case's own record "
            "is still left out of retrieval; run.json and the report say so).",
        ),
    ] = False,
    max_outages: Annotated[
        int,
        typer.Option(
            min=1,
            help="Stop after this many cases in a row fail because a backend is unavailable (unreachable, "
            "timing out, failing after retries); such cases are not stored and are retried by the next run.",
        ),
    ] = 3,
) -> None:
    """Answer every sampled case, writing each result as it finishes; rerun the same command to resume.
    With --executor dask the cases are partitioned across the workers of a Dask cluster. A corpus built from
    the dataset's own files is refused (see --allow-overlap). Exits 1 when cases were left unanswered
    because a backend was unavailable, 2 when the run stopped on an error."""
    from clinrag.eval.results import RunDirectory
    from clinrag.eval.runner import EvalRunner, LocalExecutor, RunRequest
    from clinrag.eval.validity import generator_notes
    from clinrag.scale.evaluation import DaskExecutor

    settings = settings_from(ctx)
    request = RunRequest(
        dataset=dataset,
        method=method,
        out=out_dir,
        data_path=data,
        limit=limit,
        seed=seed,
        concurrency=concurrency,
        params=parse_params(param or []) | ({"preset": preset} if preset else {}),
        allow_overlap=allow_overlap,
        max_outages=max_outages,
    )
    runner = EvalRunner(
        settings,
        progress=sys.stderr.isatty(),
        executor=DaskExecutor(scheduler, workers, partitions) if executor == "dask" else LocalExecutor(),
    )
    try:
        outcome = runner.run(request)
    except (KeyboardInterrupt, asyncio.CancelledError):
        err.print(
            f"interrupted: finished cases are saved in {out_dir}; run the same command to resume",
            soft_wrap=True,
        )
        raise typer.Exit(130) from None
    if outcome.data_report:
        err.print(f"data: {outcome.data_report}", soft_wrap=True, highlight=False)
    if outcome.skipped:
        out.print(
            f"resumed: {outcome.skipped} cases were already finished, {outcome.ran} answered now",
            soft_wrap=True,
        )
    out.print(summary_table(outcome.summary))
    config = RunDirectory(out_dir).config()
    if config.overlap:
        shared = ", ".join(config.overlap)
        out.print(f"overlap (allowed): the corpus holds the dataset's {shared}", soft_wrap=True)
    for note in generator_notes(config):
        out.print(f"note: {note}", soft_wrap=True)
    out.print(f"results: {out_dir}")
    if outcome.unanswered:
        err.print(
            f"{outcome.unanswered} cases are unanswered (a backend was unavailable): run the same command "
            "again to retry them",
            soft_wrap=True,
        )
        raise typer.Exit(1)


def summary_table(summary) -> Table:
    table = Table(title=f"{summary.method} on {summary.dataset} ({summary.model})", title_justify="left")
    for column in ("metric", "mean", "95% CI", "n"):
        table.add_column(column)
    for name, metric in sorted(summary.metrics.items()):
        table.add_row(
            name, f"{metric.mean:.4f}", f"[{metric.ci_low:.4f}, {metric.ci_high:.4f}]", str(metric.n)
        )
    table.caption = (
        f"{summary.n_finished}/{summary.n_cases} cases, {summary.n_errors} errors, "
        f"{summary.calls_per_case:.2f} calls and {summary.tokens_per_case:.0f} tokens per case, "
        f"{summary.wall_s:.1f} s"
    )
    return table


@eval_app.command("compare")
def eval_compare(
    run_a: Annotated[Path, typer.Argument(help="Run directory A.")],
    run_b: Annotated[Path, typer.Argument(help="Run directory B.")],
) -> None:
    """Paired statistics of two runs on the same dataset (A − B per metric)."""
    from clinrag.eval.compare import compare_runs, scoring_warning
    from clinrag.eval.report import PAIRED_HEADER, paired_row

    comparison = compare_runs(run_a, run_b)
    warning = scoring_warning({"A": comparison.scoring_a, "B": comparison.scoring_b})
    if warning:
        err.print(f"[yellow]warning:[/yellow] {warning}")
    table = Table(
        title=f"A = {comparison.method_a} ({run_a}), B = {comparison.method_b} ({run_b}) on "
        f"{comparison.dataset}: {comparison.n_paired} paired cases",
        title_justify="left",
    )
    for column in PAIRED_HEADER:
        table.add_column(column)
    for name, stats in comparison.metrics.items():
        table.add_row(*paired_row(name, stats))
    out.print(table)


@eval_app.command("judge")
def eval_judge(
    ctx: typer.Context,
    runs: Annotated[list[Path], typer.Argument(help="Two or more run directories on the same dataset.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the win matrix (JSON).")],
    limit: Annotated[int | None, typer.Option(min=1, help="Judge the first N shared cases.")] = 50,
) -> None:
    """DoctorRAG's pairwise comparison (comprehensiveness, relevance, safety; both orders) of the runs'
    answers by the judge model (CLINRAG_JUDGE_*, else the chat model): a win matrix."""
    from clinrag.eval.judges import PairwiseJudge
    from clinrag.eval.judging import judge_runs
    from clinrag.index.store import write_json
    from clinrag.llm.factory import build_judge_model

    settings = settings_from(ctx)
    judge = PairwiseJudge(build_judge_model(settings), concurrency=settings.llm_concurrency)
    matrix = judge_runs(settings, runs, judge, limit)
    write_json(out_file, matrix.model_dump(mode="json"))
    overall = matrix.matrices["overall"]
    table = Table(title="overall win rate (row beats column)", title_justify="left")
    table.add_column("")
    for name in overall.systems:
        table.add_column(name)
    for name, row in zip(overall.systems, overall.rates, strict=True):
        table.add_row(name, *("—" if rate is None else f"{rate:.2f}" for rate in row))
    out.print(table)
    invalid = sum(r.status == "invalid" for r in matrix.comparisons)
    out.print(
        f"{len(matrix.comparisons)} comparisons, {invalid} invalid; win matrix: {out_file}", soft_wrap=True
    )
    out.print(usage_table(matrix.usage))


@eval_app.command("quality")
def eval_quality(
    ctx: typer.Context,
    run: Annotated[Path, typer.Argument(help="Run directory.")],
    limit: Annotated[int | None, typer.Option(min=1, help="Score the first N cases.")] = None,
) -> None:
    """RAGAS's answer correctness (0–1) of a run's answers against the reference, by the judge model;
    per-case scores go to RUN/quality.jsonl."""
    from clinrag.embed.factory import build_embedder
    from clinrag.eval.judges import AnswerQualityJudge
    from clinrag.eval.judging import ascore_quality
    from clinrag.eval.results import QUALITY_FILE
    from clinrag.eval.stats import mean_ci
    from clinrag.llm.factory import build_judge_model

    settings = settings_from(ctx)
    judge = AnswerQualityJudge(
        build_judge_model(settings), build_embedder(settings), concurrency=settings.llm_concurrency
    )
    scored = asyncio.run(ascore_quality(settings, run, judge, limit))
    lines = [json.dumps({"case_id": case_id, **score.model_dump(mode="json")}) for case_id, score in scored]
    (run / QUALITY_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    values = [score.score for _, score in scored if score.score is not None]
    invalid = len(scored) - len(values)
    if values:
        mean, low, high = mean_ci(values)
        out.print(
            f"answer quality {mean:.3f} [{low:.3f}, {high:.3f}] over {len(values)} cases, {invalid} invalid"
        )
    else:
        out.print(f"no case could be scored: {invalid} invalid judge replies")
    out.print(usage_table(judge.usage))


@eval_app.command("report")
def eval_report(
    ctx: typer.Context,
    runs: Annotated[list[Path], typer.Argument(help="Run directories.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Report directory.")],
    umap: Annotated[
        str | None, typer.Option(help="Also plot a UMAP of this dataset's patient embeddings by diagnosis.")
    ] = None,
    umap_limit: Annotated[int, typer.Option(min=10, help="Patients in the UMAP plot.")] = 500,
    win_matrix: Annotated[
        Path | None, typer.Option(help="A win matrix written by `clinrag eval judge`, drawn as a heatmap.")
    ] = None,
    data: DataOption = None,
) -> None:
    """Markdown report with tables and PNG plots for one or more runs."""
    from clinrag.eval.report import write_report

    patients = None
    if umap is not None:
        patients = _patient_embeddings(settings_from(ctx), umap, data, umap_limit)
    matrix = None
    if win_matrix is not None:
        from clinrag.eval.judges import WinMatrix
        from clinrag.index.store import read_json

        overall = WinMatrix.model_validate(read_json(win_matrix)).matrices["overall"]
        matrix = {"systems": overall.systems, "rates": overall.rates, "title": "Pairwise win rate (judge)"}
    path = write_report(runs, out_dir, patients=patients, win_matrix=matrix)
    out.print(f"report: {path}")


def _patient_embeddings(settings, dataset_name: str, data: Path | None, limit: int):
    from clinrag.embed.factory import build_embedder
    from clinrag.eval.datasets import load_dataset
    from clinrag.eval.sampling import sample_cases

    dataset = load_dataset(dataset_name, data, data_dir=settings.data_dir)
    labelled = [r for r in dataset.records if dataset.labels.get(r.id)]
    if not labelled:
        raise InvalidInputError(f"dataset {dataset_name!r} has no labelled patient records to plot")
    sampled = {case.id for case in sample_cases(dataset.cases, limit, 0)}
    chosen = [r for r in labelled if r.id in sampled] or labelled[:limit]
    vectors = build_embedder(settings).encode([r.narrative for r in chosen], progress=True)
    return vectors, [dataset.labels[r.id][0] for r in chosen]


@eval_app.command("datasets")
def eval_datasets() -> None:
    """The dataset names `eval run` accepts."""
    from clinrag.eval.datasets import dataset_names, get_dataset

    table = Table(title="datasets", title_justify="left")
    for column in ("name", "default path under the data root", "description"):
        table.add_column(column)
    for name in dataset_names():
        spec = get_dataset(name)
        table.add_row(name, spec.default_path, spec.description)
    out.print(table)


@eval_app.command("methods")
def eval_methods() -> None:
    """The method names `eval run` accepts."""
    from clinrag.methods.registry import get_method, method_names

    table = Table(title="methods", title_justify="left")
    for column in ("name", "uses an LLM", "needs a patient base", "description"):
        table.add_column(column)
    for name in method_names():
        spec = get_method(name)
        table.add_row(
            name, "yes" if spec.uses_llm else "no", "yes" if spec.needs_experience else "no", spec.description
        )
    out.print(table)
