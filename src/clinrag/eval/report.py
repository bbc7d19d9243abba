"""A Markdown report over evaluation runs: per-run tables, paired comparisons and the plots the data supports.

OUT/report.md   the report; images are referenced by relative paths
OUT/*.png       the plots
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.eval import plots
from clinrag.eval.compare import LOWER_IS_BETTER, Comparison, compare_runs, ordered_metrics, scoring_warning
from clinrag.eval.results import (
    JUDGE_METRIC,
    CaseResult,
    MetricSummary,
    RunConfig,
    RunDirectory,
    RunSummary,
)
from clinrag.eval.stats import PairedStats
from clinrag.eval.summary import summarize
from clinrag.eval.validity import generator_notes

REPORT_FILE = "report.md"
# The metric shown in the bar chart and the derived win matrix: the first of these a dataset's runs share.
HEADLINE_METRICS = ("accuracy", "gtpa@1", "f1", "exact_set", "rouge_l", "meteor", "bleu4")


@dataclass(frozen=True)
class _Run:
    label: str
    path: Path
    config: RunConfig
    summary: RunSummary
    results: list[CaseResult]
    partial: bool  # no summary.json: the summary was computed here from results.jsonl


def write_report(
    run_dirs: Sequence[Path],
    out_dir: Path,
    *,
    patients: tuple[np.ndarray, list[str]] | None = None,
    win_matrix: dict | None = None,
) -> Path:
    """Write OUT/report.md (and its PNGs) for the given run directories; return the report's path.

    `patients` is (embedding vectors, diagnosis labels) for a UMAP plot; `win_matrix` is
    {"systems": [...], "rates": [[...]], "title": optional} with rates[i][j] = how often system i beats j.
    """
    if not run_dirs:
        raise InvalidInputError("a report needs at least one run directory")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = _load_runs(run_dirs)
    lines = ["# Evaluation report", "", f"{len(runs)} run(s): " + ", ".join(f"`{r.label}`" for r in runs), ""]
    for index, (dataset, group) in enumerate(_by_dataset(runs).items()):
        lines += _dataset_section(dataset, group, out_dir, f"d{index}-{_slug(dataset)}")
    if win_matrix is not None:
        lines += _given_win_matrix_section(win_matrix, out_dir)
    if patients is not None:
        lines += _umap_section(patients, out_dir)
    path = out_dir / REPORT_FILE
    _write_atomic(path, "\n".join(lines).rstrip() + "\n")
    return path


def _load_runs(run_dirs: Sequence[Path]) -> list[_Run]:
    labels = _labels([Path(p) for p in run_dirs])
    runs = []
    for label, path in zip(labels, run_dirs, strict=True):
        directory = RunDirectory(path)
        config, results = directory.config(), directory.scored_results()
        partial = not directory.has_summary()
        # A crashed run has no summary.json: rebuild it, with the summed case times as its wall time (an
        # upper bound when cases ran concurrently).
        wall_s = sum(result.elapsed_s for result in results)
        summary = summarize(config, results, wall_s) if partial else directory.summary()
        if not partial and any(JUDGE_METRIC in r.scores for r in results):
            judged = summarize(config, results, wall_s).metrics[JUDGE_METRIC]
            summary = summary.model_copy(update={"metrics": {**summary.metrics, JUDGE_METRIC: judged}})
        runs.append(_Run(label, directory.path, config, summary, results, partial))
    return runs


def _labels(paths: list[Path]) -> list[str]:
    """The directory names, made unique (runs are often named alike in different parents)."""
    names = [path.name or str(path) for path in paths]
    seen: dict[str, int] = {}
    labels = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if names.count(name) == 1 else f"{name}#{seen[name]}")
    return labels


def _by_dataset(runs: list[_Run]) -> dict[str, list[_Run]]:
    groups: dict[str, list[_Run]] = {}
    for run in runs:
        groups.setdefault(run.config.dataset, []).append(run)
    return groups


def _dataset_section(dataset: str, runs: list[_Run], out_dir: Path, stem: str) -> list[str]:
    lines = [f"## Dataset `{_cell(dataset)}`", "", *_runs_table(runs), "", *_validity_notes(runs)]
    partial = [run.label for run in runs if run.partial]
    if partial:
        lines += [
            "Runs without summary.json (summary computed from results.jsonl; wall s is the sum of "
            "per-case times): " + ", ".join(f"`{label}`" for label in partial),
            "",
        ]
    headline = _headline_metric(runs)
    if headline is not None:
        image = plots.metric_bars(
            [r.label for r in runs],
            [r.summary.metrics[headline] for r in runs],
            out_dir / f"{stem}-{_slug(headline)}.png",
            metric=headline,
        )
        lines += [f"![{headline} per run]({image.name})", ""]
    comparisons = _comparisons(runs)
    lines += _comparisons_section(comparisons)
    lines += _derived_win_matrix(runs, comparisons, headline, out_dir, stem)
    lines += _turn_section(runs, out_dir, stem)
    lines += _k_section(runs, out_dir, stem)
    lines += _grid_section(runs, headline, out_dir, stem)
    return lines


def _runs_table(runs: list[_Run]) -> list[str]:
    metrics = ordered_metrics(name for run in runs for name in run.summary.metrics)
    header = ["run", "dataset", "method", "model", "scoring", "n", "errors", *metrics]
    # Requests served from the response cache cost neither a call nor tokens; shown when there were any.
    cached = any(run.summary.usage.cache_hits for run in runs)
    header += ["calls/case", *(["cache hits/case"] if cached else []), "tokens/case", "wall s"]
    rows = []
    for run in runs:
        s = run.summary
        cells = [run.label, s.dataset, s.method, s.model, run.config.scoring or "-"]
        cells += [f"{s.n_finished}/{s.n_cases}", str(s.n_errors)]
        cells += [_metric_cell(s.metrics.get(name)) for name in metrics]
        cells.append(f"{s.calls_per_case:.2f}")
        if cached:
            cells.append(f"{s.usage.cache_hits / s.n_finished if s.n_finished else 0.0:.2f}")
        cells += [f"{s.tokens_per_case:.1f}", f"{s.wall_s:.1f}"]
        rows.append(cells)
    return _table(header, rows)


def _validity_notes(runs: list[_Run]) -> list[str]:
    """Footnotes for runs whose numbers the reader must not take at face value: a corpus that shares files
    with the dataset, or knowledge that holds the table the dataset was generated from."""
    notes = []
    for run in runs:
        if run.config.overlap:
            notes.append(
                f"`{run.label}`: its corpus holds the evaluated dataset's own files "
                f"({', '.join(run.config.overlap)}; run with --allow-overlap). Each case's own record was "
                "left out of retrieval, but the other cases of those files were retrievable."
            )
        notes += [f"`{run.label}`: {note}" for note in generator_notes(run.config)]
    warning = scoring_warning({run.label: run.config.scoring for run in runs})
    if warning:
        notes.append(f"Warning: {warning}.")
    if not notes:
        return []
    return ["Validity notes:", "", *(f"- {_cell(note)}" for note in notes), ""]


def _comparisons(runs: list[_Run]) -> list[tuple[_Run, _Run, Comparison | str]]:
    """Every pair of runs, with its Comparison or the reason none could be made."""
    pairs: list[tuple[_Run, _Run, Comparison | str]] = []
    for run_a, run_b in itertools.combinations(runs, 2):
        try:
            pairs.append((run_a, run_b, compare_runs(run_a.path, run_b.path)))
        except InvalidInputError as exc:
            pairs.append((run_a, run_b, str(exc)))
    return pairs


def _comparisons_section(comparisons: list[tuple[_Run, _Run, Comparison | str]]) -> list[str]:
    if not comparisons:
        return []
    lines = ["### Paired comparisons", ""]
    for run_a, run_b, comparison in comparisons:
        lines += [f"#### `{run_a.label}` (A) vs `{run_b.label}` (B)", ""]
        if isinstance(comparison, str):
            lines += [f"Not compared: {comparison}", ""]
            continue
        lines += [
            f"{comparison.n_paired} paired cases; unpaired: {comparison.unpaired_a} only in A, "
            f"{comparison.unpaired_b} only in B. Differences are A − B.",
            "",
            *_paired_table(comparison),
            "",
        ]
    return lines


PAIRED_HEADER = [
    "metric", "n", "mean A", "mean B", "A − B [CI]", "t", "p", "Cohen's d_z", "W/T/L", "P(A>B)", "rel. impr."
]  # fmt: skip


def _paired_table(comparison: Comparison) -> list[str]:
    return _table(PAIRED_HEADER, [paired_row(name, stats) for name, stats in comparison.metrics.items()])


def paired_row(name: str, s: PairedStats) -> list[str]:
    """One metric's paired statistics as display cells (also used by `clinrag eval compare`)."""
    label = f"{name} (lower is better)" if name in LOWER_IS_BETTER else name
    return [
        label,
        str(s.n),
        f"{s.mean_a:.3f}",
        f"{s.mean_b:.3f}",
        f"{s.mean_diff:+.3f} [{s.diff_ci_low:+.3f}, {s.diff_ci_high:+.3f}]",
        _unbounded(s.t_stat, s.mean_diff, ".2f"),
        "<0.001" if s.p_value < 0.001 else f"{s.p_value:.3f}",
        _unbounded(s.cohens_d, s.mean_diff, ".2f"),
        f"{s.wins}/{s.ties}/{s.losses}",
        f"{s.p_a_beats_b:.3f}",
        f"{s.relative_improvement:+.1%}" if s.relative_improvement is not None else "–",
    ]


