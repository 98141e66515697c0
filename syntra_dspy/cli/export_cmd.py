"""``syntra export RUN.db --out train.jsonl``: training records (or ``--stats``) from a run store."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from syntra_dspy.cli._args import fraction, positive_int, rename
from syntra_dspy.production.dataset_card import ST_NEGATIVES_RULE, ST_POSITIVE_RULE
from syntra_dspy.production.records import FORMATS
from syntra_dspy.errors import ConfigError
from syntra_dspy.outputs import full_disk_is_clear, named_output


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
    p.add_argument("--format", choices=FORMATS, default="jsonl",
                   help="jsonl (default: one record per line, FlagEmbedding's layout plus ids and grades); hf (the "
                        "same records as a datasets.save_to_disk folder); st (a Parquet dataset folder that "
                        "sentence-transformers trains on with no glue: columns anchor, positive, negative_1.."
                        f"negative_n with n = --num-negatives, and label = the judge's scores of those texts when "
                        f"every record has them; positive: {ST_POSITIVE_RULE}; {ST_NEGATIVES_RULE}). Every format "
                        "writes a README.md dataset card (inside the folder; <out>.README.md beside a file)")
    p.add_argument("--dev-split", type=fraction, default=None, metavar="FRACTION",
                   help="put the records of this fraction of the source documents (e.g. 0.1) in a dev split: "
                        "jsonl: <stem>.dev.jsonl beside --out; st: data/dev-*.parquet. Documents are drawn with "
                        "--seed; a document's queries are never in both splits")
    p.add_argument("--seed", type=int, default=42, metavar="N", help="seed of the --dev-split draw (default 42)")
    p.add_argument("--negatives", choices=("hard", "hard+easy"), default="hard",
                   help="hard negatives only (default), or topped up with easy ones to --num-negatives")
    p.add_argument("--num-negatives", type=positive_int, default=7, metavar="n", help="negatives per record (default 7)")
    p.add_argument("--positives", choices=("all", "source-first"), default="all",
                   help="all judged positives (default), or only the source document when it was judged positive")
    p.add_argument("--include-unretrieved-source", action="store_true",
                   help="add the source document to pos when retrieval missed it (unjudged; off by default)")
    p.add_argument("--include-partial", action="store_true",
                   help="export queries whose annotation is incomplete, from their labelled candidates only")
    p.add_argument("--instruction", default=None, help="override the retrieval instruction put in every record")
    p.add_argument("--relabel-with", default=None, metavar="ARTIFACT",
                   help="label the records with this artifact's judge, applied to the grades the run stored (an "
                        "artifact recalibrated from the run's: same grading prompt; nothing is graded again); "
                        "--stats still describes the stored labels")
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
    if args.relabel_with is not None and args.out is None:
        raise ConfigError("--relabel-with labels exported records", hint="give --out FILE with it")
    if args.dev_split is not None and args.out is None:
        raise ConfigError("--dev-split splits exported records", hint="give --out FILE with it")
    if args.out is None and not args.stats and not args.failures:
        raise ConfigError("nothing to do", hint="give --out FILE to export, --stats to print statistics, "
                                                "or --failures to list what failed")
    options = {"negatives": args.negatives, "num_negatives": args.num_negatives, "positives": args.positives,
               "include_unretrieved_source": args.include_unretrieved_source, "include_partial": args.include_partial}
    if args.out is not None:
        named_output(args.out, example="./records" if args.format == "hf" else "./train.jsonl")
        with full_disk_is_clear(args.out, inputs="the run store, its corpus and its artifact"):
            summary = export_records(args.store, args.out, format=args.format, instruction=args.instruction,
                                     overwrite=args.overwrite, judge=args.relabel_with, dev_split=args.dev_split,
                                     seed=args.seed, command=command_line(args), **options)
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
