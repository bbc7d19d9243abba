"""Confidence intervals and paired comparisons of per-case scores (DeepDoctor-RAG Table IV style).

Two methods evaluated on the same cases are compared item by item: the paired t-test, Cohen's d_z, per-item
wins / ties / losses, P(A > B) (a tie counts for neither), the relative improvement of A over B, and a
bootstrap interval of the mean difference that resamples cases (pairs), so the correlation between the two
methods' scores on a case is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel
from scipy import stats as sps

from clinrag.core.errors import InvalidInputError

# Bootstrap resamples are drawn in blocks of about this many indices, so memory stays bounded for big runs.
_BLOCK_CELLS = 1_000_000
# A spread this small relative to the mean is floating-point noise (e.g. 0.3 - 0.2 vs 0.2 - 0.1), not data.
_ZERO_SPREAD = 1e-12


class PairedStats(BaseModel):
    """A paired comparison of A and B on the same n items; differences are A − B.

    `t_stat` and `cohens_d` are None when every item differs by the same non-zero amount (the spread of the
    differences is zero, so both are unbounded; the sign is that of `mean_diff`, and `p_value` is 0).
    When every difference is zero, t = 0, d = 0 and p = 1: no evidence of any difference.
    """

    n: int
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    mean_diff: float
    diff_ci_low: float
    diff_ci_high: float
    confidence: float
    t_stat: float | None
    p_value: float
    cohens_d: float | None
    wins: int
    ties: int
    losses: int
    p_a_beats_b: float  # the share of items A scores higher on; a tie counts for neither (DeepDoctor T. IV)
    relative_improvement: float | None  # (mean A − mean B) / |mean B|; None when mean B is 0


def mean_ci(
    values: Sequence[float], *, confidence: float = 0.95, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high) of `values` at `confidence`.

    0/1 values (accuracy, GTPA@k) get the Wilson score interval: a percentile bootstrap of a proportion
    collapses to [0, 0] or [1, 1] when every case failed or succeeded and undercovers on small samples, while
    Wilson stays inside [0, 1] and keeps its coverage. Anything else gets a percentile bootstrap of the mean,
    deterministic for a given `seed`.
    """
    data = _as_array(values, "values")
    _check_options(confidence, n_boot)
    mean = float(data.mean())
    if data.size == 1:
        return mean, mean, mean
    if np.isin(data, (0.0, 1.0)).all():
        low, high = wilson_interval(int(data.sum()), int(data.size), confidence=confidence)
    else:
        low, high = _bootstrap_ci(data, confidence, n_boot, seed)
    return mean, low, high


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion successes / n."""
    if n < 1 or not 0 <= successes <= n:
        raise InvalidInputError(f"Wilson interval needs 0 <= successes <= n and n >= 1, got {successes}/{n}")
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def paired(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> PairedStats:
    """Compare A and B item by item (a[i] and b[i] are the two methods' scores on the same case)."""
    x, y = _as_array(a, "a"), _as_array(b, "b")
    if x.size != y.size:
        raise InvalidInputError(f"paired samples must have equal lengths, got {x.size} and {y.size}")
    if x.size < 2:
        raise InvalidInputError("a paired comparison needs at least two paired items")
    _check_options(confidence, n_boot)
    diff = x - y
    t_stat, p_value, cohens_d = _paired_t(diff)
    low, high = _bootstrap_ci(diff, confidence, n_boot, seed)
    wins, ties = int((diff > 0).sum()), int((diff == 0).sum())
    return PairedStats(
        n=int(x.size),
        mean_a=float(x.mean()),
        mean_b=float(y.mean()),
        std_a=float(x.std(ddof=1)),
        std_b=float(y.std(ddof=1)),
        mean_diff=float(diff.mean()),
        diff_ci_low=low,
        diff_ci_high=high,
        confidence=confidence,
        t_stat=t_stat,
        p_value=p_value,
        cohens_d=cohens_d,
        wins=wins,
        ties=ties,
        losses=int(x.size) - wins - ties,
        p_a_beats_b=wins / x.size,
        relative_improvement=float(diff.mean() / abs(y.mean())) if y.mean() != 0 else None,
    )


def _paired_t(diff: np.ndarray) -> tuple[float | None, float, float | None]:
    """(t, two-sided p, Cohen's d_z) of the differences; d_z = mean(diff) / sd(diff), sd with ddof=1."""
    mean = float(diff.mean())
    sd = float(diff.std(ddof=1))
    if sd <= _ZERO_SPREAD * max(1.0, abs(mean)):
        # scipy would return NaN (all equal) or ±inf; give defined values instead (see PairedStats).
        return (0.0, 1.0, 0.0) if mean == 0 else (None, 0.0, None)
    n = diff.size
    t_stat = mean / (sd / math.sqrt(n))
    p_value = float(2 * sps.t.sf(abs(t_stat), df=n - 1))
    return t_stat, p_value, mean / sd


def _bootstrap_ci(data: np.ndarray, confidence: float, n_boot: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, resampling items with replacement."""
    rng = np.random.default_rng(seed)
    n = data.size
    rows = max(1, _BLOCK_CELLS // n)
    means = np.empty(n_boot)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        picks = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = data[picks].mean(axis=1)
    alpha = 1 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _as_array(values: Sequence[float], name: str) -> np.ndarray:
    try:
        data = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} must be a sequence of numbers: {exc}") from exc
    if data.ndim != 1:
        raise InvalidInputError(f"{name} must be one-dimensional, got shape {data.shape}")
    if data.size == 0:
        raise InvalidInputError(f"{name} is empty: nothing to summarise")
    if not np.isfinite(data).all():
        raise InvalidInputError(f"{name} contains NaN or infinite values")
    return data


def _check_options(confidence: float, n_boot: int) -> None:
    if not 0 < confidence < 1:
        raise InvalidInputError(f"confidence must be in (0, 1), got {confidence}")
    if n_boot < 1:
        raise InvalidInputError(f"n_boot must be at least 1, got {n_boot}")