def _derived_win_matrix(
    runs: list[_Run],
    comparisons: list[tuple[_Run, _Run, Comparison | str]],
    headline: str | None,
    out_dir: Path,
    stem: str,
) -> list[str]:
    """P(row > column) on the headline metric, for three or more runs that could all be compared."""
    if headline is None or len(runs) < 3 or headline in LOWER_IS_BETTER:
        return []
    index = {run.label: i for i, run in enumerate(runs)}
    rates: list[list[float | None]] = [[None] * len(runs) for _ in runs]
    for run_a, run_b, comparison in comparisons:
        if isinstance(comparison, str) or headline not in comparison.metrics:
            return []
        stats = comparison.metrics[headline]
        rates[index[run_a.label]][index[run_b.label]] = stats.p_a_beats_b
        rates[index[run_b.label]][index[run_a.label]] = stats.losses / stats.n  # ties count for neither
    labels = [run.label for run in runs]
    title = f"P(row > column) on {headline}"
    image = plots.win_matrix_heatmap(labels, rates, out_dir / f"{stem}-win-matrix.png", title=title)
    return [f"![{title}]({image.name})", ""]


def _turn_section(runs: list[_Run], out_dir: Path, stem: str) -> list[str]:
    with_turns = {run.label: run.results for run in runs if any(r.turns for r in run.results)}
    if not with_turns:
        return []
    image = plots.turn_curves(with_turns, out_dir / f"{stem}-turns.png")
    header = ["run", "iteration", "questions asked", *plots.TURN_METRICS]
    rows = [
        [label, str(point.iteration), f"{point.questions_asked:.2f}"]
        + [f"{point.scores[name]:.3f}" if name in point.scores else "—" for name in plots.TURN_METRICS]
        for label, results in with_turns.items()
        for point in plots.turn_curve(results)
    ]
    return [
        "### Differential vs questions asked",
        "",
        f"![turn curves]({image.name})",
        "",
        *_table(header, rows),
        "",
    ]


