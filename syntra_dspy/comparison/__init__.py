"""Compare optimizer strategies on one task: the paper's self-improvement vs human-calibration question.

>>> from syntra_dspy.comparison import HeldoutOptions, compare_strategies
>>> result = compare_strategies("task.yaml", strategies="none,self-improve,gepa",
...                             heldout=HeldoutOptions(qrels="beir:data/scifact:train"))  # doctest: +SKIP
>>> [r.strategy for r in result.ranked()]  # doctest: +SKIP
"""

from __future__ import annotations

from syntra_dspy.comparison.compare import (
    ComparisonResult,
    StrategyResult,
    compare_strategies,
    compile_cost,
    parse_strategies,
    rank,
)
from syntra_dspy.comparison.downstream import DownstreamOptions
from syntra_dspy.comparison.heldout import HeldoutMaterial, HeldoutOptions, JudgedItem
from syntra_dspy.comparison.report import draw_chart, markdown, write_reports
from syntra_dspy.comparison.scoring import HeldoutScorer
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
    "parse_strategies",
    "rank",
    "training_label_precision",
    "write_reports",
]
