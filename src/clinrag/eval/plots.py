"""Evaluation plots; each function writes one PNG and returns its path.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot): reports are made on servers and in CI,
where there is no display, and this neither needs one nor changes the process-wide pyplot backend.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from clinrag.core.errors import InvalidInputError
from clinrag.eval.results import CaseResult, MetricSummary, RunConfig, RunSummary

TURN_METRICS = ("gtpa@1", "gtpa@5", "rank")
_DPI = 120
_OTHER_COLOUR = "#bbbbbb"


@dataclass(frozen=True)
class TurnPoint:
    """Mean scores of all cases after one iteration of an interactive method."""

    iteration: int
    questions_asked: float
    scores: dict[str, float]
    n: int


def metric_bars(labels: Sequence[str], summaries: Sequence[MetricSummary], out: Path, *, metric: str) -> Path:
    """One bar per run: the mean of `metric`, with its confidence interval as an error bar."""
    if not labels or len(labels) != len(summaries):
        raise InvalidInputError("metric_bars needs one summary per label, and at least one")
    means = np.array([s.mean for s in summaries])
    errors = np.array([[s.mean - s.ci_low for s in summaries], [s.ci_high - s.mean for s in summaries]])
    fig, ax = _subplots(figsize=(max(4.0, 1.2 * len(labels) + 2), 4))
    positions = np.arange(len(labels))
    ax.bar(positions, means, yerr=np.clip(errors, 0, None), capsize=5, color="#4c72b0")
    ax.set_xticks(positions, labels, rotation=20, ha="right")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} (mean, CI)")
    return _save(fig, out)


def win_matrix_heatmap(
    systems: Sequence[str], rates: Sequence[Sequence[float | None]], out: Path, *, title: str = "Win rate"
) -> Path:
    """Heatmap of rates[i][j] = how often system i beats system j (None on the diagonal)."""
    matrix = _win_matrix(systems, rates)
    fig, ax = _subplots(figsize=(1.1 * len(systems) + 3, 1.0 * len(systems) + 2))
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap="RdYlGn", vmin=0.0, vmax=1.0)
    for i in range(len(systems)):
        for j in range(len(systems)):
            text = "—" if np.isnan(matrix[i, j]) else f"{matrix[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=9)
    ax.set_xticks(range(len(systems)), systems, rotation=30, ha="right")
    ax.set_yticks(range(len(systems)), systems)
    ax.set_xlabel("opponent (column)")
    ax.set_ylabel("system (row)")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="row beats column")
    return _save(fig, out)


def turn_curve(results: Sequence[CaseResult]) -> list[TurnPoint]:
    """Per-iteration means of the turn scores over all cases that have turns.

    A case that stopped before the last iteration keeps its final differential (and question count) for the
    later iterations: averaging only the cases still running would make the curve reflect who stopped, not
    how the diagnoses improved.
    """
    histories = [sorted(r.turns, key=lambda turn: turn.iteration) for r in results if r.turns]
    if not histories:
        raise InvalidInputError("no case has per-turn scores to plot")
    length = max(len(history) for history in histories)
    points = []
    for index in range(length):
        turns = [history[min(index, len(history) - 1)] for history in histories]
        names = set.intersection(*(set(turn.scores) for turn in turns))
        points.append(
            TurnPoint(
                iteration=index,
                questions_asked=float(np.mean([turn.questions_asked for turn in turns])),
                scores={name: float(np.mean([turn.scores[name] for turn in turns])) for name in names},
                n=len(turns),
            )
        )
    return points


def turn_curves(runs: Mapping[str, Sequence[CaseResult]], out: Path) -> Path:
    """GTPA@1, GTPA@5 and average rank against the (mean) number of questions asked, one line per run."""
    curves = {label: turn_curve(results) for label, results in runs.items()}
    fig, axes = _subplots(1, len(TURN_METRICS), figsize=(4.2 * len(TURN_METRICS), 3.8))
    for ax, metric in zip(axes, TURN_METRICS, strict=True):
        for label, points in curves.items():
            shown = [p for p in points if metric in p.scores]
            xs = [p.questions_asked for p in shown]
            ax.plot(xs, [p.scores[metric] for p in shown], marker="o", label=label)
        ax.set_xlabel("questions asked")
        ax.set_ylabel("average rank" if metric == "rank" else metric.upper())
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Differential quality vs questions asked")
    return _save(fig, out)


def k_series(runs: Sequence[tuple[str, RunConfig, RunSummary]]) -> dict[str, list[tuple[float, float]]]:
    """(k, tokens per case) points per method, for methods with runs at two or more values of k.

    `runs` are (label, config, summary); runs of the same method and model at the same k are averaged.
    """
    grouped: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for _, config, summary in runs:
        k = config.method_params.get("k")
        if _numeric(k):
            grouped[f"{config.method} ({config.model})"][float(k)].append(summary.tokens_per_case)
    return {
        name: sorted((k, float(np.mean(tokens))) for k, tokens in by_k.items())
        for name, by_k in grouped.items()
        if len(by_k) >= 2
    }


def tokens_vs_k(series: Mapping[str, Sequence[tuple[float, float]]], out: Path) -> Path:
    """Tokens per case against the retrieval depth k, one line per method (DoctorRAG Fig. 5)."""
    if not series:
        raise InvalidInputError("tokens_vs_k needs at least one method with runs at two or more values of k")
    fig, ax = _subplots(figsize=(5.5, 4))
    for name, points in series.items():
        ks, tokens = zip(*sorted(points), strict=True)
        ax.plot(ks, tokens, marker="o", label=name)
    ax.set_xlabel("k (retrieved items)")
    ax.set_ylabel("tokens per case")
    ax.set_title("Token cost vs k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out)


@dataclass(frozen=True)
class ParamGrid:
    """A metric's mean over runs of one method that differ in exactly two numeric parameters."""

    method: str
    x: str
    y: str
    xs: list[float]
    ys: list[float]
    means: np.ndarray  # [len(ys), len(xs)]; NaN where no run has that pair
    calls: np.ndarray  # model requests per case (calls + cache hits), same shape


