"""``syntra agreement ARTIFACT --dataset beir:PATH[:split]``: how far the artifact's judge agrees with people."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from syntra_dspy.cli._args import CommaChoices, positive_int, rename
from syntra_dspy.cli._settings import add_settings, given_settings
from syntra_dspy.judging.settings import JUDGE_MODES, AgreementConfig

# The settings' flags in help order: (flag, AgreementConfig field, argparse keywords); help text and default come
# from the field, so AgreementConfig is the one source. --judge-mode and --compare-judge-mode take comma-separated
# modes (their old spellings --judge and --compare-judge still work, with a deprecation message).
_SETTINGS = (
    ("--queries", "n_queries", {"type": positive_int, "metavar": "N"}),
    ("--top-k", "top_k", {"type": positive_int, "metavar": "K"}),
    ("--random", "random_negatives", {"type": int, "metavar": "R"}),
    ("--seed", "seed", {"type": int}),
    ("--judge-mode", "judges", {"type": CommaChoices(JUDGE_MODES), "metavar": "graded|written[,…]"}),
    ("--compare-judge-mode", "compare_judges", {"type": CommaChoices(JUDGE_MODES), "metavar": "graded|written[,…]"}),
    ("--exclude-queries", "exclude_queries", {"type": Path, "metavar": "FILE"}),
    ("--cascade-grades", "cascade_grades", {"type": Path, "metavar": "RUN.db"}),
    ("--cascade-coverage", "cascade_coverage", {"type": float, "metavar": "SHARE"}),
    ("--api-key-env", "api_key_env", {"metavar": "VAR"}),
    ("--index-dir", "index_dir", {"type": Path}),
)


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
    add_settings(p, AgreementConfig, _SETTINGS[:5])
    p.add_argument("--compare", type=Path, default=None, metavar="ARTIFACT2",
                   help="judge the same candidates with a second artifact too")
    add_settings(p, AgreementConfig, _SETTINGS[5:9])
    rename(p, "--judge", "--judge-mode")
    rename(p, "--compare-judge", "--compare-judge-mode")
    p.add_argument("--generator", default=None, metavar="MODEL[@API_BASE]", help="judge LM (default: the artifact's)")
    add_settings(p, AgreementConfig, _SETTINGS[9:])
    p.add_argument("--out", type=Path, default=Path("runs/agreement"), help="report folder (default runs/agreement)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> AgreementConfig:
    """The AgreementConfig the command line asks for: AgreementConfig's defaults for anything not given, except the
    judge, which defaults to the artifact's own."""
    from syntra_dspy.judging.judge import judge_mode, parse_judge_modes

    given = given_settings(args, _SETTINGS)
    for name in ("judges", "compare_judges"):
        if name in given:
            value = given[name]
            given[name] = parse_judge_modes(value if isinstance(value, str) else ",".join(value)) or None
    if given.get("judges") is None:
        from syntra_dspy.production.setup import load_verified

        given["judges"] = (judge_mode(load_verified(args.artifact).program),)
    return AgreementConfig(**{k: v for k, v in given.items() if v is not None})


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.comparison.judge_agreement import measure_agreement

    config = config_from_args(args)
    artifacts = [args.artifact, *([args.compare] if args.compare else [])]
    report = measure_agreement(artifacts, args.dataset, config, out=args.out, generator=args.generator)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print((args.out / "agreement.md").read_text(encoding="utf-8"))
        print(f"report: {args.out / 'agreement.md'} (JSON: agreement.json, judgments: judgments.jsonl"
              + (", chart: reliability.png)" if (args.out / "reliability.png").exists() else ")"))
    return 0
