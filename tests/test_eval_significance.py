"""Paired t-test and bootstrap CI on synthetic paired scores."""

from __future__ import annotations

import numpy as np
import pytest

from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation import bootstrap_ci, compare_runs, paired_comparison


def _scores(values) -> dict[str, float]:
    return {f"q{i}": float(v) for i, v in enumerate(values)}


@pytest.fixture(scope="module")
def base():
    return np.random.default_rng(1).uniform(0.2, 0.8, size=60)


def test_identical_systems(base):
    c = paired_comparison(_scores(base), _scores(base), measure="nDCG@10")
    assert (c.n, c.diff, c.ci_low, c.ci_high, c.p_value) == (60, 0.0, 0.0, 0.0, 1.0)
    assert c.ci_low <= 0 <= c.ci_high and not c.significant
    assert (c.wins, c.losses, c.ties) == (0, 0, 60)


def test_clearly_better_system(base):
    better = base + 0.1 + np.random.default_rng(2).normal(0, 0.03, size=base.size)
    c = paired_comparison(_scores(base), _scores(better))
    assert c.diff == pytest.approx(float((better - base).mean()))
    assert c.mean_b - c.mean_a == pytest.approx(c.diff)
    assert 0 < c.ci_low < c.diff < c.ci_high
    assert c.p_value < 1e-10 and c.significant


def test_clearly_worse_and_noise(base):
    worse = paired_comparison(_scores(base), _scores(base - 0.2))
    assert worse.ci_high < 0 and worse.p_value == 0.0  # constant shift: no variance, certain
    noisy = base + np.random.default_rng(3).normal(0, 0.2, size=base.size)
    noise = paired_comparison(_scores(base), _scores(noisy - (noisy - base).mean()))
    assert noise.ci_low < 0 < noise.ci_high and noise.p_value > 0.5


def test_p_value_is_scipys_paired_t_test(base):
    from scipy import stats

    other = base + np.random.default_rng(4).normal(0.02, 0.1, size=base.size)
    c = paired_comparison(_scores(base), _scores(other))
    assert c.p_value == pytest.approx(stats.ttest_rel(other, base).pvalue)


def test_bootstrap_is_seeded_and_covers_the_mean():
    d = np.random.default_rng(5).normal(0.05, 0.1, size=200)
    first = bootstrap_ci(d, n_bootstrap=2000, seed=7)
    assert first == bootstrap_ci(d, n_bootstrap=2000, seed=7)
    assert first != bootstrap_ci(d, n_bootstrap=2000, seed=8)
    assert first[0] < d.mean() < first[1]
    narrow = bootstrap_ci(d, n_bootstrap=2000, confidence=0.5, seed=7)
    assert first[0] < narrow[0] < narrow[1] < first[1]
    # about the normal-theory width: 2 * 1.96 * sd / sqrt(n)
    assert first[1] - first[0] == pytest.approx(2 * 1.96 * d.std(ddof=1) / np.sqrt(d.size), rel=0.15)


def test_compare_runs_scores_both_on_the_same_queries():
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d3": 1}}
    good = {"a": {"d1": 2.0, "x": 1.0}, "b": {"d2": 2.0}, "c": {"d3": 1.0}}
    bad = {"a": {"x": 2.0, "d1": 1.0}, "b": {"d2": 1.0}}  # query c missing: scores 0
    c = compare_runs(bad, good, qrels, "RR", n_bootstrap=500)
    assert c.n == 3 and c.measure == "RR"
    assert c.mean_a == pytest.approx((0.5 + 1 + 0) / 3) and c.mean_b == pytest.approx(1.0)
    assert (c.wins, c.losses, c.ties) == (2, 0, 1)
    skip = compare_runs(bad, good, qrels, "RR", missing="skip", n_bootstrap=500)
    assert skip.n == 2
    with pytest.raises(ConfigError, match="one measure at a time"):
        compare_runs(bad, good, qrels, "RR P@5")


def test_input_errors():
    with pytest.raises(ConfigError, match="different queries"):
        paired_comparison({"a": 1.0}, {"b": 1.0})
    with pytest.raises(ConfigError, match="no queries"):
        paired_comparison({}, {})
    with pytest.raises(ConfigError, match="confidence"):
        paired_comparison({"a": 1.0}, {"a": 1.0}, confidence=95)
