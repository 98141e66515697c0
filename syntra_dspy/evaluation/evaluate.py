"""Evaluate a model (retrieve, then score) or an existing run, and compare two runs."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation.datasets import EvalDataset, load_dataset
from syntra_dspy.evaluation.exclude import resolve_exclusions
from syntra_dspy.evaluation.measures import MissingPolicy, parse_measures, score_run
from syntra_dspy.evaluation.retrieve import BM25_NAME, load_retriever
from syntra_dspy.evaluation.significance import Comparison, paired_comparison
from syntra_dspy.evaluation.trec import Qrels, Run

logger = logging.getLogger(__name__)


@dataclass
class EvalResult:
    """Scores of one system on one dataset. ``per_query[qid][measure]``; ``run`` is what was scored."""

    model: str
    dataset: str
    measures: list[str]
    aggregate: dict[str, float]
    per_query: dict[str, dict[str, float]]
    run: Run = field(repr=False)
    excluded: list[str] = field(default_factory=list)
    missing: str = "zero"

    @property
    def n_queries(self) -> int:
        return len(self.per_query)

    def to_dict(self, *, include_run: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model, "dataset": self.dataset, "measures": list(self.measures),
            "n_queries": self.n_queries, "missing_queries": self.missing,
            "excluded": list(self.excluded), "aggregate": dict(self.aggregate),
            "per_query": {q: dict(v) for q, v in self.per_query.items()},
        }
        if include_run:
            out["run"] = {q: dict(d) for q, d in self.run.items()}
        return out

    def format_table(self, *, places: int = 4) -> str:
        """A small plain-text table: measure, value."""
        width = max(len(m) for m in self.measures)
        lines = [f"{self.model} on {self.dataset} ({self.n_queries} queries"
                 + (f", {len(self.excluded)} excluded" if self.excluded else "") + ")"]
        lines += [f"  {m:<{width}}  {_fmt(self.aggregate[m], places)}" for m in self.measures]
        return "\n".join(lines)


def _fmt(value: float, places: int) -> str:
    return "nan" if math.isnan(value) else f"{value:.{places}f}"


def write_per_query(result: EvalResult, path: str | Path) -> Path:
    """Per-query scores: JSON (``.json``: the whole result) or TSV (``query_id`` then one column per
    measure, one row per query, then a final ``all`` row with the aggregate)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path
    rows = ["\t".join(["query_id", *result.measures])]
    for qid, values in result.per_query.items():
        rows.append("\t".join([qid, *(repr(values[m]) for m in result.measures)]))
    rows.append("\t".join(["all", *(repr(result.aggregate[m]) for m in result.measures)]))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _dataset(dataset: EvalDataset | str, *, load_corpus: bool) -> EvalDataset:
    if isinstance(dataset, EvalDataset):
        return dataset
    return load_dataset(dataset, load_corpus=load_corpus)


def model_name(model: Any) -> str:
    if isinstance(model, str):
        return BM25_NAME if model.strip().lower() == BM25_NAME else model.rstrip("/\\")
    return str(getattr(model, "name", type(model).__name__))


