"""Paired statistics and confidence intervals, against hand-computed values and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from clinrag.core.errors import InvalidInputError
from clinrag.eval.stats import PairedStats, mean_ci, paired, wilson_interval

A = [1, 0, 1, 1, 0]
B = [0, 0, 1, 0, 0]


def test_paired_binary_example_by_hand():
    s = paired(A, B)
    # differences 1,0,0,1,0: mean 0.4, sample variance 1.2 / 4 = 0.3
    assert (s.n, s.wins, s.ties, s.losses) == (5, 2, 3, 0)
    assert s.p_a_beats_b == pytest.approx(0.4)  # 2 / 5: the 3 ties count for neither (DeepDoctor Table IV)
    assert s.relative_improvement == pytest.approx(2.0)  # (0.6 − 0.2) / 0.2
    assert s.mean_a == pytest.approx(0.6) and s.mean_b == pytest.approx(0.2)
    assert s.mean_diff == pytest.approx(0.4)
    assert s.std_a == pytest.approx(math.sqrt(0.3)) and s.std_b == pytest.approx(math.sqrt(0.2))
    assert s.t_stat == pytest.approx(0.4 / (math.sqrt(0.3) / math.sqrt(5)))  # 1.63299
    assert s.t_stat == pytest.approx(1.632993, abs=1e-6)
    assert s.cohens_d == pytest.approx(0.4 / math.sqrt(0.3))  # d_z = 0.7303
    reference = sps.ttest_rel(A, B)
    assert s.t_stat == pytest.approx(reference.statistic)
    assert s.p_value == pytest.approx(reference.pvalue)


def test_paired_continuous_matches_scipy():
    rng = np.random.default_rng(7)
    a = rng.normal(0.6, 0.2, size=40)
    b = a - rng.normal(0.05, 0.1, size=40)
    s = paired(a.tolist(), b.tolist())
    reference = sps.ttest_rel(a, b)
    assert s.t_stat == pytest.approx(reference.statistic)
    assert s.p_value == pytest.approx(reference.pvalue)
    diff = a - b
    assert s.cohens_d == pytest.approx(diff.mean() / diff.std(ddof=1))
    assert s.diff_ci_low < s.mean_diff < s.diff_ci_high


def test_paired_losses_and_negative_difference():
    s = paired([0, 0, 1, 0], [1, 1, 1, 0])
    assert (s.wins, s.ties, s.losses) == (0, 2, 2)
    assert s.p_a_beats_b == 0.0  # no win; the 2 ties count for neither
    assert s.relative_improvement == pytest.approx(-0.5 / 0.75)
    assert s.mean_diff == pytest.approx(-0.5)
    assert s.t_stat is not None and s.t_stat < 0


def test_identical_samples_give_no_difference_without_nan():
    s = paired([3.0, 1.0, 2.0], [3.0, 1.0, 2.0])
    assert (s.t_stat, s.p_value, s.cohens_d) == (0.0, 1.0, 0.0)
    assert (s.diff_ci_low, s.diff_ci_high) == (0.0, 0.0)
    assert s.wins == 0 and s.ties == 3


def test_constant_nonzero_shift_is_unbounded():
    # 0.3 - 0.2 and 0.2 - 0.1 differ in the last bit: still a constant shift, not a huge-but-finite t.
    s = paired([0.3, 0.2, 1.1], [0.2, 0.1, 1.0])
    assert s.t_stat is None and s.cohens_d is None
    assert s.p_value == 0.0
    assert s.mean_diff == pytest.approx(0.1)
    again = PairedStats.model_validate_json(s.model_dump_json())
    assert again == s


def test_paired_bootstrap_is_deterministic_and_resamples_pairs():
    rng = np.random.default_rng(1)
    a = rng.random(30)
    b = a + 0.5  # every pair differs by exactly 0.5: any resampling of pairs has mean difference -0.5
    s = paired(a, b, seed=3)
    assert s.diff_ci_low == pytest.approx(-0.5) and s.diff_ci_high == pytest.approx(-0.5)
    x = rng.random(30)
    assert paired(a, x, seed=3) == paired(a, x, seed=3)
    assert paired(a, x, seed=3).diff_ci_low != paired(a, x, seed=4).diff_ci_low


def test_paired_bad_input():
    with pytest.raises(InvalidInputError, match="equal lengths"):
        paired([1, 0, 1], [1, 0])
    with pytest.raises(InvalidInputError, match="at least two"):
        paired([1], [0])
    with pytest.raises(InvalidInputError, match="empty"):
        paired([], [])
    with pytest.raises(InvalidInputError, match="NaN"):
        paired([1.0, float("nan")], [1.0, 0.0])
    with pytest.raises(InvalidInputError, match="confidence"):
        paired([1, 0], [0, 1], confidence=1.0)


def test_wilson_8_of_10_hand_value():
    # z = 1.959964: centre (0.8 + z²/20) / (1 + z²/10) = 0.71674, half-width 0.22658
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4)
    assert high == pytest.approx(0.9433, abs=1e-4)
    mean, low2, high2 = mean_ci([1, 1, 1, 0, 1, 1, 0, 1, 1, 1])
    assert mean == pytest.approx(0.8)
    assert (low2, high2) == pytest.approx((low, high))


def test_wilson_all_failures_has_nonzero_upper_bound():
    z2 = 1.959964**2
    mean, low, high = mean_ci([0, 0, 0, 0, 0])
    assert (mean, low) == (0.0, 0.0)
    assert high == pytest.approx(z2 / (5 + z2), abs=1e-5)  # 0.4345: not the degenerate bootstrap [0, 0]


def test_bootstrap_ci_is_deterministic_and_close_to_normal_theory():
    rng = np.random.default_rng(0)
    values = rng.normal(10.0, 2.0, size=400).tolist()
    first = mean_ci(values, seed=5)
    assert first == mean_ci(values, seed=5)
    assert first != mean_ci(values, seed=6)
    mean, low, high = first
    assert mean == pytest.approx(np.mean(values))
    half = 1.959964 * np.std(values, ddof=1) / math.sqrt(len(values))  # ≈ 0.196
    assert high - mean == pytest.approx(half, rel=0.15)
    assert mean - low == pytest.approx(half, rel=0.15)


def test_bootstrap_of_constant_and_wider_confidence():
    assert mean_ci([2.5, 2.5, 2.5]) == (2.5, 2.5, 2.5)
    values = [0.1, 0.4, 0.35, 0.8, 0.2, 0.9, 0.55]
    _, low90, high90 = mean_ci(values, confidence=0.90)
    _, low99, high99 = mean_ci(values, confidence=0.99)
    assert low99 <= low90 < high90 <= high99


def test_mean_ci_single_and_bad_input():
    assert mean_ci([0.42]) == (0.42, 0.42, 0.42)
    assert mean_ci([1]) == (1.0, 1.0, 1.0)
    with pytest.raises(InvalidInputError, match="empty"):
        mean_ci([])
    with pytest.raises(InvalidInputError, match="NaN or infinite"):
        mean_ci([0.5, float("inf")])
    with pytest.raises(InvalidInputError, match="n_boot"):
        mean_ci([0.5, 0.2], n_boot=0)
    with pytest.raises(InvalidInputError, match="numbers"):
        mean_ci(["a", "b"])
