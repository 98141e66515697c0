"""Agreement between an annotator's labels and human reference labels, as the paper reports it.

Binary agreement merges the two negative classes (relevant vs not); three-class agreement distinguishes
positive, hard negative and easy negative. Both report exact-match accuracy, Cohen's kappa, per-class
precision and recall, and the confusion matrix; "training-label precision" is the share of pairs the
annotator called positive or hard negative (the labels training uses) whose exact class the reference
confirms. A pair the annotator left unlabelled counts as wrong in accuracy and is left out of kappa,
precision and recall (reported as ``unlabelled``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

THREE_CLASS: tuple[str, ...] = ("positive", "hard_negative", "easy_negative")
BINARY: tuple[str, ...] = ("relevant", "non_relevant")


def to_binary(label: str) -> str:
    return "relevant" if label == "positive" else "non_relevant"


def confusion_matrix(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> list[list[int]]:
    """Counts with rows = reference label and columns = annotator label, both in ``labels`` order."""
    if len(gold) != len(pred):
        raise ValueError(f"gold and predicted labels differ in length ({len(gold)} vs {len(pred)})")
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for g, p in zip(gold, pred):
        if g not in index or p not in index:
            raise ValueError(f"label {g if g not in index else p!r} is not one of {', '.join(labels)}")
        matrix[index[g]][index[p]] += 1
    return matrix


def cohen_kappa(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float | None:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e); None when undefined (both raters used one and the same class)."""
    labels = list(labels) if labels is not None else sorted(set(gold) | set(pred))
    matrix = confusion_matrix(gold, pred, labels)
    n = sum(map(sum, matrix))
    if n == 0:
        return None
    observed = sum(matrix[i][i] for i in range(len(labels))) / n
    rows = [sum(row) for row in matrix]
    cols = [sum(matrix[r][c] for r in range(len(labels))) for c in range(len(labels))]
    expected = sum(r * c for r, c in zip(rows, cols)) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


@dataclass(frozen=True)
class Agreement:
    """Agreement of one annotator with the reference on one label scheme."""

    labels: tuple[str, ...]
    n: int
    unlabelled: int
    accuracy: float | None
    kappa: float | None
    per_class: dict[str, dict[str, Any]]
    confusion: list[list[int]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def agreement(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]) -> Agreement:
    """Compare annotator labels (None = unlabelled) with reference labels on the classes ``labels``."""
    if len(gold) != len(pred):
        raise ValueError(f"gold and predicted labels differ in length ({len(gold)} vs {len(pred)})")
    pairs = [(g, p) for g, p in zip(gold, pred) if p is not None]
    g_l, p_l = [g for g, _ in pairs], [p for _, p in pairs]
    matrix = confusion_matrix(g_l, p_l, labels)
    per_class = {}
    for i, label in enumerate(labels):
        predicted = sum(matrix[r][i] for r in range(len(labels)))
        support = sum(matrix[i])
        per_class[label] = {
            "precision": matrix[i][i] / predicted if predicted else None,
            "recall": matrix[i][i] / support if support else None,
            "support": support,
            "predicted": predicted,
        }
    hits = sum(matrix[i][i] for i in range(len(labels)))
    return Agreement(
        labels=tuple(labels), n=len(gold), unlabelled=len(gold) - len(pairs),
        accuracy=hits / len(gold) if gold else None,
        kappa=cohen_kappa(g_l, p_l, labels) if pairs else None,
        per_class=per_class, confusion=matrix,
    )


def training_label_precision(gold: Sequence[str], pred: Sequence[str | None]) -> float | None:
    """Share of pairs labelled positive or hard negative whose exact class the reference confirms."""
    used = [(g, p) for g, p in zip(gold, pred) if p in ("positive", "hard_negative")]
    return sum(g == p for g, p in used) / len(used) if used else None


def label_agreement(gold: Sequence[str], pred: Sequence[str | None]) -> dict[str, Any]:
    """Binary and three-class agreement plus training-label precision, as plain JSON-ready data."""
    binary = agreement([to_binary(g) for g in gold], [None if p is None else to_binary(p) for p in pred], BINARY)
    three = agreement(gold, pred, THREE_CLASS)
    return {"binary": binary.to_dict(), "three_class": three.to_dict(),
            "training_label_precision": training_label_precision(gold, pred)}


def paired_kappa_bootstrap(gold: Sequence[str], groups: Sequence[str], a: Sequence[str | None],
                           b: Sequence[str | None], *, rounds: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Binary kappa of annotator b minus annotator a on the same pairs, with a 95% interval from resampling the
    groups (queries) with replacement: pairs of one query are not independent, so queries are the unit.

    Labels are three-class or binary names (merged to relevant / not relevant); None (unlabelled) is left out of
    kappa, as in :func:`agreement`. ``p_b_not_better`` is the share of resamples where b does not beat a.
    """
    gold_b = [to_binary(g) if g not in BINARY else g for g in gold]

    def binary(pred: Sequence[str | None]) -> list[str | None]:
        return [None if p is None else p if p in BINARY else to_binary(p) for p in pred]

    pa, pb = binary(a), binary(b)
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)

    def kappa(idx: Sequence[int], pred: Sequence[str | None]) -> float | None:
        keep = [i for i in idx if pred[i] is not None]
        return cohen_kappa([gold_b[i] for i in keep], [pred[i] for i in keep], BINARY) if keep else None

    everything = list(range(len(gold_b)))
    ka, kb = kappa(everything, pa), kappa(everything, pb)
    rng = random.Random(seed)
    names = list(by_group)
    diffs = []
    for _ in range(rounds):
        idx = [i for g in (rng.choice(names) for _ in names) for i in by_group[g]]
        x, y = kappa(idx, pa), kappa(idx, pb)
        if x is not None and y is not None:
            diffs.append(y - x)
    diffs.sort()
    lo = diffs[int(0.025 * len(diffs))] if diffs else None
    hi = diffs[min(len(diffs) - 1, int(0.975 * len(diffs)))] if diffs else None
    p = sum(d <= 0 for d in diffs) / len(diffs) if diffs else None
    return {"kappa_a": ka, "kappa_b": kb, "difference": None if ka is None or kb is None else kb - ka,
            "ci95": [lo, hi], "p_b_not_better": p, "rounds": len(diffs)}


def kappa_interval(gold: Sequence[str], groups: Sequence[str], pred: Sequence[str | None], *, rounds: int = 2000,
                   seed: int = 0) -> list[float | None]:
    """A 95% interval of one annotator's binary kappa, from resampling the groups (queries) with replacement, as
    :func:`paired_kappa_bootstrap` does for a difference."""
    gold_b = [to_binary(g) if g not in BINARY else g for g in gold]
    pred_b = [None if p is None else p if p in BINARY else to_binary(p) for p in pred]
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    rng = random.Random(seed)
    names = list(by_group)
    values = []
    for _ in range(rounds):
        keep = [i for g in (rng.choice(names) for _ in names) for i in by_group[g] if pred_b[i] is not None]
        k = cohen_kappa([gold_b[i] for i in keep], [pred_b[i] for i in keep], BINARY) if keep else None
        if k is not None:
            values.append(k)
    values.sort()
    if not values:
        return [None, None]
    return [values[int(0.025 * len(values))], values[min(len(values) - 1, int(0.975 * len(values)))]]
