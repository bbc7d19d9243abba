"""Paired comparison of two evaluation runs on the same dataset, case by case."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from clinrag.core.errors import InvalidInputError
from clinrag.eval.results import CaseResult, RunDirectory
from clinrag.eval.stats import PairedStats, paired

# The order metrics are listed in (the runner's score names); anything else follows alphabetically.
METRIC_ORDER = (
    "accuracy",
    "exact_set",
    "precision",
    "recall",
    "f1",
    "gtpa@1",
    "gtpa@3",
    "gtpa@5",
    "gtpa@10",
    "rank",
    "delta_progress",
    "rank_gain",
    "questions_asked",
    "rouge_l",
    "bleu4",
    "meteor",
)
# For these, a smaller score is better (a win of A in PairedStats is then a worse case for A).
LOWER_IS_BETTER = frozenset({"rank", "questions_asked"})


class Comparison(BaseModel):
    """Run A against run B: per metric, a PairedStats over the cases both runs finished (A − B)."""

    dataset: str
    method_a: str
    method_b: str
    model_a: str
    model_b: str
    scoring_a: str = ""
    scoring_b: str = ""
    run_a: str
    run_b: str
    n_paired: int
    unpaired_a: int = Field(description="cases finished by A only")
    unpaired_b: int = Field(description="cases finished by B only")
    metrics: dict[str, PairedStats]
    skipped_metrics: list[str] = Field(
        default_factory=list, description="in both runs, but on fewer than two common cases"
    )


def ordered_metrics(names: Iterable[str]) -> list[str]:
    """Score names in the canonical order (METRIC_ORDER first, then the rest alphabetically)."""
    known = set(names)
    return [name for name in METRIC_ORDER if name in known] + sorted(known - set(METRIC_ORDER))


def compare_runs(
    dir_a: str | Path,
    dir_b: str | Path,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Pair the two runs' results by case id and compare every score both runs recorded."""
    run_a, run_b = RunDirectory(dir_a), RunDirectory(dir_b)
    config_a, config_b = run_a.config(), run_b.config()
    if config_a.dataset != config_b.dataset:
        raise InvalidInputError(
            f"cannot compare runs on different datasets: {run_a.path} is on {config_a.dataset!r}, "
            f"{run_b.path} is on {config_b.dataset!r}"
        )
    by_id_a, by_id_b = _by_case_id(run_a.scored_results()), _by_case_id(run_b.scored_results())
    common = [case_id for case_id in by_id_a if case_id in by_id_b]
    if len(common) < 2:
        raise InvalidInputError(
            f"{run_a.path} and {run_b.path} share {len(common)} finished case(s); "
            "a paired comparison needs at least two"
        )
    metrics, skipped = _paired_metrics(
        [by_id_a[c] for c in common], [by_id_b[c] for c in common], confidence, n_boot, seed
    )
    return Comparison(
        dataset=config_a.dataset,
        method_a=config_a.method,
        method_b=config_b.method,
        model_a=config_a.model,
        model_b=config_b.model,
        scoring_a=config_a.scoring,
        scoring_b=config_b.scoring,
        run_a=str(run_a.path),
        run_b=str(run_b.path),
        n_paired=len(common),
        unpaired_a=len(by_id_a) - len(common),
        unpaired_b=len(by_id_b) - len(common),
        metrics=metrics,
        skipped_metrics=skipped,
    )


def scoring_warning(scorings: dict[str, str]) -> str | None:
    """A warning when runs (label → scoring mode) had their options scored in different modes: likelihoods
    and rank-rule probabilities are different kinds of numbers, so their rankings and metrics differ too."""
    modes = {mode for mode in scorings.values() if mode}
    if len(modes) < 2:
        return None
    listed = ", ".join(f"{label}: {mode}" for label, mode in scorings.items() if mode)
    return f"the runs scored options in different modes ({listed}); their rankings are not comparable"


def _by_case_id(results: list[CaseResult]) -> dict[str, CaseResult]:
    # A later line for the same case (a re-run after a resume) supersedes the earlier one.
    return {result.case_id: result for result in results}


def _paired_metrics(
    results_a: list[CaseResult], results_b: list[CaseResult], confidence: float, n_boot: int, seed: int
) -> tuple[dict[str, PairedStats], list[str]]:
    names_a = {name for result in results_a for name in result.scores}
    names_b = {name for result in results_b for name in result.scores}
    metrics: dict[str, PairedStats] = {}
    skipped: list[str] = []
    for name in ordered_metrics(names_a & names_b):
        # Only cases where both runs have this score can be paired on it.
        pairs = [
            (ra.scores[name], rb.scores[name])
            for ra, rb in zip(results_a, results_b, strict=True)
            if name in ra.scores and name in rb.scores
        ]
        if len(pairs) < 2:
            skipped.append(name)
            continue
        a, b = zip(*pairs, strict=True)
        metrics[name] = paired(a, b, confidence=confidence, n_boot=n_boot, seed=seed)
    return metrics, skipped
