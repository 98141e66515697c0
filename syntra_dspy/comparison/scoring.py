"""Score one compiled artifact on the held-out material, with the same verifier and settings for all.

Identifier/attribute extraction and query writing run on the fresh documents with the artifact's frozen
program (what production would send); the task's verifier judges each document's outputs separately
(0-3, the test-mode rubric), so one bad document does not hide behind good ones. A document whose
extraction or queries fail scores 0. The annotator labels the held-out pairs in chunks, exactly as in
production, and its labels are compared with the reference labels.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from statistics import mean
from typing import Any

import dspy

from syntra_dspy.artifacts import Artifact
from syntra_dspy.judging.agreement import label_agreement
from syntra_dspy.comparison.heldout import HeldoutMaterial, JudgedItem
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.text import clean_text, verifier_score
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.authoring import InstructionAuthor
from syntra_dspy.judging.judge import Candidate, RelevanceJudge

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
              similarity: Callable[[str, str], float] | None = None) -> dict[str, Any]:
        """Verifier scores on fresh documents and, when the material has pairs, annotation agreement."""
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
            with self._stage("heldout_annotation"):
                predicted = self._generating(label_items, program, material.items, corpus,
                                             chunk_size=self.settings.chunk_size, similarity=similarity)
            gold = [item.gold for item in material.items]
            result["annotation"] = label_agreement(gold, predicted)
            result["labels"] = [{"query_id": i.query_id, "doc_id": i.doc_id, "gold": i.gold, "source": i.source,
                                 "predicted": p} for i, p in zip(material.items, predicted)]
        logger.info("held-out scoring of %s done in %.0f s", artifact.version, time.perf_counter() - started)
        return result


def label_items(program: Any, items: Sequence[JudgedItem], corpus: Any, *, chunk_size: int,
                similarity: Callable[[str, str], float] | None = None) -> list[str | None]:
    """The three-class label the artifact's own judge (graded or written) gives every item (None where annotation
    failed after its retries). ``similarity(query, doc_id)`` supplies the retriever's cosine a fused judge needs."""
    judge = RelevanceJudge(program, chunk_size=chunk_size)
    by_query: dict[str, list[int]] = {}
    for n, item in enumerate(items):
        by_query.setdefault(item.query_id, []).append(n)
    out: list[str | None] = [None] * len(items)
    for positions in by_query.values():
        query = items[positions[0]].query
        cands = [Candidate(corpus[items[n].doc_id].content,
                           similarity(query, items[n].doc_id) if similarity else None) for n in positions]
        for n, judgment in zip(positions, judge.judge_all(query, cands)):
            out[n] = None if judgment is None else judgment.klass
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
