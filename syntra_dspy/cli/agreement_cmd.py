"""``syntra agreement ARTIFACT --dataset beir:PATH[:split]``: how far the artifact's judge agrees with people."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from syntra_dspy.cli._args import positive_int


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "agreement", help="measure an artifact's relevance judge against human judgments",
        description="Judge, with the artifact's own judge, the candidates production would retrieve for N queries of "
                    "a judged dataset (dense top-K, plus judged positives retrieval missed, plus random documents), "
                    "and report binary and three-class Cohen's kappa, precision and recall per class, the AUC of the "
                    "graded score, a reliability chart, and seconds and tokens per candidate. The task's few-shot and "
                    "calibration queries are excluded. Judgments are logged as they are made: rerun to resume.")
    p.add_argument("artifact", type=Path, help="artifact directory")
    p.add_argument("--dataset", required=True, metavar="beir:PATH[:split]",
                   help="judged dataset (beir:PATH[:split] or neuclirtech:PATH[:eng|zho])")
    p.add_argument("--queries", type=positive_int, default=50, metavar="N", help="queries to sample (default 50)")
    p.add_argument("--top-k", type=positive_int, default=10, metavar="K", help="retrieved candidates per query (10)")
    p.add_argument("--random", type=int, default=1, metavar="R", help="random documents per query (default 1)")
    p.add_argument("--seed", type=int, default=0, help="query sampling seed (default 0)")
    p.add_argument("--judge", default=None, metavar="graded|written[,…]",
                   help="judge mode(s), comma-separated (default: the artifact's: graded when it has a calibrated "
                        "judge, else written)")
    p.add_argument("--compare", type=Path, default=None, metavar="ARTIFACT2",
                   help="judge the same candidates with a second artifact too")
    p.add_argument("--compare-judge", default=None, metavar="graded|written[,…]",
                   help="judge mode(s) for --compare (default: the same as --judge)")
    p.add_argument("--exclude-queries", type=Path, default=None, metavar="FILE",
                   help="queries never to sample besides the task's: a file of query ids (one per line) or a task "
                        "YAML, e.g. the queries an earlier measurement used")
    p.add_argument("--generator", default=None, metavar="MODEL[@API_BASE]", help="judge LM (default: the artifact's)")
    p.add_argument("--api-key-env", default=None, metavar="VAR")
    p.add_argument("--index-dir", type=Path, default=None, help="where the corpus index is cached")
    p.add_argument("--out", type=Path, default=Path("runs/agreement"), help="report folder (default runs/agreement)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.judging.judge import judge_mode, parse_judge_modes
    from syntra_dspy.judging.measure import measure_agreement

    modes = list(parse_judge_modes(args.judge))
    compare_modes = list(parse_judge_modes(args.compare_judge)) or None
    if args.random < 0:
        raise ConfigError("--random must be 0 or more", field="random")
    if not modes:
        from syntra_dspy.production.setup import load_verified

        modes = [judge_mode(load_verified(args.artifact).program)]
    artifacts = [args.artifact, *([args.compare] if args.compare else [])]
    report = measure_agreement(artifacts, args.dataset, judges=modes, n_queries=args.queries, top_k=args.top_k,
                               random_negatives=args.random, seed=args.seed, out=args.out, generator=args.generator,
                               compare_judges=compare_modes, exclude_queries=args.exclude_queries,
                               index_dir=args.index_dir, api_key_env=args.api_key_env)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print((args.out / "agreement.md").read_text(encoding="utf-8"))
        print(f"report: {args.out / 'agreement.md'} (JSON: agreement.json, judgments: judgments.jsonl"
              + (", chart: reliability.png)" if (args.out / "reliability.png").exists() else ")"))
    return 0
