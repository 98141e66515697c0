"""The annotation loop with the graded judge: grade a calibration set, fit the calibration, check agreement.

The calibration set (:func:`calibration_set`) is what test mode knows about relevance for this task: each few-shot
query's retrieved top-K (its own positive among them, added when retrieval missed it; the other candidates as
presumed negatives) plus random corpus documents as easy negatives, and, when the user names judged data
(``calibration_labels``: a ``beir:``/``neuclirtech:`` dataset with human qrels), the same kind of candidates for
some of its queries with the people's judgments as reference. An attempt grades every candidate with the attempt's
instruction, fits a :class:`JudgeCalibration`, and passes when binary Cohen's kappa and positive recall on the set
reach their targets; mismatches (positives called negative, random documents called positive) become the
refiner's feedback. The kept attempt's calibration is compiled into the program.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.programs.grading import Grade
from syntra_dspy.programs.judge import Candidate, RelevanceJudge
from syntra_dspy.programs.judge_calibration import (
    CalibrationSample,
    JudgeCalibration,
    fit_calibration,
    sample_contexts,
)
from syntra_dspy.retrieval.candidates import JudgedCandidate, build_candidates

logger = logging.getLogger(__name__)


def calibration_set(examples: Sequence[FewShotPair], source: Any, *, k: int, controls: int, seed: int,
                    labels: str | None = None, label_queries: int = 0) -> list[JudgedCandidate]:
    """Candidates with reference classes: the few-shot queries' (always) and a judged dataset's (when given)."""
    corpus, encoder, index = source.corpus, source.encoder, source.index
    rng = random.Random(seed)
    out: list[JudgedCandidate] = []
    qvecs = encoder.encode_queries([ex.query for ex in examples])
    for n, (ex, qvec, found) in enumerate(zip(examples, qvecs, index.search(qvecs, k))):
        qid = f"example-{n + 1}"
        hit = False
        for rank, (doc_id, cosine) in enumerate(found):
            mine = doc_id == ex.positive_id
            hit |= mine
            out.append(JudgedCandidate(qid, ex.query, doc_id, rank, float(cosine),
                                       "positive" if mine else "hard_negative",
                                       "example_positive" if mine else "retrieved"))
        if not hit:
            if ex.positive_id is not None and ex.positive_id in corpus:
                cosine = float(index.vector(ex.positive_id) @ qvec)
            else:
                cosine = float(encoder.encode_documents([ex.positive_text])[0] @ qvec)
            out.append(JudgedCandidate(qid, ex.query, ex.positive_id or f"{qid}-positive", None, cosine, "positive",
                                       "example_positive", text=ex.positive_text))
        seen = {d for d, _ in found} | {ex.positive_id}
        for doc_id in [d for d in rng.sample(list(corpus.ids), min(len(corpus), controls + 20)) if d not in seen][
                :controls]:
            out.append(JudgedCandidate(qid, ex.query, doc_id, None, float(index.vector(doc_id) @ qvec),
                                       "easy_negative", "control"))
    if labels and label_queries:
        from syntra_dspy.evaluation.datasets import load_dataset

        ds = load_dataset(labels, load_corpus=False)
        judged = build_candidates(ds.queries, ds.qrels, corpus=corpus, encoder=encoder, index=index,
                                  n_queries=label_queries, top_k=k, random_negatives=controls, seed=seed,
                                  exclude=[ex.query for ex in examples])
        out += [replace(c, source="human" if c.gold == "positive" else "control" if c.source == "random"
                        else "retrieved") for c in judged]
    return out


def grade_set(program: Any, candidates: Sequence[JudgedCandidate], corpus: Any) -> list[Grade | None]:
    """Every candidate graded with ``program``'s instruction (query by query, so prompt prefixes are reused)."""
    judge = RelevanceJudge(program.with_components(judge=None), mode="graded")  # grades only: no calibration
    grades: list[Grade | None] = []
    for n, c in enumerate(candidates, 1):
        text = c.text if c.text is not None else corpus[c.doc_id].content
        (judgment,) = judge.judge_all(c.query, [Candidate(text, c.cosine, lexical=c.lexical)])
        grades.append(None if judgment is None else judgment.grade)
        if n % 25 == 0 or n == len(candidates):
            logger.info("annotation_instruction: graded %d/%d calibration candidates", n, len(candidates))
    return grades