def param_grids(runs: Sequence[tuple[RunConfig, RunSummary]], metric: str) -> list[ParamGrid]:
    """One grid per method and model whose runs vary in exactly two numeric parameters (i-MedRAG Fig. 3).

    Every run must set both parameters and agree on all the others; a grid needs two or more values of
    each. Runs with the same pair are averaged.
    """
    grouped: dict[str, list[tuple[dict[str, Any], RunSummary]]] = defaultdict(list)
    for config, summary in runs:
        if metric in summary.metrics:
            grouped[f"{config.method} ({config.model})"].append((config.method_params, summary))
    grids = []
    for method, members in grouped.items():
        names = set().union(*(params for params, _ in members))
        varying = sorted(name for name in names if len({repr(p.get(name)) for p, _ in members}) > 1)
        if len(varying) != 2 or not all(_numeric(p.get(n)) for p, _ in members for n in varying):
            continue
        x, y = varying
        xs = sorted({float(p[x]) for p, _ in members})
        ys = sorted({float(p[y]) for p, _ in members})
        if len(xs) < 2 or len(ys) < 2:
            continue
        cells: dict[tuple[int, int], list[RunSummary]] = defaultdict(list)
        for params, summary in members:
            cells[ys.index(float(params[y])), xs.index(float(params[x]))].append(summary)
        means, calls = np.full((len(ys), len(xs)), np.nan), np.full((len(ys), len(xs)), np.nan)
        for cell, summaries in cells.items():
            means[cell] = np.mean([s.metrics[metric].mean for s in summaries])
            calls[cell] = np.mean([_requests_per_case(s) for s in summaries])
        grids.append(ParamGrid(method, x, y, xs, ys, means, calls))
    return grids


