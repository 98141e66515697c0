"""``syntra backup RUN.db COPY.db[.gz]``: a consistent copy of a run store, safe while a run writes to it."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "backup", help="copy a run store consistently, even while `syntra produce` writes to it",
        description="SQLite's online backup of the committed state into a standalone file, integrity-checked "
                    "before it replaces anything. `syntra produce --store COPY.db` resumes from the copy on any "
                    "machine. A .gz destination is compressed; decompress it (gunzip) before resuming.")
    p.add_argument("store", type=Path, metavar="RUN.db", help="run store written by `syntra produce`")
    p.add_argument("out", type=Path, metavar="COPY", help="the copy to write (.db, or .db.gz to compress it)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing COPY (never the run store itself)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.outputs import full_disk_is_clear
    from syntra_dspy.production.backup import backup_store

    with full_disk_is_clear(args.out, inputs="the run store"):
        summary = backup_store(args.store, args.out, overwrite=args.overwrite)
    if args.json:
        print(json.dumps({**dataclasses.asdict(summary), "out": str(summary.out)}, indent=2))
    else:
        print(summary.line())
    return 0
