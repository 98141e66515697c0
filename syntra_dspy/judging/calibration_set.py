"""The graded judge's calibration set: what test mode knows about relevance for this task, graded.

The calibration set (:func:`calibration_set`) is each few-shot query's retrieved top-K (its own positive among
them, added when retrieval missed it; the other candidates as presumed negatives) plus random corpus documents as
easy negatives, and, when the user names judged data (``calibration_labels``: a ``beir:``/``neuclirtech:`` dataset
with human qrels), the same kind of candidates for some of its queries with the people's judgments as reference.
The human strategy's labels join it the same way (:func:`judged_query_candidates`).
:func:`grade_set` grades every candidate with a program's grading prompt; :func:`samples_of` turns the grades into
the :class:`CalibrationSample` list a :class:`JudgeCalibration` is fitted on. The annotation loop
(:mod:`~syntra_dspy.optimizers.stages.graded_annotation`) and ``syntra artifacts recalibrate`` both build it here.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from syntra_dspy.judging.calibration import CalibrationSample
from syntra_dspy.judging.candidates import JudgedCandidate, build_candidates
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate, RelevanceJudge
from syntra_dspy.judging.settings import DEFAULT_GRADE_ORDER, GradeOrder

logger = logging.getLogger(__name__)


def calibration_set(examples: Sequence[Any], source: Any, *, k: int, controls: int, seed: int,
                    labels: str | None = None, label_queries: int = 0) -> list[JudgedCandidate]:
    """Candidates with reference classes: the few-shot queries' (always) and a judged dataset's (when given).

    ``examples``: the task's few-shot pairs (``query``, ``positive_id``, ``positive_text``); ``source``: anything
    with the task's ``corpus``, ``encoder`` and ``index``."""
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


def judged_query_candidates(pairs: Sequence[Any], source: Any, *, k: int, controls: int, seed: int
                            ) -> list[JudgedCandidate]:
    """Candidates of the queries people judged (``pairs``: :class:`~syntra_dspy.judging.labels.LabelledPair`), each
    built as a few-shot query's is: its retrieved top-K, the judged documents with people's labels (source
    ``human``) and the others presumed hard negatives (as IR evaluation counts an unjudged retrieved document), the
    judged documents retrieval missed added, and ``controls`` random corpus documents as easy negatives."""
    corpus, encoder, index = source.corpus, source.encoder, source.index
    by_query: dict[str, dict[str, Any]] = {}
    for p in pairs:
        by_query.setdefault(p.query, {})[p.doc_id] = p
    queries = list(by_query)
    if not queries:
        return []
    rng = random.Random(seed)
    qvecs = encoder.encode_queries(queries)
    out: list[JudgedCandidate] = []
    for n, (query, qvec, found) in enumerate(zip(queries, qvecs, index.search(qvecs, k))):
        qid, judged = f"human-{n + 1}", by_query[query]
        for rank, (doc_id, cosine) in enumerate(found):
            p = judged.get(doc_id)
            out.append(JudgedCandidate(qid, query, doc_id, rank, float(cosine), p.label if p else "hard_negative",
                                       "human" if p else "retrieved"))
        seen = {d for d, _ in found}
        for doc_id, p in judged.items():
            if doc_id in seen:
                continue
            inside = doc_id in corpus
            vector = index.vector(doc_id) if inside else encoder.encode_documents([p.text or ""])[0]
            out.append(JudgedCandidate(qid, query, doc_id, None, float(vector @ qvec), p.label, "human",
                                       text=None if inside else p.text))
        seen |= set(judged)
        for doc_id in [d for d in rng.sample(list(corpus.ids), min(len(corpus), controls + 20)) if d not in seen][
                :controls]:
            out.append(JudgedCandidate(qid, query, doc_id, None, float(index.vector(doc_id) @ qvec),
                                       "easy_negative", "control"))
    return out


def grade_set(program: Any, candidates: Sequence[JudgedCandidate], corpus: Any, *,
              order: GradeOrder = DEFAULT_GRADE_ORDER) -> list[Grade | None]:
    """Every candidate graded with ``program``'s instruction (query by query, so prompt prefixes are reused), the
    query or the document shown first (``order``)."""
    return grade_asked(program.with_components(judge=None), asked(candidates, corpus), order=order)  # grades only


def asked(candidates: Sequence[JudgedCandidate], corpus: Any) -> tuple[tuple[str, Candidate], ...]:
    """What the judge is asked of each candidate: its query, and its text with the retriever's cosine and BM25."""
    return tuple((c.query, Candidate(c.text if c.text is not None else corpus[c.doc_id].content, c.cosine,
                                     lexical=c.lexical)) for c in candidates)


def grade_asked(program: Any, items: Sequence[tuple[str, Candidate]], *,
                order: GradeOrder = DEFAULT_GRADE_ORDER) -> list[Grade | None]:
    """The grade ``program``'s grading step, as it stands, gives each ``(query, candidate)`` (None: unusable).

    ``program`` must hold no calibration (its grades are what is wanted); it is used as it is, not recomposed from
    its components, so an optimizer that rewrote the grading step's instruction in place (GEPA) grades with its own
    text."""
    judge = RelevanceJudge(program, mode="graded", grade_order=order)
    grades: list[Grade | None] = []
    for n, (query, candidate) in enumerate(items, 1):
        (judgment,) = judge.judge_all(query, [candidate])
        grades.append(None if judgment is None else judgment.grade)
        if n % 25 == 0 or n == len(items):
            logger.info("annotation_instruction: graded %d/%d calibration candidates", n, len(items))
    return grades


def sample_of(candidate: JudgedCandidate, expected: float) -> CalibrationSample:
    """One calibration candidate with its graded E."""
    c = candidate
    return CalibrationSample(c.query, expected, c.cosine, c.gold, c.source,  # type: ignore[arg-type]
                             listed=c.rank is not None, lexical=c.lexical, doc_id=c.doc_id)


def samples_of(candidates: Sequence[JudgedCandidate], grades: Sequence[Grade | None]) -> list[CalibrationSample]:
    return [sample_of(c, g.expected) for c, g in zip(candidates, grades) if g is not None and g.expected is not None]