def _k_section(runs: list[_Run], out_dir: Path, stem: str) -> list[str]:
    series = plots.k_series([(run.label, run.config, run.summary) for run in runs])
    if not series:
        return []
    image = plots.tokens_vs_k(series, out_dir / f"{stem}-tokens-vs-k.png")
    return ["### Token cost vs k", "", f"![tokens per case vs k]({image.name})", ""]


def _grid_section(runs: list[_Run], headline: str | None, out_dir: Path, stem: str) -> list[str]:
    if headline is None:
        return []
    lines = []
    for index, grid in enumerate(plots.param_grids([(r.config, r.summary) for r in runs], headline)):
        image = plots.param_grid_heatmap(grid, out_dir / f"{stem}-grid{index}.png", metric=headline)
        header = [f"{grid.y} \\ {grid.x}", *(f"{v:g}" for v in grid.xs)]
        rows = [
            [
                f"{y:g}",
                *(
                    "—" if np.isnan(m) else f"{m:.3f} ({c:.1f} calls)"
                    for m, c in zip(means, calls, strict=True)
                ),
            ]
            for y, means, calls in zip(grid.ys, grid.means, grid.calls, strict=True)
        ]
        lines += [f"### {grid.method}: {headline} by {grid.x} × {grid.y}", "", *_table(header, rows), ""]
        lines += [f"![{headline} grid]({image.name})", ""]
    return lines


def _given_win_matrix_section(win_matrix: dict, out_dir: Path) -> list[str]:
    if "systems" not in win_matrix or "rates" not in win_matrix:
        raise InvalidInputError("win_matrix needs 'systems' and 'rates' (rates[i][j]: i beats j)")
    title = str(win_matrix.get("title", "Pairwise win rate"))
    image = plots.win_matrix_heatmap(
        list(win_matrix["systems"]), win_matrix["rates"], out_dir / "win-matrix.png", title=title
    )
    return ["## Pairwise win rates", "", f"![{_cell(title)}]({image.name})", ""]


def _umap_section(patients: tuple[np.ndarray, list[str]], out_dir: Path) -> list[str]:
    vectors, labels = patients
    image = plots.umap_projection(vectors, labels, out_dir / "patients-umap.png")
    n_labels = len(set(labels))
    return [
        "## Patient embeddings",
        "",
        f"{len(labels)} patients, {n_labels} diagnoses (UMAP, fixed random state).",
        "",
        f"![patient embeddings UMAP]({image.name})",
        "",
    ]


def _headline_metric(runs: list[_Run]) -> str | None:
    shared = set.intersection(*(set(run.summary.metrics) for run in runs))
    for name in HEADLINE_METRICS:
        if name in shared:
            return name
    ordered = ordered_metrics(shared)
    return ordered[0] if ordered else None


def _metric_cell(summary: MetricSummary | None) -> str:
    if summary is None:
        return "—"
    return f"{summary.mean:.3f} [{summary.ci_low:.3f}, {summary.ci_high:.3f}]"


def _unbounded(value: float | None, sign_of: float, spec: str) -> str:
    # None marks an unbounded statistic (zero spread, non-zero mean difference); see PairedStats.
    if value is None:
        return "+inf" if sign_of > 0 else "-inf"
    return format(value, spec)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _cell(text: Any) -> str:
    # A pipe would split the cell and a newline would end the row.
    return str(text).replace("|", "\\|").replace("\n", " ")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
