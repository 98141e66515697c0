"""``syntra export RUN.db --out train.jsonl``: training records (or ``--stats``) from a run store."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from syntra_dspy.cli._args import fraction, positive_int, rename
from syntra_dspy.cli._settings import add_settings, given_settings
from syntra_dspy.errors import ConfigError
from syntra_dspy.outputs import full_disk_is_clear, named_output
from syntra_dspy.production.records import FORMATS, NEGATIVES, POSITIVES, ExportConfig

# The settings' flags in help order: (flag, ExportConfig field, argparse keywords); help text and default come from
# the field, so ExportConfig is the one source.
_SETTINGS = (
    ("--format", "format", {"choices": FORMATS}),
    ("--dev-split", "dev_split", {"type": fraction, "metavar": "FRACTION"}),
    ("--seed", "seed", {"type": int, "metavar": "N"}),
    ("--negatives", "negatives", {"choices": NEGATIVES}),
    ("--num-negatives", "num_negatives", {"type": positive_int, "metavar": "n"}),
    ("--positives", "positives", {"choices": POSITIVES}),
    ("--include-unretrieved-source", "include_unretrieved_source", {"action": "store_true"}),
    ("--include-partial", "include_partial", {"action": "store_true"}),
    ("--instruction", "instruction", {}),
    ("--relabel-with", "judge", {"metavar": "ARTIFACT"}),
)
#: The settings ``--stats`` counts records with (what the records hold, not how they are written).
_STATS = ("negatives", "num_negatives", "positives", "include_unretrieved_source", "include_partial")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "export", help="write training records from a run store, or print its statistics",
        description="Every query with at least one positive and one usable negative becomes a record "
                    "{query, instruction, pos, neg, pos_ids, neg_ids, source_doc_id, query_id, artifact_version, "
                    "labels, ...}; <out>.meta.json records the artifact, the store, the options and the counts.")
    p.add_argument("store", type=Path, metavar="RUN.db", help="run store written by `syntra produce`")
    p.add_argument("--out", type=Path, default=None, help="output .jsonl file, or folder for --format hf or st")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out (never the run store, its corpus or its artifact)")
    add_settings(p, ExportConfig, _SETTINGS)
    rename(p, "--judge", "--relabel-with")
    p.add_argument("--stats", action="store_true", help="print counts, label distribution and drop reasons")
    p.add_argument("--json", action="store_true",
                   help="print what was written (and, with --stats, the statistics) as JSON")
    p.add_argument("--encoder", default=None, metavar="MODEL",
                   help="with --stats: also report how much the records can still teach this embedding model before "
                        "any training (InfoNCE loss, share of positives it already ranks first, and where each "
                        "judge-grade teacher disagrees with it); encodes the records' texts once (minutes)")
    p.add_argument("--qrels", type=Path, default=None, metavar="QRELS",
                   help="with --stats: TREC or BEIR qrels of the produced queries (by query id) to measure the "
                        "labels' agreement with")
    p.add_argument("--failures", action="store_true",
                   help="print every current failure as one JSON line: document, query, stage, kind, error and "
                        "detail (with the LM's last rejected answer)")
    p.set_defaults(func=run)


def command_line(args: argparse.Namespace) -> str:
    """The command as typed, for the dataset card."""
    return shlex.join(["syntra", *(getattr(args, "argv", None) or [])])


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.production import compute_stats, export_records, format_stats

    if args.encoder is not None and not args.stats:
        raise ConfigError("--encoder measures what the records can teach it", hint="give --stats with it")
    if args.judge is not None and args.out is None:
        raise ConfigError("--relabel-with labels exported records", hint="give --out FILE with it")
    if args.dev_split is not None and args.out is None:
        raise ConfigError("--dev-split splits exported records", hint="give --out FILE with it")
    if args.out is None and not args.stats and not args.failures:
        raise ConfigError("nothing to do", hint="give --out FILE to export, --stats to print statistics, "
                                                "or --failures to list what failed")
    config = ExportConfig(**given_settings(args, _SETTINGS))
    options = {name: getattr(config, name) for name in _STATS}
    if args.out is not None:
        named_output(args.out, example="./records" if config.format == "hf" else "./train.jsonl")
        with full_disk_is_clear(args.out, inputs="the run store, its corpus and its artifact"):
            summary = export_records(args.store, args.out, config, overwrite=args.overwrite,
                                     command=command_line(args))
        dropped = ", ".join(f"{k} {v}" for k, v in summary.dropped.items() if v) or "none"
        splits = ", ".join(f"{k} {v}" for k, v in summary.splits.items())
        if not args.json:
            print(f"wrote {summary.records} records ({splits}) from {summary.queries} queries to {summary.out} "
                  f"(dropped: {dropped}); dataset card {summary.card_path}; metadata in {summary.meta_path}")
    if args.stats:
        stats = compute_stats(args.store, qrels=args.qrels, **options)
        if args.encoder is not None:
            from syntra_dspy.production.export import teaching_stats

            stats["teaching"] = teaching_stats(args.store, args.encoder, **options)
        if not args.json:
            print(format_stats(stats))
    if args.json and (args.out is not None or args.stats):
        # one JSON document: the statistics alone (as before), the export alone, or both
        shown = (stats if args.out is None else summary.to_dict() if not args.stats
                 else {"export": summary.to_dict(), "stats": stats})
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    if args.failures:
        from syntra_dspy.production import list_failures

        for failure in list_failures(args.store):
            print(json.dumps(failure, ensure_ascii=False))
    return 0
