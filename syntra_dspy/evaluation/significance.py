"""Paired comparison of two systems on the same queries: t-test and bootstrap CI of the mean difference.

The difference is always ``B - A`` per query. The p-value is the two-sided paired t-test
(``scipy.stats.ttest_rel``); the confidence interval is the percentile bootstrap of the mean
difference, resampling queries with replacement from a seeded generator, so the same inputs always
give the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from syntra_dspy.errors import ConfigError


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`paired_comparison`; ``diff = mean_b - mean_a``."""

    measure: str
    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    confidence: float
    n_bootstrap: int
    seed: int
    wins: int
    losses: int
    ties: int
    test: str = "paired t-test (two-sided)"

    @property
    def significant(self) -> bool:
        """p below 1 - confidence (0.05 at the default 95%)."""
        return self.p_value < 1 - self.confidence

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def paired_comparison(a: Mapping[str, float], b: Mapping[str, float], *, measure: str = "",
                      n_bootstrap: int = 10_000, confidence: float = 0.95, seed: int = 0) -> Comparison:
    """Compare per-query scores ``a`` and ``b`` (dicts keyed by query id) on the queries they share.

    Both should hold the same queries (score missing queries as 0 before, as ``score_run`` does); a
    query only one side has is an error, so a comparison never silently drops queries.
    """
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ConfigError(f"the two systems were scored on different queries ({len(only)} differ, e.g. "
                          f"{', '.join(only[:3])})", field="queries",
                          hint="score both runs on the same query set")
    if not a:
        raise ConfigError("no queries to compare", field="queries")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be between 0 and 1, got {confidence}", field="confidence")
    if n_bootstrap < 1:
        raise ConfigError(f"n_bootstrap must be positive, got {n_bootstrap}", field="n_bootstrap")
    qids = sorted(a)
    xa = np.array([a[q] for q in qids], dtype=np.float64)
    xb = np.array([b[q] for q in qids], dtype=np.float64)
    d = xb - xa
    low, high = bootstrap_ci(d, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    return Comparison(
        measure=measure, n=len(qids), mean_a=float(xa.mean()), mean_b=float(xb.mean()),
        diff=float(d.mean()), ci_low=low, ci_high=high, p_value=paired_t_pvalue(xa, xb),
        confidence=confidence, n_bootstrap=n_bootstrap, seed=seed,
        wins=int((d > 0).sum()), losses=int((d < 0).sum()), ties=int((d == 0).sum()),
    )


def paired_t_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test p-value. Fewer than two queries: 1.0 (no test is possible). No variance in
    the differences: 1.0 if they are all zero, 0.0 if every query moves by the same non-zero amount."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if len(d) < 2:
        return 1.0
    if np.allclose(d, d[0], rtol=0, atol=1e-12):
        return 1.0 if np.allclose(d, 0, rtol=0, atol=1e-12) else 0.0
    from scipy import stats

    p = float(stats.ttest_rel(b, a).pvalue)
    return 1.0 if math.isnan(p) else p


def bootstrap_ci(diffs: np.ndarray, *, n_bootstrap: int = 10_000, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diffs`` (queries resampled with replacement)."""
    d = np.asarray(diffs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.empty(n_bootstrap, dtype=np.float64)
    chunk = max(1, 2_000_000 // max(1, len(d)))
    for start in range(0, n_bootstrap, chunk):
        stop = min(n_bootstrap, start + chunk)
        idx = rng.integers(0, len(d), size=(stop - start, len(d)))
        means[start:stop] = d[idx].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)
