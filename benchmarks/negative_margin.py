"""Would dropping the hard negatives nearest the positive cut remove false negatives? Read off a committed agreement run.

A common guard in hard-negative mining (sentence-transformers' ``mine_hard_negatives`` margins, NV-Retriever's
positive-aware mining) leaves out negatives scored close to the positive, as likely unlabelled positives. This
reads `syntra agreement`'s per-candidate judgments and SciFact's human labels and reports, for the artifact's judge,
how many of the candidates it calls hard negatives are human positives, and how many a margin would remove:
(a) globally, below the artifact's positive threshold; (b) per query, below that query's lowest judged positive
(what an export would do, since only a query with a judged positive becomes a record).

    python benchmarks/negative_margin.py --agreement benchmarks/results/judge_agreement_hybrid_fresh \
        --artifact 22e653baa2bb --threshold 4.0257 --out benchmarks/results/negative_margin/README.md
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agreement", type=Path, required=True, help="a syntra agreement output folder")
    ap.add_argument("--artifact", required=True, help="whose judge (the version in judgments.jsonl)")
    ap.add_argument("--threshold", type=float, required=True, help="the judge's positive threshold (program.json)")
    ap.add_argument("--margins", default="0.5,1,2,3", help="margins below the cut, in judge-score units")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    gold = {(c["query_id"], c["doc_id"]): c for c in json.loads((args.agreement / "candidates.json").read_text())}
    by_query: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for line in (args.agreement / "judgments.jsonl").read_text().splitlines():
        row = json.loads(line)
        cand = gold[(row["query_id"], row["doc_id"])]
        if row["artifact"] != args.artifact or cand["source"] != "retrieved":
            continue  # production sees retrieved candidates only
        by_query[row["query_id"]].append((row["judgment"]["score"], row["judgment"]["class"], cand["gold"]))
    margins = [float(m) for m in args.margins.split(",")]

    def hard(rows):
        return [(s, g) for q in rows for s, k, g in q if k == "hard_negative"]

    all_hard = hard(by_query.values())
    recorded = [q for q in by_query.values() if any(k == "positive" for _, k, _ in q)]
    rec_hard = hard(recorded)
    lines = [f"# Hard negatives near the positive cut: a margin filter, measured (artifact {args.artifact})", "",
             f"From `{args.agreement}` (retrieved candidates only; reference: SciFact qrels, judgments people made).", "",
             f"Judge hard negatives: {len(all_hard)}, of which human positives {sum(g == 'positive' for _, g in all_hard)}. "
             f"Queries with a judged positive (the ones that become records): {len(recorded)} of {len(by_query)}; "
             f"their hard negatives: {len(rec_hard)}, human positives among them "
             f"{sum(g == 'positive' for _, g in rec_hard)}.", "",
             "| margin | global cut: negatives dropped | false negatives dropped | per-query cut (records): dropped "
             "| false negatives dropped |", "|---:|---:|---:|---:|---:|"]
    for m in margins:
        glob = [(s, g) for s, g in all_hard if s >= args.threshold - m]
        local = [(s, g) for q in recorded for s, k, g in q
                 if k == "hard_negative" and s >= min(x for x, kk, _ in q if kk == "positive") - m]
        lines.append(f"| {m:g} | {len(glob)} | {sum(g == 'positive' for _, g in glob)} | {len(local)} | "
                     f"{sum(g == 'positive' for _, g in local)} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
