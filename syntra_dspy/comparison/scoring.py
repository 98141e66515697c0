"""Score one compiled artifact on the held-out material, with the same verifier and settings for all.

Identifier/attribute extraction and query writing run on the fresh documents with the artifact's frozen
program (what production would send); the task's verifier judges each document's outputs separately
(0-3, the test-mode rubric), so one bad document does not hide behind good ones. A document whose
extraction or queries fail scores 0. The artifact's own judge (graded or written) labels the held-out pairs
exactly as in production (with the retriever's cosine, and the BM25 score a hybrid judge weighs), and its labels
are compared with the reference labels; a graded judge's scores also rank them (AUC: how often a reference
positive scores above a negative).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

import dspy

from syntra_dspy.artifacts import Artifact, grading_identity
from syntra_dspy.comparison.heldout import HeldoutMaterial, JudgedItem
from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.agreement import label_agreement
from syntra_dspy.judging.calibration import roc_auc
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate, Judgment, RelevanceJudge, judge_mode
from syntra_dspy.judging.settings import DEFAULT_GRADE_ORDER
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.text import clean_text, verifier_score
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.authoring import InstructionAuthor

logger = logging.getLogger(__name__)


class HeldoutScorer:
    """Runs an artifact's program on held-out material and judges it with the verifier role."""

    def __init__(self, *, lms: Any, settings: CompileSettings, meter: Any = None) -> None:
        self.lms, self.settings, self.meter = lms, settings, meter
        self.author = InstructionAuthor()

    def _stage(self, name: str):
        from contextlib import nullcontext

        return self.meter.stage(name) if self.meter is not None else nullcontext()

    def _judge(self, name: str, **inputs: Any) -> tuple[int, str]:
        with dspy.context(lm=self.lms.verifier, adapter=dspy.JSONAdapter()):
            pred = getattr(self.author, name)(**inputs)
        return verifier_score(pred.score), clean_text(pred.feedback)

    def _generating(self, fn, *args, **kwargs):
        with dspy.context(lm=self.lms.generator, adapter=dspy.JSONAdapter()):
            return fn(*args, **kwargs)

    def score(self, artifact: Artifact, material: HeldoutMaterial, corpus: Any,
              similarity: Callable[[str, str], float] | None = None, lexical: Any = None,
              grades: SharedGrades | None = None) -> dict[str, Any]:
        """Verifier scores on fresh documents and, when the material has pairs, annotation agreement and (graded
        judge) ranking. ``lexical``: BM25 over the corpus (``scores(query, doc_ids)``), for a hybrid judge.
        ``grades``: another row's grades of the same pairs, made with this artifact's grading prompt (the same model
        call), which this artifact's judge calibrates instead of asking again."""
        program = artifact.program
        task = ctx.task_context(program.state.task_definition)
        golden = ctx.example_queries(program.state.examples)
        docs = [corpus[d] for d in material.documents]
        started = time.perf_counter()
        logger.info("held-out scoring of %s: extraction and queries on %d fresh documents",
                    artifact.version, len(docs))
        with self._stage("heldout_generation"):
            features = self._generating(tr.run_extraction, program, docs)
            queries = self._generating(tr.run_queries, program, features, self.settings.queries_per_doc)
        by_doc = {q.doc.doc_id: q for q in queries}
        per_doc = []
        with self._stage("heldout_judging"):
            for ft in features:
                row: dict[str, Any] = {"doc_id": ft.doc.doc_id, "idattr": 0, "queries": 0, "written": []}
                if ft.features is not None:
                    row["idattr"], row["idattr_feedback"] = self._judge(
                        "judge_idattr", task_context=task, samples=tr.features_samples([ft], with_documents=True))
                qt = by_doc.get(ft.doc.doc_id)
                if qt is not None and qt.queries:
                    row["written"] = list(qt.queries)
                    row["queries"], row["queries_feedback"] = self._judge(
                        "judge_queries", task_context=task, golden_queries=golden,
                        query_instruction=program.write.signature.instructions,
                        pairs=tr.query_pairs([qt], limit=len(qt.queries), seed=self.settings.seed))
                per_doc.append(row)
        threshold = self.settings.pass_threshold
        result: dict[str, Any] = {
            "idattr_score": mean(r["idattr"] for r in per_doc) if per_doc else None,
            "query_score": mean(r["queries"] for r in per_doc) if per_doc else None,
            "idattr_pass_rate": mean(r["idattr"] >= threshold for r in per_doc) if per_doc else None,
            "query_pass_rate": mean(r["queries"] >= threshold for r in per_doc) if per_doc else None,
            "documents": per_doc,
        }
        if material.items:
            logger.info("held-out scoring of %s: labelling %d held-out pairs", artifact.version, len(material.items))
            known = grades.grades if grades is not None else None
            with self._stage("heldout_annotation"):
                judged = self._generating(label_items, program, material.items, corpus,
                                          chunk_size=self.settings.chunk_size, similarity=similarity, lexical=lexical,
                                          grades=known)
            gold = [item.gold for item in material.items]
            predicted = [None if j is None else j.klass for j in judged]
            result["annotation"] = {**label_agreement(gold, predicted), "ranking": ranking(gold, judged)}
            if grades is not None:
                result["annotation"]["grades_from"] = grades.row
            result["labels"] = [{"query_id": i.query_id, "doc_id": i.doc_id, "gold": i.gold, "source": i.source,
                                 "predicted": None if j is None else j.klass,
                                 "score": None if j is None else j.score,
                                 "expected": None if j is None or j.grade is None else j.grade.expected,
                                 **({"grade": j.grade.to_dict()} if j is not None and j.grade is not None else {})}
                                for i, j in zip(material.items, judged)]
        logger.info("held-out scoring of %s done in %.0f s", artifact.version, time.perf_counter() - started)
        return result


