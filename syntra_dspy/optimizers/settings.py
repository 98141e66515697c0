"""Test-mode settings. Defaults follow the paper (3 attempts, 5 documents, pass at 2 of 3)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from syntra_dspy.judging.settings import JudgeMode
from syntra_dspy.programs.validation import NEAR_DUPLICATE


class CompileSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(3, ge=1, le=20, description="attempts per loop, the initial trial included")
    sample_docs: int = Field(5, ge=1, le=100, description="documents in each trial sample")
    queries_per_doc: int = Field(2, ge=1, le=16, description="queries written per trial document")
    pass_threshold: int = Field(2, ge=0, le=3, description="verifier score (0-3) that passes a loop")
    keep: Literal["last", "best"] = Field("last", description="which attempt a loop keeps when none passes")
    seed: int = Field(42, description="seed of the document sampling and selection")
    annotation_candidates: int = Field(8, ge=1, le=100, description="retrieved candidates per few-shot query")
    chunk_size: int = Field(4, ge=1, le=50, description="candidates per annotation call")
    control_negatives: int = Field(1, ge=0, le=10, description="random corpus documents per few-shot query that "
                                   "the annotation check requires to be labelled negative (0: positives only)")
    bm25_top1_target: float = Field(0.6, ge=0, le=1, description="most share of the query loop's trial queries whose "
                                    "source document may be BM25's first hit for an attempt to pass (1: no check)")
    form_target: float = Field(0.9, ge=0, le=1, description="least share of the query texts written in the query "
                               "loop's trials, retries included, with the examples' form and length (0: no check)")
    query_verifier: Literal["graded", "written"] = Field(
        "written", description="written: the verifier's one written 0-3 score for a sample of document/query pairs; "
        "graded: the verifier also rates each trial query against the examples in a one-token call and the query "
        "loop scores the mean of E over the rating tokens' probabilities (the written review still gives the "
        "feedback)")
    judge_pairs: int = Field(5, ge=1, description="document/query pairs the verifier sees")
    refine_pairs: int = Field(8, ge=1, description="document/query pairs the refiner sees")
    max_doc_chars: int = Field(1500, ge=200, description="documents are clipped to this length in prompts")
    near_duplicate: float = Field(NEAR_DUPLICATE, gt=0, le=1, description="token-set Jaccard above which two queries "
                                  "of one document count as one and the later is asked again (compile and production)")
    selection_tau: float = Field(0.6, gt=0, le=1, description="diversity threshold for document selection")
    selection_target: int | None = Field(200, ge=1, description="documents selected before sampling; None = all")
    infer_task_definition: bool = Field(True, description="infer the task definition when the task file has none")
    judge: JudgeMode = Field(
        "graded", description="graded: one candidate per call, label-token probabilities and a calibration fitted "
        "here (every strategy fits it: none on its drafted instruction, untried; gepa on the grading text its search "
        "keeps); written: the annotator writes labels for chunks of candidates")
    judge_feature: Literal["auto", "expected", "fused", "relative", "hybrid", "weighted"] = Field(
        "auto", description="graded judge score: E; E fused with the retriever's cosine; fused plus how far both "
        "stand above the rest of the query's retrieved list (relative); relative plus the candidate's BM25 score and "
        "its standing (hybrid, same-language tasks); the same terms weighed by a logistic regression fitted on the "
        "calibration set (weighted, only when set); or the best of the others by leave-one-query-out kappa on the "
        "calibration set")
    judge_kappa_target: float = Field(0.5, ge=-1, le=1, description="binary kappa on the calibration set that passes "
                                      "the annotation loop (graded judge)")
    judge_recall_target: float = Field(0.6, ge=0, le=1, description="positive recall on the calibration set that "
                                       "passes the annotation loop (graded judge)")
    calibration_labels: str | None = Field(None, description="judged data whose human qrels join the calibration set "
                                           "(beir:PATH[:split] or neuclirtech:PATH[:eng|zho])")
    calibration_queries: int = Field(10, ge=0, le=1000, description="queries drawn from calibration_labels")
