"""Baseline table: BM25, the base encoder and encoders trained on produced records, on a BEIR split.

Each system's nDCG@10 (and the other default measures) comes with a 95% bootstrap CI over queries; each
trained model is also compared with the base encoder on the same queries (paired t-test + bootstrap CI
of the difference). The task's few-shot queries are excluded, since they shaped the synthesis program.

    python benchmarks/baseline_table.py --dataset beir:../shared/data/scifact:train \
        --exclude-queries examples/scifact.yaml --trained scifact-lora=models/scifact-lora/merged \
        --out benchmarks/results/baseline_table/scifact.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from syntra_dspy.comparison.downstream import paired_comparisons, score_systems
from syntra_dspy.evaluation import bootstrap_ci, load_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="beir:PATH[:split]")
    ap.add_argument("--exclude-queries", default=None)
    ap.add_argument("--base", default="all-MiniLM-L6-v2")
    ap.add_argument("--trained", action="append", default=[], metavar="NAME=MODEL_DIR")
    ap.add_argument("--measure", default="nDCG@10")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    dataset = load_dataset(args.dataset)
    systems = [("BM25", "bm25"), (f"{args.base} (base)", args.base)]
    systems += [tuple(spec.split("=", 1)) for spec in args.trained]
    results, seconds = score_systems(systems, dataset, exclude=args.exclude_queries, show_progress=True,
                                     index_root=".syntra/index",
                                     each=lambda name, r, s: print(f"{name}: {r.aggregate} ({s:.0f} s)", flush=True))

    m = args.measure
    base_name = systems[1][0]
    others = [name for name, _ in systems if name != base_name]
    against_base = dict(zip(others, paired_comparisons(results, m, [(base_name, name) for name in others])))
    lines = [f"# Baseline table: {dataset.name}", "",
             f"{next(iter(results.values())).n_queries} queries (few-shot queries excluded: "
             f"{args.exclude_queries or 'none'}). 95% bootstrap CIs over queries (10,000 resamples).", "",
             f"| system | {m} [95% CI] | nDCG@20 | R@100 | Δ{m} vs base [95% CI] | p (paired t) | seconds |",
             "|---|---|---|---|---|---|---|"]
    rows = []
    for name, _ in systems:
        r = results[name]
        lo, hi = bootstrap_ci([s[m] for s in r.per_query.values()])
        if name not in against_base:
            delta, p = "—", "—"
        else:
            cmp = against_base[name]
            delta, p = f"{cmp.diff:+.4f} [{cmp.ci_low:+.4f}, {cmp.ci_high:+.4f}]", f"{cmp.p_value:.3g}"
        lines.append(f"| {name} | {r.aggregate[m]:.4f} [{lo:.4f}, {hi:.4f}] | {r.aggregate['nDCG@20']:.4f} | "
                     f"{r.aggregate['R@100']:.4f} | {delta} | {p} | {seconds[name]:.0f} |")
        rows.append({"system": name, "aggregate": r.aggregate, "ci": [lo, hi], "seconds": seconds[name]})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
