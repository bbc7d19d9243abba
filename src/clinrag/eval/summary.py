"""A run's summary from its case results: metric means with 95 % CIs, errors, cost."""

from __future__ import annotations

from collections.abc import Sequence

from clinrag.core.usage import Usage
from clinrag.eval.compare import ordered_metrics
from clinrag.eval.results import CaseResult, MetricSummary, RunConfig, RunSummary
from clinrag.eval.stats import mean_ci


def metric_values(results: Sequence[CaseResult]) -> dict[str, list[float]]:
    """Score name → the values of the cases that have it, in result order."""
    values: dict[str, list[float]] = {}
    for result in results:
        for name, value in result.scores.items():
            values.setdefault(name, []).append(value)
    return values


def summarize(config: RunConfig, results: Sequence[CaseResult], wall_s: float) -> RunSummary:
    metrics = {}
    values_by_name = metric_values(results)
    for name in ordered_metrics(values_by_name):
        values = values_by_name[name]
        mean, low, high = mean_ci(values)
        metrics[name] = MetricSummary(mean=mean, ci_low=low, ci_high=high, n=len(values))
    usage = sum((r.answer.usage for r in results), Usage())
    finished = len(results)
    return RunSummary(
        dataset=config.dataset,
        method=config.method,
        model=config.model,
        n_cases=len(config.case_ids),
        n_finished=finished,
        n_errors=sum(r.answer.error is not None for r in results),
        metrics=metrics,
        usage=usage,
        calls_per_case=usage.calls / finished if finished else 0.0,
        tokens_per_case=usage.total_tokens / finished if finished else 0.0,
        wall_s=wall_s,
        run_ids=list(dict.fromkeys(r.run_id for r in results)),
    )
