"""Share of a run store's own grading calls each margin coverage would skip (no LM call, no reference labels).

The margin is learned from the store's whole graded lists (as ``syntra produce --judge-cascade margin
--cascade-grades STORE`` learns it) and applied to the same lists, the query's own document always graded. It picks a
coverage from the store alone, before any held-out claim is read:

    gunzip -k benchmarks/runs/scifact-noguidance.db.gz
    PYTHONPATH=. python experiments/judge_guidance/coverage_skips.py benchmarks/runs/scifact-noguidance.db \\
        --artifact artifacts/scifact/bfb6cfdf9e09 --out experiments/judge_guidance/coverage-skips.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.cascade import GradedCandidate, JudgeCascade
from syntra_dspy.production.store import RunStore

GRID = (0.95, 0.96, 0.97, 0.98, 0.99)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", type=Path)
    p.add_argument("--artifact", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    calibration = load_artifact(args.artifact).program.state.judge
    with RunStore.open(args.store, readonly=True) as run:
        lists = run.graded_lists()
        rows = run.rows("SELECT c.query_id, c.doc_id = q.doc_id, c.score, g.lexical, g.expected FROM candidates c "
                        "JOIN queries q USING (query_id) JOIN documents d ON d.doc_id = q.doc_id "
                        "LEFT JOIN grades g ON g.query_id = c.query_id AND g.rank = c.rank "
                        "ORDER BY d.position, q.position, c.rank")
    by_query: dict[str, list[tuple[bool, float, float | None, float | None]]] = {}
    for qid, source, cosine, lexical, expected in rows:
        by_query.setdefault(qid, []).append((bool(source), cosine, lexical, expected))
    # the lists the margin is learned from: every candidate graded (RunStore.graded_lists' rule)
    whole = [[c[:3] for c in group] for group in by_query.values() if all(c[3] is not None for c in group)]
    graded = [[GradedCandidate(expected=e, cosine=c, lexical=b) for e, c, b in group] for group in lists]
    out = {"store": str(args.store), "artifact": str(args.artifact), "lists": len(lists), "rows": []}
    for coverage in GRID:
        cascade = JudgeCascade.margin(calibration, graded, coverage=coverage, learned_from="run store")
        calls = skipped = 0
        for group in whole:
            keep = [i for i, (source, _, _) in enumerate(group) if source]
            skipped += len(cascade.skips(calibration, [c for _, c, _ in group], lexical=[b for _, _, b in group],
                                         keep=keep))
            calls += len(group)
        out["rows"].append({"coverage": coverage, "score_range": list(cascade.score_range), "calls": calls,
                            "skipped": skipped, "share": round(skipped / calls, 4)})
        print(f"coverage {coverage}: grade's part {cascade.score_range[0]:.2f} to {cascade.score_range[1]:.2f}, "
              f"{skipped} of {calls} grading calls skipped ({skipped / calls:.1%})")
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