@dataclass(frozen=True)
class SharedGrades:
    """The grades a scored row's judge made of the held-out pairs (by query and document id), for a later row whose
    grading prompt is the same: ``row`` names the row they were made for."""

    row: str
    grades: Mapping[tuple[str, str], Grade]

    @classmethod
    def of_labels(cls, row: str, labels: Sequence[Mapping[str, Any]]) -> SharedGrades:
        """From a scored row's ``labels`` (the items it graded; a written judge's rows hold none)."""
        return cls(row, {(x["query_id"], x["doc_id"]): Grade.from_dict(x["grade"]) for x in labels if x.get("grade")})


def grading_key(program: Any) -> str | None:
    """What makes two artifacts' grading calls the same call (:func:`~syntra_dspy.artifacts.grading_identity`), as
    one string; None for a written judge, which labels in chunks and shares nothing."""
    if judge_mode(program) != "graded":
        return None
    identity = grading_identity(program)
    order = "" if identity["grade_order"] == DEFAULT_GRADE_ORDER else f":{identity['grade_order']}"  # keys as before
    return f"{identity['prompt_sha256']}:{identity['max_doc_chars']}{order}"


def label_items(program: Any, items: Sequence[JudgedItem], corpus: Any, *, chunk_size: int,
                similarity: Callable[[str, str], float] | None = None, lexical: Any = None,
                grades: Mapping[tuple[str, str], Grade] | None = None) -> list[Judgment | None]:
    """The judgment the artifact's own judge (graded or written) makes of every item (None where annotation failed
    after its retries). ``similarity(query, doc_id)`` supplies the retriever's cosine a fused judge needs;
    ``lexical`` (``scores(query, doc_ids)``) the BM25 score a hybrid one weighs. ``grades``: grades of some items
    made with this program's grading prompt elsewhere; those items are calibrated, not graded again, and each
    query's list is settled as a whole (a list-relative judge compares every candidate with the others)."""
    judge = RelevanceJudge(program, chunk_size=chunk_size)
    if judge.needs_lexical and lexical is None:
        raise ConfigError(f"this artifact's {judge.calibration.feature} judge weighs BM25 scores, which this corpus's "
                          "languages do not allow", hint="compare on a same-language task in English or Chinese")
    by_query: dict[str, list[int]] = {}
    for n, item in enumerate(items):
        by_query.setdefault(item.query_id, []).append(n)
    out: list[Judgment | None] = [None] * len(items)
    done, started = 0, time.perf_counter()
    for positions in by_query.values():
        query = items[positions[0]].query
        ids = [items[n].doc_id for n in positions]
        bm25 = lexical.scores(query, ids) if lexical is not None else [None] * len(ids)
        cands = [Candidate(corpus[items[n].doc_id].content,
                           similarity(query, items[n].doc_id) if similarity else None, listed=items[n].listed,
                           lexical=b) for n, b in zip(positions, bm25)]
        if grades and judge.mode == "graded":
            judged: list[Judgment | None] = [
                judge.calibrate(grades[key], c) if (key := (items[n].query_id, items[n].doc_id)) in grades
                else judge.judge_all(query, [c])[0] for n, c in zip(positions, cands)]
            judged = judge.settle(cands, judged)
        else:
            judged = judge.judge_all(query, cands)
        for n, judgment in zip(positions, judged):
            out[n] = judgment
        done += len(positions)
        if done // 100 != (done - len(positions)) // 100 or done == len(items):  # a long loop shows progress
            elapsed = time.perf_counter() - started
            logger.info("labelled %d/%d held-out pairs (%.0f min, about %.0f min left)", done, len(items),
                        elapsed / 60, elapsed / done * (len(items) - done) / 60)
    return out