def evaluate_model(
    model: str | Any,
    dataset: EvalDataset | str,
    measures: str | Iterable[object] | None = None,
    k: int = 1000,
    exclude: Iterable[str] | str | Path | None = None,
    *,
    batch_size: int = 32,
    show_progress: bool = False,
    missing: MissingPolicy = "zero",
    index_root: str | Path | None = None,
    index_dir: str | Path | None = None,
) -> EvalResult:
    """Retrieve the top ``k`` for every judged query of ``dataset`` and score the run.

    ``model``: ``"bm25"``, a sentence-transformers folder or name, an encoder or a retriever object.
    ``dataset``: an :class:`EvalDataset` or a spec (``beir:PATH[:split]``, ``neuclirtech:PATH[:eng|zho]``).
    ``exclude``: query ids, or a path to an id list or a task YAML (its few-shot queries, by text).
    ``index_root``: cache dense document vectors there, keyed by corpus and encoder fingerprint (the cache
    compile and produce use, ``.syntra/index``), so a corpus is encoded once per model. ``index_dir``: keep them in
    exactly this folder instead (rebuilt when the corpus or the model differs from the one it holds).
    """
    if k < 1:
        raise ConfigError(f"k must be at least 1, got {k}", field="k")
    parsed = parse_measures(measures)
    ds = _dataset(dataset, load_corpus=True)
    excluded = resolve_exclusions(exclude, ds.queries)
    qids = [q for q in ds.judged_queries if q not in excluded]
    if not qids:
        raise ConfigError(f"no judged queries left to evaluate in {ds.name}", field="queries",
                          hint="check the qrels split and the exclusions")
    unjudged_text = [q for q in ds.qrels if q not in ds.queries]
    if unjudged_text:
        logger.warning("%d judged queries have no text in %s and cannot be searched; they are not scored",
                       len(unjudged_text), ds.name)
    retriever = load_retriever(model, ds.require_corpus(), language=ds.language, batch_size=batch_size,
                               show_progress=show_progress, index_root=index_root, index_dir=index_dir)
    logger.info("searching %d queries of %s with %s (k=%d)", len(qids), ds.name, model_name(model), k)
    run = retriever.search({q: ds.queries[q] for q in qids}, k=k)
    aggregate, per_query = score_run(ds.qrels, run, parsed, queries=qids, missing=missing)
    return EvalResult(model=model_name(model), dataset=ds.name, measures=[str(m) for m in parsed],
                      aggregate=aggregate, per_query=per_query, run=run,
                      excluded=sorted(excluded & set(ds.queries)), missing=missing)


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]] | EvalDataset | str,
    measures: str | Iterable[object] | None = None,
    exclude: Iterable[str] | str | Path | None = None,
    *,
    name: str = "run",
    dataset_name: str | None = None,
    missing: MissingPolicy = "zero",
) -> EvalResult:
    """Score an existing run on every judged query of ``qrels`` (a dict, a dataset or a dataset spec).

    With the defaults this equals ``ir_measures QRELS RUN MEASURES`` (see :mod:`.measures`).
    """
    parsed = parse_measures(measures)
    if isinstance(qrels, (EvalDataset, str)):
        ds = _dataset(qrels, load_corpus=False)
        judgments: Mapping[str, Mapping[str, int]] = ds.qrels
        texts: Mapping[str, str] = ds.queries
        source = ds.name
    else:
        judgments, texts, source = qrels, {}, "qrels"
    excluded = resolve_exclusions(exclude, texts)
    qids = [q for q in judgments if q not in excluded]
    aggregate, per_query = score_run(judgments, run, parsed, queries=qids, missing=missing)
    return EvalResult(model=name, dataset=dataset_name or source, measures=[str(m) for m in parsed],
                      aggregate=aggregate, per_query=per_query, run={q: dict(d) for q, d in run.items()},
                      excluded=sorted(excluded & set(judgments)), missing=missing)


def compare_runs(
    run_a: Mapping[str, Mapping[str, float]],
    run_b: Mapping[str, Mapping[str, float]],
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    measure: str = "nDCG@10",
    *,
    queries: Iterable[str] | None = None,
    missing: MissingPolicy = "zero",
    n_bootstrap: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Score both runs on the same judged queries and compare them (B - A) with :func:`paired_comparison`.

    With ``missing="skip"`` only the queries both runs rank are compared.
    """
    parsed = parse_measures(measure)
    if len(parsed) != 1:
        raise ConfigError(f"compare one measure at a time, got {len(parsed)}", field="measure")
    name = str(parsed[0])
    qids = list(qrels) if queries is None else [q for q in queries if q in qrels]
    if missing == "skip":
        qids = [q for q in qids if run_a.get(q) and run_b.get(q)]
    _, per_a = score_run(qrels, run_a, parsed, queries=qids, missing="zero")
    _, per_b = score_run(qrels, run_b, parsed, queries=qids, missing="zero")
    return paired_comparison({q: v[name] for q, v in per_a.items()}, {q: v[name] for q, v in per_b.items()},
                             measure=name, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
