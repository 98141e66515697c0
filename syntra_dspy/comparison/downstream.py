"""The downstream experiment: train encoders on record sets, score them beside the base encoder on the same queries,
compare them pairwise over queries. One harness for ``syntra compare --downstream`` and the maintained benchmarks
(``benchmarks/downstream_scifact.py``, ``baseline_table.py``, ``teaching_signal.py``).

* :func:`train_once` trains a LoRA model on a record set under a work folder, or reuses the one trained on the same
  records with the same settings;
* :func:`score_systems` evaluates several systems (``bm25``, a model name or folder) on the same dataset and queries;
* :func:`systems_table` gives each system's score with a bootstrap interval over queries and the paired comparisons
  asked for (:func:`paired_comparisons`: paired t-test and bootstrap interval of the difference);
* :func:`run_downstream` is ``--downstream``: produce → export → train → eval per strategy, the paper's end measure
  (nDCG@10). Each artifact produces training records from the same number of selected documents with the same
  generator, encoder and index; each record set fine-tunes the same base model with the same LoRA recipe; each
  model is evaluated on the same dataset with the task's few-shot queries excluded. The untrained base model is
  evaluated once as the baseline. Heavy: run it with a real model on a machine that can train.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from syntra_dspy.comparison.settings import DownstreamOptions
from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.context import CorpusContext

logger = logging.getLogger(__name__)

#: The base encoder every downstream comparison fine-tunes unless told otherwise (bundled, no hub needed).
DEFAULT_BASE = "all-MiniLM-L6-v2"


# ── the harness ─────────────────────────────────────────────────────────────────────────────────────────────


def train_once(name: str, records: Path, work: Path, config: Any, *, base: str = DEFAULT_BASE,
               say: Callable[[str], None] = logger.info) -> tuple[Path, dict[str, Any]]:
    """Train a LoRA model of ``base`` on ``records`` (a ``TrainConfig``'s settings) under
    ``work/models/<name>-<key>``, or reuse the one there; returns the merged model's folder and its training report.

    The key hashes the records' bytes and the settings (and the base, when it is not :data:`DEFAULT_BASE`, so keys
    made before the base could change stay valid): a rerun with the same records and settings trains nothing."""
    from syntra_dspy.training import train_embedding_model
    from syntra_dspy.training.train import MERGED_DIR, REPORT_FILE

    material = records.read_bytes() + json.dumps(config.to_dict(), sort_keys=True).encode()
    if base != DEFAULT_BASE:
        material += base.encode()
    out = work / "models" / f"{name}-{hashlib.sha256(material).hexdigest()[:10]}"
    report = out / REPORT_FILE
    if report.is_file() and (out / MERGED_DIR).is_dir():
        say(f"{name}: reusing {out}")
        return out / MERGED_DIR, json.loads(report.read_text(encoding="utf-8"))
    result = train_embedding_model(records, base=base, out=out, config=config, overwrite=True, progress=False)
    say(f"{name}: trained in {result.seconds:.0f} s, {result.steps} steps, final loss {result.final_loss}")
    return out / MERGED_DIR, json.loads(report.read_text(encoding="utf-8"))


def score_systems(systems: Iterable[tuple[str, Any]], dataset: Any, *, exclude: Any = None, measures: Any = None,
                  index_root: str | Path | None = None, show_progress: bool = False,
                  each: Callable[[str, Any, float], None] | None = None) -> tuple[dict[str, Any], dict[str, float]]:
    """Evaluate every ``(name, model)`` on ``dataset`` with the same queries (``exclude``: the ones left out) and
    ``measures``; returns each system's ``EvalResult`` and seconds by name. ``each(name, result, seconds)`` is
    called as each system is done (to report progress)."""
    from syntra_dspy.evaluation import evaluate_model

    results, seconds = {}, {}
    for name, model in systems:
        started = time.perf_counter()
        results[name] = evaluate_model(model, dataset, measures, exclude=exclude, show_progress=show_progress,
                                       index_root=index_root)
        seconds[name] = time.perf_counter() - started
        if each is not None:
            each(name, results[name], seconds[name])
    return results, seconds


def paired_comparisons(results: dict[str, Any], measure: str, pairs: Sequence[tuple[str, str]]) -> list[Any]:
    """``paired_comparison`` of system ``b`` against ``a`` over their queries, for each ``(a, b)`` in ``pairs``."""
    from syntra_dspy.evaluation import paired_comparison

    return [paired_comparison({q: s[measure] for q, s in results[a].per_query.items()},
                              {q: s[measure] for q, s in results[b].per_query.items()}, measure=measure)
            for a, b in pairs]


def systems_table(results: dict[str, Any], measure: str, pairs: Sequence[tuple[str, str]], *, over: str = "queries"
                  ) -> tuple[list[str], list[dict[str, Any]]]:
    """Markdown lines: each system's ``measure`` with a 95% bootstrap interval over queries, nDCG@20 and R@100,
    then each pair's difference (b - a) with its interval, paired t-test and wins/losses/ties; and the comparisons
    as JSON rows (``{"a", "b", **Comparison.to_dict()}``). ``over`` names the queries in the header (``claims``)."""
    from syntra_dspy.evaluation import bootstrap_ci

    lines = [f"| system | {measure} [95% CI] | nDCG@20 | R@100 |", "|---|---|---|---|"]
    for name, r in results.items():
        lo, hi = bootstrap_ci([s[measure] for s in r.per_query.values()])
        lines.append(f"| {name} | {r.aggregate[measure]:.4f} [{lo:.4f}, {hi:.4f}] | {r.aggregate['nDCG@20']:.4f} | "
                     f"{r.aggregate['R@100']:.4f} |")
    lines += ["", f"| paired (over {over}) | Δ{measure} (b - a) | 95% CI | p (paired t) | wins/losses/ties |",
              "|---|---|---|---|---|"]
    rows = []
    for (a, b), cmp in zip(pairs, paired_comparisons(results, measure, pairs)):
        lines.append(f"| {b} vs {a} | {cmp.diff:+.4f} | [{cmp.ci_low:+.4f}, {cmp.ci_high:+.4f}] | {cmp.p_value:.3g} | "
                     f"{cmp.wins}/{cmp.losses}/{cmp.ties} |")
        rows.append({"a": a, "b": b, **cmp.to_dict()})
    return lines, rows


# ── syntra compare --downstream ─────────────────────────────────────────────────────────────────────────────


def run_downstream(spec: Any, results: Sequence[Any], *, options: DownstreamOptions, context: CorpusContext,
                   lms: Any, out: str | Path, exclude_queries: Iterable[str] = ()) -> dict[str, Any] | None:
    """Fill ``result.downstream`` for every strategy; return the untrained baseline's scores (or None). Production
    runs over the comparison's corpus context. Every strategy's records are produced first; with
    ``options.records`` each then trains on as many as every strategy has (the first N of its export). The few-shot
    queries and ``exclude_queries`` (those a compile calibrated on) are never evaluated."""
    from syntra_dspy.evaluation import load_dataset
    from syntra_dspy.evaluation.exclude import normalize_query
    from syntra_dspy.production import export_records, produce
    from syntra_dspy.training import TrainConfig, train_embedding_model

    if not options.dataset:
        raise ConfigError("the downstream check needs an evaluation dataset", field="dataset",
                          hint="give --eval-dataset beir:PATH[:split] (or neuclirtech:PATH[:eng|zho])")
    dataset = load_dataset(options.dataset)
    banned = {normalize_query(e.query) for e in spec.examples} | {normalize_query(q) for q in exclude_queries}
    exclude = {qid for qid, text in dataset.queries.items() if normalize_query(text) in banned}
    out = Path(out)
    rows: dict[str, dict[str, Any]] = {}
    for result in results:
        folder = out / f"{result.strategy}-{result.version}"
        folder.mkdir(parents=True, exist_ok=True)
        logger.info("downstream %s: producing from %d documents", result.strategy, options.docs)
        made = produce(result.artifact, folder / "run.sqlite", options.produce_config(), context=context,
                       generator=lms.generator)
        exported = export_records(folder / "run.sqlite", folder / "records.jsonl")
        rows[result.strategy] = {"records": exported.records, "queries": made.queries, "produce_calls": made.calls,
                                 "produce_seconds": round(made.seconds, 1)}
    usable = [row["records"] for row in rows.values() if row["records"]]
    cut = min([options.records, *usable]) if options.records is not None and usable else None
    for result in results:
        folder, row = out / f"{result.strategy}-{result.version}", rows[result.strategy]
        result.downstream = row
        if row["records"] == 0:
            row["error"] = "production yielded no training records (no query with a positive and a negative)"
            continue
        records = folder / "records.jsonl"
        if cut is not None:
            records = first_records(records, cut, folder / f"records.first{cut}.jsonl")
            row["trained_on"] = cut
        trained = train_embedding_model(records, base=options.base, out=folder / "model",
                                        config=options.train or TrainConfig(), overwrite=True, progress=False)
        scored = score_systems([(result.strategy, str(trained.merged_dir))], dataset, exclude=exclude,
                               measures=options.measure)[0][result.strategy]
        row.update({"model": str(trained.merged_dir), "train_steps": trained.steps,
                    "train_seconds": round(trained.seconds, 1), "dataset": scored.dataset,
                    "queries_evaluated": scored.n_queries, **scored.aggregate})
    if not options.baseline:
        return None
    base = score_systems([("base", options.base)], dataset, exclude=exclude, measures=options.measure)[0]["base"]
    return {"model": options.base, "dataset": base.dataset, **base.aggregate}


def first_records(records: Path, n: int, out: Path) -> Path:
    """The first ``n`` records of a JSONL export, written to ``out`` (the export's order: the run's)."""
    with records.open(encoding="utf-8") as fh:
        lines = [line for line in fh if line.strip()][:n]
    out.write_text("".join(lines), encoding="utf-8")
    return out
