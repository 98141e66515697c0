"""``syntra compare TASK.yaml --strategies none,self-improve,human,gepa``: compile under each strategy and
score every artifact on the same held-out material (table, JSON and chart); ``--dry-run`` prints the LM work first.

The human strategy's flags go to the row labelled ``human``, except that with a ``developer=human`` row (a recorded
terminal session beside people's labels) ``--human-feedback``/``--record-feedback`` go to that row."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syntra_dspy.cli._args import CommaChoices, positive_int, rename
from syntra_dspy.cli._settings import add_settings, given_settings
from syntra_dspy.cli.compile_cmd import (
    STRATEGY_NAMES,
    add_compile_flags,
    add_human_label_flags,
    human_label_options,
    lm_overrides,
    lm_timeout,
    settings_from_args,
)
from syntra_dspy.comparison.settings import CompareConfig, DownstreamOptions, HeldoutOptions


# The settings' flags in help order, by the model that defines them: (flag, field, argparse keywords); help text and
# default come from the field. Held-out and downstream values are stored as heldout_FIELD and downstream_FIELD.
class Rows(CommaChoices):
    """argparse type: comma-separated rows, each a strategy or ``LABEL=STRATEGY``."""

    def __call__(self, value: str) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        super().__call__(",".join(item.partition("=")[2].strip() or item for item in items))
        return items


_COMPARE = (("--strategies", "strategies", {"type": Rows(STRATEGY_NAMES),
                                            "metavar": "|".join(STRATEGY_NAMES) + "|LABEL=STRATEGY[,…]"}),
            ("--reference", "reference", {"metavar": "ROW"}))
_HELDOUT = (
    ("--heldout-qrels", "qrels", {"metavar": "Q"}),
    ("--heldout-queries", "queries", {"metavar": "FILE"}),
    ("--heldout-docs", "docs", {"type": positive_int}),
    ("--heldout-max-queries", "max_queries", {"type": positive_int}),
    ("--unjudged-k", "unjudged_k", {"type": int, "metavar": "UNJUDGED_K"}),
    ("--unjudged", "unjudged", {"choices": ("hard_negative", "easy_negative", "exclude")}),
)
_DOWNSTREAM = (
    ("--downstream-encoder", "base", {"metavar": "MODEL"}),
    ("--downstream-docs", "docs", {"type": positive_int}),
    ("--downstream-measure", "measure", {}),
    ("--downstream-records", "records", {"type": positive_int}),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="compare optimizer strategies (none, self-improve, human, gepa) on one task",
        description="Compile the task once per strategy (same seeds, same trial samples) and score every "
                    "artifact on the same held-out material: verifier scores on fresh documents, annotation "
                    "agreement with human labels, compile cost, optionally a downstream retrieval measure "
                    "(--downstream-measure; it then ranks the strategies).")
    p.add_argument("task", help="task YAML file")
    add_settings(p, CompareConfig, _COMPARE)
    p.add_argument("--human-feedback", metavar="FILE",
                   help="replay this recorded human session for 'human' (no person needed); without it the "
                        "session is interactive and recorded")
    p.add_argument("--record-feedback", metavar="FILE",
                   help="where an interactive human session is recorded (default: OUT/human-feedback-<time>.jsonl); "
                        "with --human-feedback, resume that session and record the whole of it here")
    add_human_label_flags(p)
    add_settings(p, HeldoutOptions, _HELDOUT, prefix="heldout_")
    p.add_argument("--gepa-max-metric-calls", type=positive_int, default=None,
                   help="GEPA budget per stage (default 30)")
    p.add_argument("--downstream", action="store_true", help="also produce → train → eval per strategy (slow)")
    p.add_argument("--eval-dataset", metavar="SPEC",
                   help="dataset for --downstream (default: the BEIR split of --heldout-qrels)")
    add_settings(p, DownstreamOptions, _DOWNSTREAM, prefix="downstream_")
    rename(p, "--base-model", "--downstream-encoder")
    p.add_argument("--train-max-steps", type=positive_int, default=None, help="cap training steps (smoke runs)")
    p.add_argument("--out", default=None, help="report folder (default: comparison/<task>)")
    p.add_argument("--artifacts", default="artifacts", help="artifact root (default: artifacts/)")
    p.add_argument("--no-chart", action="store_true", help="skip the PNG chart")
    p.add_argument("--fresh", action="store_true",
                   help="compile and score every row again, even those an earlier run with the same inputs finished "
                        "(by default they are taken from OUT/rows/)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile the rows (recorded under OUT/rows/) and stop before any held-out scoring; run again "
                        "without it once every row is compiled (a long comparison made in parts)")
    p.add_argument("--json", action="store_true", help="print the comparison (or the --dry-run plan) as JSON")
    p.add_argument("--dry-run", action="store_true",
                   help="print the planned LM calls, prompt and generated tokens and the expected time of every "
                        "row's compile, held-out scoring and (--downstream) production, then stop before any LM call")
    add_compile_flags(p)
    p.set_defaults(func=run)


def compiled_lines(result: Any, as_json: bool = False) -> str:
    """What a ``--compile-only`` run made: each row's artifact and compile cost."""
    import json

    rows = {r.strategy: {"artifact": r.artifact, "compile_cost": r.compile_cost} for r in result.strategies}
    if as_json:
        return json.dumps(rows, indent=2)
    return "\n".join(f"{label}: {row['artifact']} ({row['compile_cost']['calls']} LM calls, "
                     f"{row['compile_cost']['minutes']} min); not scored yet: run again without --compile-only"
                     for label, row in rows.items())


