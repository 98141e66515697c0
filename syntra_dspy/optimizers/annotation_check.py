"""The annotation metric every strategy scores an annotation instruction with (one implementation, so the
comparison is fair): each few-shot query's known positive must be labelled positive (2-3) and each random
control document negative (0-1)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.trials import LabelTrial, mismatches_text


def annotation_check(trials: Sequence[LabelTrial], explain: Callable[[str], str] | None = None) -> Evaluation:
    """Score = share of checked labels that are right (a missing label is wrong); passes only when all are.

    On failure ``explain(mismatches_text)`` turns the mismatches into feedback for refinement.
    """
    total = hits = control_errors = 0
    for t in trials:
        total += 1
        hits += t.positive_score is not None and t.positive_score >= 2
        for score in t.control_scores:
            total += 1
            ok = score is not None and score < 2
            hits += ok
            control_errors += score is not None and not ok
    labels = [
        {"query": t.example.query, "positive_id": t.example.positive_id, "label": t.positive_score,
         "candidate_ids": t.candidate_ids, "candidate_scores": t.scores,
         "control_positions": list(t.control_indices)}
        for t in trials
    ]
    score = hits / total if total else 0.0
    if hits == total:
        return Evaluation(score, True, "", {"labels": labels})
    text = mismatches_text(trials)
    feedback = explain(text) if explain else text
    return Evaluation(score, False, feedback or text,
                      {"labels": labels, "mismatches": total - hits, "control_errors": control_errors})
