"""``--downstream``: produce → export → train → eval per strategy, the paper's end measure (nDCG@10).

Each artifact produces training records from the same number of selected documents with the same
generator, encoder and index; each record set fine-tunes the same base model with the same LoRA recipe;
each model is evaluated on the same dataset with the task's few-shot queries excluded. The untrained base
model is evaluated once as the baseline. Heavy: run it with a real model on a machine that can train.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.context import CorpusContext

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DownstreamOptions:
    """What the downstream check uses. ``train`` is a ``TrainConfig`` (None: the paper's recipe)."""

    dataset: str
    base: str = "all-MiniLM-L6-v2"
    docs: int = 50
    queries_per_doc: int = 2
    concurrency: int = 4
    measure: str = "nDCG@10"
    train: Any = None
    baseline: bool = True

    def produce_config(self) -> Any:
        """The production settings of every strategy's run (a ``ProduceConfig``)."""
        from syntra_dspy.production import ProduceConfig

        return ProduceConfig(docs=self.docs, queries_per_doc=self.queries_per_doc, concurrency=self.concurrency,
                             progress=False)


def run_downstream(spec: Any, results: Sequence[Any], *, options: DownstreamOptions, context: CorpusContext,
                   lms: Any, out: str | Path) -> dict[str, Any] | None:
    """Fill ``result.downstream`` for every strategy; return the untrained baseline's scores (or None). Production
    runs over the comparison's corpus context."""
    from syntra_dspy.evaluation import evaluate_model, load_dataset
    from syntra_dspy.evaluation.exclude import normalize_query
    from syntra_dspy.production import export_records, produce
    from syntra_dspy.training import TrainConfig, train_embedding_model

    if not options.dataset:
        raise ConfigError("the downstream check needs an evaluation dataset", field="dataset",
                          hint="give --eval-dataset beir:PATH[:split] (or neuclirtech:PATH[:eng|zho])")
    dataset = load_dataset(options.dataset)
    few_shot = {normalize_query(e.query) for e in spec.examples}
    exclude = {qid for qid, text in dataset.queries.items() if normalize_query(text) in few_shot}
    out = Path(out)
    for result in results:
        folder = out / f"{result.strategy}-{result.version}"
        folder.mkdir(parents=True, exist_ok=True)
        logger.info("downstream %s: producing from %d documents", result.strategy, options.docs)
        made = produce(result.artifact, folder / "run.sqlite", options.produce_config(), context=context,
                       generator=lms.generator)
        exported = export_records(folder / "run.sqlite", folder / "records.jsonl")
        row: dict[str, Any] = {"records": exported.records, "queries": made.queries,
                               "produce_calls": made.calls, "produce_seconds": round(made.seconds, 1)}
        if exported.records == 0:
            row["error"] = "production yielded no training records (no query with a positive and a negative)"
            result.downstream = row
            continue
        trained = train_embedding_model(folder / "records.jsonl", base=options.base, out=folder / "model",
                                        config=options.train or TrainConfig(), overwrite=True, progress=False)
        scored = evaluate_model(str(trained.merged_dir), dataset, options.measure, exclude=exclude)
        row.update({"model": str(trained.merged_dir), "train_steps": trained.steps,
                    "train_seconds": round(trained.seconds, 1), "dataset": scored.dataset,
                    "queries_evaluated": scored.n_queries, **scored.aggregate})
        result.downstream = row
    if not options.baseline:
        return None
    base = evaluate_model(options.base, dataset, options.measure, exclude=exclude)
    return {"model": options.base, "dataset": base.dataset, **base.aggregate}