def beir_spec(qrels: str | None) -> str | None:
    """``ROOT/qrels/SPLIT.tsv`` (or a ``beir:`` spec) → the ``beir:ROOT:SPLIT`` dataset spec."""
    if not qrels:
        return None
    if qrels.startswith(("beir:", "neuclirtech:")):
        return qrels
    path = Path(qrels)
    if path.parent.name == "qrels" and (path.parent.parent / "corpus.jsonl").is_file():
        return f"beir:{path.parent.parent}:{path.stem}"
    return None


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.comparison import compare_strategies
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.task import load_task

    downstream = None
    if args.downstream:
        dataset = args.eval_dataset or beir_spec(args.heldout_qrels)
        if not dataset:
            raise ConfigError("--downstream needs an evaluation dataset", field="eval-dataset",
                              hint="give --eval-dataset beir:PATH[:split]")
        train = None
        if args.train_max_steps:
            from syntra_dspy.training import TrainConfig

            train = TrainConfig(max_steps=args.train_max_steps)
        downstream = DownstreamOptions(dataset=dataset, train=train,
                                       **given_settings(args, _DOWNSTREAM, prefix="downstream_"))
    config = CompareConfig(**given_settings(args, _COMPARE), settings=settings_from_args(args),
                           lm_overrides=lm_overrides(args), lm_timeout=lm_timeout(args), index_dir=args.index_dir,
                           heldout=HeldoutOptions(**given_settings(args, _HELDOUT, prefix="heldout_")),
                           downstream=downstream, chart=not args.no_chart, resume=not args.fresh,
                           compile_only=args.compile_only)
    spec = load_task(args.task)
    out = Path(args.out or Path("comparison") / spec.name)
    options = human_options(args, config.rows(), out)
    if args.gepa_max_metric_calls:
        options.update({label: {"gepa": {"max_metric_calls": args.gepa_max_metric_calls}}
                        for label, strategy in config.rows() if strategy == "gepa"})
    if args.dry_run:
        import json

        from syntra_dspy.comparison.plan import plan_comparison

        plan = plan_comparison(spec, config, artifacts=args.artifacts, strategy_options=options)
        print(json.dumps(plan.to_dict(), indent=2) if args.json else "\n".join(plan.lines()))
        return 0
    result = compare_strategies(spec, config, out=out, artifacts=args.artifacts, encoder=args.encoder,
                                strategy_options=options)
    if args.compile_only:
        print(compiled_lines(result, args.json))
        return 0
    if args.json:
        print(Path(result.outputs["json"]).read_text(encoding="utf-8").rstrip())
        return 0
    print(Path(result.outputs["markdown"]).read_text(encoding="utf-8"))
    print("wrote " + ", ".join(result.outputs.values()))
    return 0


def human_options(args: argparse.Namespace, rows: list[tuple[str, str]], out: Path) -> dict[str, dict]:
    """The human rows' options from the flags: people's labels (and ``--no-review``) for the row labelled
    ``human``; the review session (replayed, resumed or recorded live) for the ``developer`` row when there is one,
    else for ``human``."""
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.optimizers.human_inputs import ReviewSession

    humans = [label for label, strategy in rows if strategy == "human"]
    if not humans:
        if args.human_feedback or args.human_labels or args.no_review:
            flag = "--human-feedback" if args.human_feedback else "--human-labels" if args.human_labels else \
                "--no-review"
            raise ConfigError(f"{flag} is only used by the 'human' strategy", field="strategies",
                              hint="add human to --strategies")
        return {}
    labelled = "human" if "human" in humans else humans[0]
    session = "developer" if "developer" in humans else labelled
    options: dict[str, dict] = {label: {} for label in humans}
    # the session flags are the developer row's when there is one: they do not clash with --no-review on human's
    given = args if session == labelled else argparse.Namespace(**{**vars(args), "human_feedback": None,
                                                                   "record_feedback": None})
    options[labelled] = human_label_options(given, human=True)
    for label in humans:
        if "review" in options[label]:
            continue
        if label == session and args.human_feedback:  # replay (with --record-feedback too: resume)
            options[label]["review"] = ReviewSession(feedback=args.human_feedback, record=args.record_feedback)
        else:  # a live session, recorded
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            record = args.record_feedback if label == session and args.record_feedback else \
                out / f"{label}-feedback-{stamp}.jsonl"
            options[label]["review"] = ReviewSession(record=record)
    return options
