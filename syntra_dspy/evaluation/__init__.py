"""Evaluation: BEIR and NeuCLIRTech datasets, dense (exact FAISS) and BM25 retrieval, ir_measures
scores, TREC run files, and paired significance tests between two systems.

>>> from syntra_dspy.evaluation import evaluate_model
>>> result = evaluate_model("bm25", "beir:data/scifact:train", exclude="task.yaml")  # doctest: +SKIP
>>> result.aggregate["nDCG@10"]  # doctest: +SKIP
"""

from __future__ import annotations

from syntra_dspy.evaluation.datasets import (
    EvalDataset,
    detect_language,
    load_beir,
    load_dataset,
    load_neuclirtech,
    parse_dataset_spec,
    read_beir_queries,
    read_topics_tsv,
)
from syntra_dspy.evaluation.evaluate import (
    EvalResult,
    compare_runs,
    evaluate_model,
    evaluate_run,
    write_per_query,
)
from syntra_dspy.evaluation.exclude import load_exclusions, resolve_exclusions
from syntra_dspy.evaluation.measures import DEFAULT_MEASURES, parse_measures, score_run
from syntra_dspy.evaluation.retrieve import DenseRetriever, Retriever, load_retriever
from syntra_dspy.evaluation.significance import Comparison, bootstrap_ci, paired_comparison
from syntra_dspy.evaluation.trec import Qrels, Run, read_qrels, read_run, write_qrels, write_run
from syntra_dspy.retrieval.lexical import BM25Retriever, tokenize

__all__ = [
    "DEFAULT_MEASURES",
    "BM25Retriever",
    "Comparison",
    "DenseRetriever",
    "EvalDataset",
    "EvalResult",
    "Qrels",
    "Retriever",
    "Run",
    "bootstrap_ci",
    "compare_runs",
    "detect_language",
    "evaluate_model",
    "evaluate_run",
    "load_beir",
    "load_dataset",
    "load_exclusions",
    "load_neuclirtech",
    "load_retriever",
    "paired_comparison",
    "parse_dataset_spec",
    "parse_measures",
    "read_beir_queries",
    "read_qrels",
    "read_run",
    "read_topics_tsv",
    "resolve_exclusions",
    "score_run",
    "tokenize",
    "write_per_query",
    "write_qrels",
    "write_run",
]