def param_grid_heatmap(grid: ParamGrid, out: Path, *, metric: str) -> Path:
    """The grid as a heatmap: each cell the metric's mean and the model requests per case."""
    fig, ax = _subplots(figsize=(1.3 * len(grid.xs) + 3, 1.1 * len(grid.ys) + 2))
    image = ax.imshow(np.ma.masked_invalid(grid.means), cmap="viridis", origin="lower")
    for i in range(len(grid.ys)):
        for j in range(len(grid.xs)):
            if not np.isnan(grid.means[i, j]):
                label = f"{grid.means[i, j]:.3f}\n{grid.calls[i, j]:.1f} calls"
                # dark text on the light (high) end of viridis, light text on the dark end
                colour = "black" if image.norm(grid.means[i, j]) > 0.6 else "white"
                ax.text(j, i, label, ha="center", va="center", fontsize=8, color=colour)
    ax.set_xticks(range(len(grid.xs)), [f"{v:g}" for v in grid.xs])
    ax.set_yticks(range(len(grid.ys)), [f"{v:g}" for v in grid.ys])
    ax.set_xlabel(grid.x)
    ax.set_ylabel(grid.y)
    ax.set_title(f"{grid.method}: {metric}")
    fig.colorbar(image, ax=ax, label=metric)
    return _save(fig, out)


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _requests_per_case(summary: RunSummary) -> float:
    # A request served from the response cache is still one the method made.
    requests = summary.usage.calls + summary.usage.cache_hits
    return requests / summary.n_finished if summary.n_finished else 0.0


def umap_projection(
    vectors: np.ndarray,
    labels: Sequence[str],
    out: Path,
    *,
    top_n: int = 10,
    n_neighbors: int = 15,
    random_state: int = 0,
) -> Path:
    """2-D UMAP of patient embeddings, coloured by diagnosis (the `top_n` most frequent; the rest grey)."""
    data = _check_vectors(vectors, labels)
    import umap  # imported here: numba compiles on first import, which only this plot needs

    reducer = umap.UMAP(
        n_components=2,
        n_neighbors=max(2, min(n_neighbors, len(data) - 1)),
        random_state=random_state,
        n_jobs=1,  # a fixed random_state is only reproducible single-threaded
        init="random" if len(data) < 50 else "spectral",  # spectral init is unstable on tiny samples
    )
    points = reducer.fit_transform(data)
    return _scatter_by_label(points, list(labels), top_n, out)


def _scatter_by_label(points: np.ndarray, labels: list[str], top_n: int, out: Path) -> Path:
    top = [label for label, _ in Counter(labels).most_common(top_n)]
    mask_other = np.array([label not in top for label in labels])
    fig, ax = _subplots(figsize=(7, 5.5))
    if mask_other.any():
        ax.scatter(*points[mask_other].T, s=10, c=_OTHER_COLOUR, label="other")
    colours = matplotlib.colormaps["tab10" if len(top) <= 10 else "tab20"]
    for index, label in enumerate(top):
        chosen = np.array([item == label for item in labels])
        ax.scatter(*points[chosen].T, s=14, color=colours(index % colours.N), label=label)
    ax.set_title("Patient embeddings (UMAP)")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(fig, out)


def _check_vectors(vectors: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    data = np.asarray(vectors, dtype=np.float32)
    if data.ndim != 2 or data.shape[0] != len(labels):
        raise InvalidInputError(
            f"UMAP needs an (n, d) array with one label per row, "
            f"got shape {data.shape} and {len(labels)} labels"
        )
    if data.shape[0] < 4:
        raise InvalidInputError(f"UMAP needs at least 4 vectors, got {data.shape[0]}")
    if not np.isfinite(data).all():
        raise InvalidInputError("patient vectors contain NaN or infinite values")
    return data


def _win_matrix(systems: Sequence[str], rates: Sequence[Sequence[float | None]]) -> np.ndarray:
    size = len(systems)
    if size < 2 or len(rates) != size or any(len(row) != size for row in rates):
        raise InvalidInputError(f"win matrix must be {size}×{size} for {size} systems (at least 2)")
    matrix = np.full((size, size), np.nan)
    for i, row in enumerate(rates):
        for j, value in enumerate(row):
            if i == j:
                continue  # a system does not play itself; the diagonal is shown blank
            if value is None or not 0.0 <= float(value) <= 1.0:
                raise InvalidInputError(f"win rate [{i}][{j}] must be in [0, 1], got {value!r}")
            matrix[i, j] = float(value)
    return matrix


def _subplots(*grid: int, figsize: tuple[float, float]) -> tuple[Figure, Any]:
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(*grid)


def _save(fig: Figure, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=_DPI, format="png")
    return out