def sample_of(candidate: JudgedCandidate, expected: float) -> CalibrationSample:
    """One calibration candidate with its graded E."""
    c = candidate
    return CalibrationSample(c.query, expected, c.cosine, c.gold, c.source,  # type: ignore[arg-type]
                             listed=c.rank is not None, lexical=c.lexical, doc_id=c.doc_id)


def samples_of(candidates: Sequence[JudgedCandidate], grades: Sequence[Grade | None]) -> list[CalibrationSample]:
    return [sample_of(c, g.expected) for c, g in zip(candidates, grades) if g is not None and g.expected is not None]


def mismatches(candidates: Sequence[JudgedCandidate], grades: Sequence[Grade | None], calibration: JudgeCalibration,
               corpus: Any, *, limit: int = 8, max_doc_chars: int = 500) -> str:
    """Known positives the calibrated judge called negative, and random documents it called positive."""
    lines = []
    graded = [(c, g) for c, g in zip(candidates, grades) if g is not None and g.expected is not None]
    contexts = sample_contexts(samples_of([c for c, _ in graded], [g for _, g in graded]))
    for (c, g), context in zip(graded, contexts):
        assert g is not None and g.expected is not None
        klass = calibration.classify(g.expected, c.cosine, context, c.lexical)
        wrong_pos = c.gold == "positive" and klass != "positive"
        wrong_ctrl = c.source == "control" and klass == "positive"
        if not (wrong_pos or wrong_ctrl):
            continue
        text = c.text if c.text is not None else corpus[c.doc_id].content
        kind = "Known-relevant document" if wrong_pos else "Unrelated control document (drawn at random)"
        expected = "expected 2 or 3" if wrong_pos else "expected 0 or 1"
        lines.append(f"{len(lines) + 1}. Query: {c.query}\n   {kind}: {ctx.clip(text, max_doc_chars)}\n"
                     f"   Label given: {g.written if g.written is not None else '?'} (mean label "
                     f"{g.expected:.2f}; {expected})")
        if len(lines) >= limit:
            break
    return "\n\n".join(lines)


def evaluate_graded(candidates: Sequence[JudgedCandidate], grades: Sequence[Grade | None], corpus: Any, *,
                    feature: str, kappa_target: float, recall_target: float,
                    explain: Callable[[str], str] | None = None) -> Evaluation:
    """Fit the calibration on this attempt's grades; score = binary kappa on the calibration set."""
    samples = samples_of(candidates, grades)
    if not any(s.gold == "positive" for s in samples):
        return Evaluation(0.0, False, "No known positive could be graded: the annotator's answers were unusable.",
                          {"graded": len(samples), "candidates": len(candidates)})
    calibration = fit_calibration(samples, feature=feature)  # type: ignore[arg-type]
    summary = calibration.summary
    assert summary is not None
    kappa, recall = summary.binary_kappa, summary.positive_recall
    passed = kappa is not None and recall is not None and kappa >= kappa_target and recall >= recall_target
    details = {"calibration": calibration.description(), "graded": len(samples),
               "candidates": len(candidates)}
    score = 0.0 if kappa is None else round(kappa, 4)
    if passed:
        return Evaluation(score, True, "", details)
    text = mismatches(candidates, grades, calibration, corpus)
    details["mismatches"] = bool(text)
    feedback = (explain(text) if explain and text else text) or (
        f"Agreement on the calibration set is kappa {kappa} with positive recall {recall}; make the relevance "
        "criterion sharper so relevant documents get clearly higher labels than merely related ones.")
    return Evaluation(score, False, feedback, details)
