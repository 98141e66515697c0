"""Evaluation: BEIR and NeuCLIRTech datasets, dense (exact FAISS) and BM25 retrieval, ir_measures
scores, TREC run files, and paired significance tests between two systems.

>>> from syntra_dspy.evaluation import evaluate_model
>>> result = evaluate_model("bm25", "beir:data/scifact:train", exclude="task.yaml")  # doctest: +SKIP
>>> result.aggregate["nDCG@10"]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
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

__getattr__, __dir__ = lazy_exports(__name__, {
    "EvalDataset": "syntra_dspy.evaluation.datasets",
    "detect_language": "syntra_dspy.evaluation.datasets",
    "load_beir": "syntra_dspy.evaluation.datasets",
    "load_dataset": "syntra_dspy.evaluation.datasets",
    "load_neuclirtech": "syntra_dspy.evaluation.datasets",
    "parse_dataset_spec": "syntra_dspy.evaluation.datasets",
    "read_beir_queries": "syntra_dspy.evaluation.datasets",
    "read_topics_tsv": "syntra_dspy.evaluation.datasets",
    "EvalResult": "syntra_dspy.evaluation.evaluate",
    "compare_runs": "syntra_dspy.evaluation.evaluate",
    "evaluate_model": "syntra_dspy.evaluation.evaluate",
    "evaluate_run": "syntra_dspy.evaluation.evaluate",
    "write_per_query": "syntra_dspy.evaluation.evaluate",
    "load_exclusions": "syntra_dspy.evaluation.exclude",
    "resolve_exclusions": "syntra_dspy.evaluation.exclude",
    "DEFAULT_MEASURES": "syntra_dspy.evaluation.measures",
    "parse_measures": "syntra_dspy.evaluation.measures",
    "score_run": "syntra_dspy.evaluation.measures",
    "DenseRetriever": "syntra_dspy.evaluation.retrieve",
    "Retriever": "syntra_dspy.evaluation.retrieve",
    "load_retriever": "syntra_dspy.evaluation.retrieve",
    "Comparison": "syntra_dspy.evaluation.significance",
    "bootstrap_ci": "syntra_dspy.evaluation.significance",
    "paired_comparison": "syntra_dspy.evaluation.significance",
    "Qrels": "syntra_dspy.evaluation.trec",
    "Run": "syntra_dspy.evaluation.trec",
    "read_qrels": "syntra_dspy.evaluation.trec",
    "read_run": "syntra_dspy.evaluation.trec",
    "write_qrels": "syntra_dspy.evaluation.trec",
    "write_run": "syntra_dspy.evaluation.trec",
    "BM25Retriever": "syntra_dspy.retrieval.lexical",
    "tokenize": "syntra_dspy.retrieval.lexical",
})
