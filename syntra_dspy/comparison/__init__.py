"""Compare optimizer strategies on one task: the paper's self-improvement vs human-calibration question; and
compare artifacts' judges with people's judgments (``measure_agreement``, ``syntra agreement``).

>>> from syntra_dspy.comparison import HeldoutOptions, compare_strategies
>>> result = compare_strategies("task.yaml", strategies="none,self-improve,gepa",
...                             heldout=HeldoutOptions(qrels="beir:data/scifact:train"))  # doctest: +SKIP
>>> [r.strategy for r in result.ranked()]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.comparison.compare import ComparisonResult, StrategyResult, compare_strategies, compile_cost, rank
    from syntra_dspy.comparison.heldout import HeldoutMaterial, JudgedItem
    from syntra_dspy.comparison.judge_agreement import measure_agreement
    from syntra_dspy.comparison.plan import plan_comparison
    from syntra_dspy.comparison.report import draw_chart, markdown, write_reports
    from syntra_dspy.comparison.scoring import HeldoutScorer
    from syntra_dspy.comparison.settings import CompareConfig, DownstreamOptions, HeldoutOptions, parse_strategies
    from syntra_dspy.judging.agreement import (
        Agreement,
        agreement,
        cohen_kappa,
        confusion_matrix,
        label_agreement,
        training_label_precision,
    )
    from syntra_dspy.judging.labels import load_judgements

__all__ = [
    "Agreement",
    "CompareConfig",
    "ComparisonResult",
    "DownstreamOptions",
    "HeldoutMaterial",
    "HeldoutOptions",
    "HeldoutScorer",
    "JudgedItem",
    "StrategyResult",
    "agreement",
    "cohen_kappa",
    "compare_strategies",
    "compile_cost",
    "confusion_matrix",
    "draw_chart",
    "label_agreement",
    "load_judgements",
    "markdown",
    "measure_agreement",
    "parse_strategies",
    "plan_comparison",
    "rank",
    "training_label_precision",
    "write_reports",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ComparisonResult": "syntra_dspy.comparison.compare",
    "StrategyResult": "syntra_dspy.comparison.compare",
    "compare_strategies": "syntra_dspy.comparison.compare",
    "compile_cost": "syntra_dspy.comparison.compare",
    "rank": "syntra_dspy.comparison.compare",
    "HeldoutMaterial": "syntra_dspy.comparison.heldout",
    "JudgedItem": "syntra_dspy.comparison.heldout",
    "measure_agreement": "syntra_dspy.comparison.judge_agreement",
    "plan_comparison": "syntra_dspy.comparison.plan",
    "draw_chart": "syntra_dspy.comparison.report",
    "markdown": "syntra_dspy.comparison.report",
    "write_reports": "syntra_dspy.comparison.report",
    "HeldoutScorer": "syntra_dspy.comparison.scoring",
    "CompareConfig": "syntra_dspy.comparison.settings",
    "DownstreamOptions": "syntra_dspy.comparison.settings",
    "HeldoutOptions": "syntra_dspy.comparison.settings",
    "parse_strategies": "syntra_dspy.comparison.settings",
    "Agreement": "syntra_dspy.judging.agreement",
    "agreement": "syntra_dspy.judging.agreement",
    "cohen_kappa": "syntra_dspy.judging.agreement",
    "confusion_matrix": "syntra_dspy.judging.agreement",
    "label_agreement": "syntra_dspy.judging.agreement",
    "training_label_precision": "syntra_dspy.judging.agreement",
    "load_judgements": "syntra_dspy.judging.labels",
})
