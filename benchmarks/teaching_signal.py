"""How much can a record set still teach the base encoder? Its loss before any training step.

The SciFact downstream comparison trains LoRA MiniLM models on three sets of the same size (``judged``: a run's
exported records; ``source-only``: the same queries with the source document as the only positive; ``human``:
SciFact claims with their qrels positives, judgments people made) and none of them moves nDCG@10 measurably. A
contrastive loss learns only from records whose positive the encoder does not already rank above the negatives.
This script builds the same three sets as ``downstream_scifact.py`` (same export, seed and reserved claims) and
scores each record with the *untrained* base encoder, no training:

* ``loss``: InfoNCE over the record's positive and its hard negatives at the training temperature (the training
  loss also has in-batch negatives; they are other queries' documents and add little), averaged over positives,
  since training draws one of them per record;
* ``positive first``: the positive scores above every hard negative of the record;
* ``margin``: cosine of the positive minus the best negative's;
* ``corpus rank 1``: the positive is the base encoder's first hit over the whole corpus;
* for distillation (issue 39), per teacher the records' grades allow: the share of candidate pairs the teacher
  orders differently from the encoder, Kendall's tau, and the first-step margin-MSE and KL losses
  (``syntra_dspy.training.signal``, the same figures ``syntra export --stats --encoder`` reports).

It also asks whether choosing other documents would help: the judged records' loss by how crowded their source
document is (mean cosine to its 5 nearest other documents), in quarters.

    python benchmarks/teaching_signal.py --store benchmarks/runs/scifact-hybrid-v2.db \
        --artifact artifacts/scifact/22e653baa2bb --records 300 --out benchmarks/results/teaching_signal

Costs one pass of the base encoder over the corpus (cached under ``.syntra/index``, shared with the downstream
script) and over the queries: a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.evaluation import bootstrap_ci, load_dataset
from syntra_dspy.production.export import export_records
from syntra_dspy.retrieval.encoder import load_encoder
from syntra_dspy.retrieval.index import CorpusIndex
from syntra_dspy.retrieval.sources import default_index_dir
from syntra_dspy.training import TrainConfig, records_from_dicts
from syntra_dspy.training.signal import score_records, summarise

# The downstream harness's helpers: the same sets as downstream_scifact.py, built the same way.
try:  # python -m benchmarks.teaching_signal (make bench-teaching-signal)
    from benchmarks.common import (INDEX_ROOT, candidate_depth, claim_pool, excluded_claims, human_records,
                                   source_only_records)
except ModuleNotFoundError:  # python benchmarks/teaching_signal.py: this folder is first on the path
    from common import (INDEX_ROOT, candidate_depth, claim_pool, excluded_claims, human_records,  # type: ignore
                        source_only_records)

BASE = "all-MiniLM-L6-v2"


def score_set(rows: list[dict[str, Any]], encoder: Any, index: CorpusIndex, config: TrainConfig
              ) -> list[dict[str, Any]]:
    """Per record: the product's teaching signal (``syntra_dspy.training.signal``: InfoNCE loss, positive first,
    margin, and each teacher the record's grades allow) plus whether a positive is the corpus's first hit."""
    scored = score_records(records_from_dicts(rows).records, encoder, config=config)
    queries = encoder.encode_queries([r["query"] for r in rows], batch_size=64)
    first_hits = [hits[0][0] for hits in index.search(np.ascontiguousarray(queries, dtype=np.float32), 1)]
    return [{**s, "corpus_rank1": float(first in row["pos_ids"]), "negatives": len(row["neg_ids"])}
            for s, row, first in zip(scored, rows, first_hits, strict=True)]


def neighbour_density(index: CorpusIndex, doc_id: str, k: int = 5) -> float:
    """Mean cosine of a document to its ``k`` nearest other documents: how crowded its neighbourhood is."""
    sims = index.vectors @ index.vector(doc_id)
    sims[index.position(doc_id)] = -np.inf
    return float(np.sort(sims)[-k:].mean())


def by_density(rows: list[dict[str, Any]], scored: list[dict[str, Any]], index: CorpusIndex) -> dict[str, Any]:
    """The records' loss by their source document's neighbour density, in quarters, and the rank correlation."""
    from scipy.stats import spearmanr

    density = np.array([neighbour_density(index, r["source_doc_id"]) for r in rows])
    loss = np.array([s["loss"] for s in scored])
    first = np.array([s["positive_first"] for s in scored])
    edges = np.quantile(density, [0.0, 0.25, 0.5, 0.75, 1.0])
    quarters = []
    for i in range(4):
        mask = (density >= edges[i]) & ((density < edges[i + 1]) if i < 3 else (density <= edges[i + 1]))
        quarters.append({"density": [float(edges[i]), float(edges[i + 1])], "records": int(mask.sum()),
                         "loss": float(loss[mask].mean()), "loss_median": float(np.median(loss[mask])),
                         "positive_first": float(first[mask].mean())})
    rho = spearmanr(density, loss)
    return {"spearman": float(rho.statistic), "p": float(rho.pvalue), "quarters": quarters}


def summarize(scored: list[dict[str, Any]]) -> dict[str, Any]:
    losses = [s["loss"] for s in scored]
    lo, hi = bootstrap_ci(losses)
    return {**summarise(scored), "loss_ci": [lo, hi],
            "share_loss_below_0.1": float(np.mean([x < 0.1 for x in losses])),
            "corpus_rank1": float(np.mean([s["corpus_rank1"] for s in scored]))}


def difference_ci(a: list[float], b: list[float], *, n: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of b minus mean of a with a bootstrap CI (independent samples: different queries)."""
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a), np.asarray(b)
    diffs = (xb[rng.integers(0, len(xb), size=(n, len(xb)))].mean(axis=1)
             - xa[rng.integers(0, len(xa), size=(n, len(xa)))].mean(axis=1))
    return float(xb.mean() - xa.mean()), float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--dataset", default="beir:../shared/data/scifact:train")
    ap.add_argument("--records", type=int, default=None, help="the first N exported records (default: all)")
    ap.add_argument("--human-pool", type=int, default=300, help="as in downstream_scifact.py")
    ap.add_argument("--seed", type=int, default=0, help="as in downstream_scifact.py")
    ap.add_argument("--num-negatives", type=int, default=7, help="hard negatives per record, as training uses")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()

    config = TrainConfig(num_negatives=args.num_negatives)
    artifact = load_artifact(args.artifact)
    dataset = load_dataset(args.dataset)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        export_records(args.store.expanduser(), path, overwrite=True, num_negatives=config.num_negatives)
        judged = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    judged = judged[:args.records] if args.records is not None else judged
    excluded, _ = excluded_claims(artifact, dataset.queries)
    human_ids = claim_pool(dataset, excluded, args.seed)[:args.human_pool][:len(judged)]
    top_k = candidate_depth(judged)
    sets = {"judged": judged,
            "source-only": source_only_records(args.store.expanduser(), judged, config.num_negatives),
            "human": human_records(dataset, human_ids, top_k, config.num_negatives, judged[0]["instruction"])}

    encoder = load_encoder(BASE)
    corpus = dataset.require_corpus()
    index = CorpusIndex.load_or_build(corpus, encoder, default_index_dir(corpus, encoder, INDEX_ROOT))
    scored = {name: score_set(rows, encoder, index, config) for name, rows in sets.items()}
    summary = {name: summarize(rows) for name, rows in scored.items()}
    crowding = by_density(sets["judged"], scored["judged"], index)
    differences = {f"{b} - {a}": dict(zip(("diff", "ci_low", "ci_high"),
                                          difference_ci([s["loss"] for s in scored[a]],
                                                        [s["loss"] for s in scored[b]]), strict=True))
                   for a, b in (("judged", "human"), ("source-only", "judged"))}

    lines = ["# Teaching signal: the base encoder's loss on each training set, before training", "",
             (f"Base {BASE}, InfoNCE at temperature {config.temperature} over each record's positive and its hard "
             f"negatives (up to {config.num_negatives}); run store `{args.store}` (artifact {artifact.version}), "
             f"the same sets as `downstream_scifact.py` (seed {args.seed})."), "",
             ("| set | records | mean loss [95% CI] | median loss | loss < 0.1 | positive above every negative | "
             "median margin (cos) | positive is the corpus's first hit |"), "|---|---:|---|---:|---:|---:|---:|---:|"]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['records']} | {s['loss']:.3f} [{s['loss_ci'][0]:.3f}, {s['loss_ci'][1]:.3f}] | "
                     f"{s['loss_median']:.3f} | {s['share_loss_below_0.1']:.0%} | {s['positive_first']:.0%} | "
                     f"{s['margin_median']:+.3f} | {s['corpus_rank1']:.0%} |")
    lines += ["", (f"Distillation teachers (`syntra_dspy.training.teachers`; scale {config.teacher_scale}): how often "
                   "the teacher orders a record's candidates differently from the base encoder, and the losses a first "
                   "step would see. People's pairs have no LLM grades: only `label+bm25` (their qrels labels, BM25 "
                   "within them) scores them."), "",
              "| set | teacher | records | pairs ordered differently | Kendall tau | margin-MSE | KL |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for name, s in summary.items():
        for teacher, t in s["teachers"].items():
            lines.append(f"| {name} | {teacher} | {t['records']} | {t['discordant']:.0%} | {t['tau']:+.2f} | "
                         f"{t['margin_mse']:.4f} | {t['kl']:.3f} |")
    lines += ["", "| difference of mean loss | Δ | 95% CI (bootstrap, independent sets) |", "|---|---:|---|"]
    lines += [f"| {k} | {v['diff']:+.3f} | [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}] |" for k, v in differences.items()]
    lines += ["", (f"Judged records by their source document's neighbour density (mean cosine to its 5 nearest other "
                  f"documents; Spearman with the loss {crowding['spearman']:.2f}, p {crowding['p']:.2g}):"), "",
              "| density quarter | records | mean loss | median loss | positive above every negative |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {q['density'][0]:.2f}-{q['density'][1]:.2f} | {q['records']} | {q['loss']:.3f} | "
              f"{q['loss_median']:.3f} | {q['positive_first']:.0%} |" for q in crowding["quarters"]]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "teaching_signal.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "teaching_signal.json").write_text(json.dumps(
        {"store": str(args.store), "artifact": artifact.version, "base": BASE, "temperature": config.temperature,
         "summary": summary, "differences": differences, "by_density": crowding, "per_record": scored},
        indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
