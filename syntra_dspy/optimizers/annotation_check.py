"""The annotation metrics every strategy scores a written-label annotation instruction with (one implementation,
so the comparison is fair): each few-shot query's known positive must be labelled positive (2-3) and each random
control document negative (0-1) (:func:`annotation_check`); or, given human-confirmed labels, every confirmed
label must be matched, as in the paper's calibration runs (:func:`calibration_check`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from syntra_dspy.judging.labels import LabelledPair
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.trials import LabelTrial, mismatches_text
from syntra_dspy.programs import context as ctx
from syntra_dspy.signatures.types import label_class


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


@dataclass
class CalibrationTrial:
    """The annotator's 0-3 scores for the confirmed pairs of one query (None where annotation failed)."""

    query: str
    pairs: list[LabelledPair]
    scores: list[int | None]


def run_calibration(program, pairs: Sequence[LabelledPair], *, chunk_size: int) -> list[CalibrationTrial]:
    """Label every confirmed pair with the program's annotator, query by query, in chunks."""
    by_query: dict[str, list[LabelledPair]] = {}
    for pair in pairs:
        by_query.setdefault(pair.query, []).append(pair)
    return [CalibrationTrial(query, group, program.label_all(query, [p.text or "" for p in group],
                                                            chunk_size=chunk_size))
            for query, group in by_query.items()]


def calibration_mismatches(trials: Sequence[CalibrationTrial], max_doc_chars: int = 600) -> str:
    lines, n = [], 0
    for trial in trials:
        for pair, score in zip(trial.pairs, trial.scores):
            given = None if score is None else label_class(score)
            if given == pair.label:
                continue
            n += 1
            shown = "no label (the annotator's answer was unusable)" if score is None else f"{score} ({given})"
            lines.append(f"{n}. Query: {trial.query}\n   Document: {ctx.clip(pair.text or '', max_doc_chars)}\n"
                         f"   Confirmed label: {pair.label}; label given: {shown}")
    return "\n\n".join(lines)


def calibration_check(trials: Sequence[CalibrationTrial], explain: Callable[[str], str] | None = None) -> Evaluation:
    """Score = share of confirmed pairs whose three-class label the annotator matched; passes when all match.

    As in the paper's calibration, pass/fail is decided by exact label comparison; ``explain`` only turns
    the mismatches into feedback for the refiner.
    """
    labels = [{"query": t.query, "doc_id": p.doc_id, "expected": p.label, "score": s}
              for t in trials for p, s in zip(t.pairs, t.scores)]
    total = len(labels)
    hits = sum(1 for row in labels if row["score"] is not None and label_class(row["score"]) == row["expected"])
    score = hits / total if total else 0.0
    if hits == total:
        return Evaluation(score, True, "", {"calibration": labels})
    text = calibration_mismatches(trials)
    feedback = explain(text) if explain else text
    return Evaluation(score, False, feedback or text, {"calibration": labels, "mismatches": total - hits})