def ranking(gold: Sequence[str], judged: Sequence[Judgment | None]) -> dict[str, Any]:
    """How well the judge's scores put reference positives first (AUC; None without graded scores): the calibrated
    score its labels are cut from, and E alone."""
    is_pos = [g == "positive" for g in gold]
    out: dict[str, Any] = {}
    for name, value in (("score", lambda j: j.score), ("expected", lambda j: j.grade.expected if j.grade else None)):
        pairs = [(value(j), p) for j, p in zip(judged, is_pos) if j is not None and value(j) is not None]
        out[f"auc_{name}"] = roc_auc([v for v, _ in pairs], [p for _, p in pairs]) if pairs else None
    out["scored"] = sum(j is not None and j.score is not None for j in judged)
    return out


def reference_ranking(items: Sequence[JudgedItem], similarity: Callable[[str, str], float] | None,
                      lexical: Any = None) -> dict[str, float | None]:
    """What no LLM call gives, on the same pairs: the retriever's cosine and BM25 as rankers (AUC)."""
    is_pos = [i.gold == "positive" for i in items]
    out: dict[str, float | None] = {}
    if similarity is not None:
        out["auc_cosine"] = roc_auc([similarity(i.query, i.doc_id) for i in items], is_pos)
    if lexical is not None:
        by_query: dict[str, list[int]] = {}
        for n, i in enumerate(items):
            by_query.setdefault(i.query, []).append(n)
        scores: list[float | None] = [None] * len(items)
        for query, members in by_query.items():  # one corpus scoring per query
            for n, score in zip(members, lexical.scores(query, [items[n].doc_id for n in members])):
                scores[n] = score
        kept = [(s, p) for s, p in zip(scores, is_pos) if s is not None]
        out["auc_bm25"] = roc_auc([s for s, _ in kept], [p for _, p in kept])
    return out


def normalized_quality(metrics: dict[str, Any]) -> dict[str, float]:
    """The quality metrics the chart shows: verifier scores on 0-1 (divided by 3) and binary kappa (-1 to 1).

    Raw label accuracy is left out: on label sets dominated by negatives it rewards calling everything negative."""
    out: dict[str, float] = {}
    if metrics.get("idattr_score") is not None:
        out["identifiers (verifier)"] = metrics["idattr_score"] / 3
    if metrics.get("query_score") is not None:
        out["queries (verifier)"] = metrics["query_score"] / 3
    kappa = ((metrics.get("annotation") or {}).get("binary") or {}).get("kappa")
    if kappa is not None:
        out["labels, binary κ"] = kappa
    return out
