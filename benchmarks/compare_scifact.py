"""SciFact: no refinement vs automatic self-improvement vs a recorded human calibration session.

The paper's central ablation (self-improvement as an alternative to human calibration) on one task, with
the embedded model in every LM role. It compiles ``examples/scifact.yaml`` under each strategy (same seed,
same trial documents) and scores every artifact on the same held-out material: verifier scores on fresh
abstracts, and annotation agreement with the SciFact qrels (train split, the dev split here; the task's
few-shot claims are never among the held-out queries). Writes ``benchmarks/results/compare_scifact/REPORT.md``
plus the comparison's markdown table, JSON and chart (all naming every artifact version) and the artifacts.

The human session is recorded once, by a person, and then replayed:

    # 1. record (interactive: you review every attempt in the terminal), then compare
    python benchmarks/compare_scifact.py --record
    # 2. any later run replays benchmarks/scifact-human-feedback.jsonl without a person
    python benchmarks/compare_scifact.py
    # if the recording was interrupted: replay what was recorded and carry on from there
    python benchmarks/compare_scifact.py --resume
    # optional: also produce -> train -> eval per strategy (nDCG@10 on SciFact train, few-shot excluded)
    python benchmarks/compare_scifact.py --downstream --downstream-docs 200

A replay refuses a feedback file recorded with other settings, LMs or code (the shown trial outputs are
hashed); re-record then. Expect hours on a CPU: every strategy compiles and is scored with the local model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TASK = REPO / "examples" / "scifact.yaml"
DATA = REPO.parent / "shared" / "data" / "scifact"
HERE = REPO / "benchmarks" / "results" / "compare_scifact"
FEEDBACK = REPO / "benchmarks" / "scifact-human-feedback.jsonl"  # an input: the recorded person's decisions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", action="store_true", help="record a new human session interactively first")
    p.add_argument("--resume", action="store_true",
                   help="finish an interrupted recording: replay it, ask from where it ends, and write the whole "
                        "session to <feedback>.resumed.jsonl (then move that over the original)")
    p.add_argument("--feedback", type=Path, default=FEEDBACK, help="the recorded human session (JSONL)")
    p.add_argument("--strategies", default="none,self-improve,human", help="add gepa to compare DSPy's GEPA too")
    p.add_argument("--data", type=Path, default=DATA, help="SciFact in BEIR layout (corpus, queries, qrels/)")
    p.add_argument("--split", default="train", help="qrels split the held-out labels come from")
    p.add_argument("--out", type=Path, default=HERE, help="where the report goes")
    p.add_argument("--artifacts", type=Path, default=HERE / "artifacts", help="artifact root")
    p.add_argument("--sample-docs", type=int, default=5, help="trial documents per loop (paper: 5)")
    p.add_argument("--max-attempts", type=int, default=3, help="attempts per loop (paper: 3)")
    p.add_argument("--chunk-size", type=int, default=1,
                   help="candidates per annotation call; 1 as for the committed SciFact artifact, because the "
                        "embedded 1.5B model tends to give a whole list one score")
    # Held-out sizes fit a CPU session (about 6 annotation calls per query); raise them on a GPU server.
    p.add_argument("--heldout-docs", type=int, default=5)
    p.add_argument("--heldout-max-queries", type=int, default=12)
    p.add_argument("--unjudged-k", type=int, default=3, help="retrieved unjudged candidates per held-out query")
    p.add_argument("--downstream", action="store_true", help="also produce, train and evaluate (slow)")
    p.add_argument("--downstream-docs", type=int, default=100)
    p.add_argument("--generator", default=None, help="override the generator LM (default: the embedded model)")
    p.add_argument("--verifier", default=None)
    p.add_argument("--refiner", default=None)
    return p.parse_args(argv)


def human_session_line(args: argparse.Namespace) -> str:
    """Which recorded session the human strategy used, when it was recorded, and whether this run replayed it."""
    shown = args.feedback.relative_to(REPO) if args.feedback.is_relative_to(REPO) else args.feedback
    events = [json.loads(line) for line in args.feedback.read_text(encoding="utf-8").splitlines() if line.strip()]
    times = sorted(e["time"] for e in events if e.get("time"))
    actions = ", ".join(f"{n} {a}" for a, n in sorted(Counter(e["action"] for e in events).items()))
    when = f"recorded {times[0][:16]}-{times[-1][11:16]} UTC" if times else "recorded"
    how = "recorded interactively in this run" if args.record else "replayed without a person in this run"
    # Who decided matters as much as what: a developer's session at the terminal is not an independent annotator's.
    by = sorted({e["by"] for e in events if e.get("by")})
    who = f"decided by {', '.join(by)} at the terminal" if by else "the file names no reviewer"
    return f"Human session: `{shown}` ({when}; {len(events)} decisions: {actions}; {who}; {how})."


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from syntra_dspy import __version__
    from syntra_dspy.comparison import DownstreamOptions, HeldoutOptions, compare_strategies
    from syntra_dspy.optimizers import CompileSettings, ReviewSession

    qrels = args.data / "qrels" / f"{args.split}.tsv"
    if not qrels.is_file():
        print(f"error: {qrels} not found; give --data (SciFact in BEIR layout)", file=sys.stderr)
        return 2
    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    options: dict[str, dict] = {}
    if "human" in names:
        if args.resume:
            resumed = args.feedback.with_suffix(".resumed.jsonl")
            options["human"] = {"review": ReviewSession(feedback=args.feedback, record=resumed)}
        elif args.record:
            if args.feedback.exists():
                print(f"error: {args.feedback} exists; move it away to record a new session", file=sys.stderr)
                return 2
            options["human"] = {"review": ReviewSession(record=args.feedback)}
        elif not args.feedback.is_file():
            print(f"error: no recorded human session at {args.feedback}; run once with --record "
                  "(interactive) or drop 'human' from --strategies", file=sys.stderr)
            return 2
        else:
            options["human"] = {"review": ReviewSession(feedback=args.feedback)}
    overrides = {r: getattr(args, r) for r in ("generator", "verifier", "refiner") if getattr(args, r)}
    downstream = None
    if args.downstream:
        downstream = DownstreamOptions(dataset=f"beir:{args.data}:{args.split}", docs=args.downstream_docs)
    # The committed human session answered the written judge's annotation loop: keep that judge so it replays.
    settings = CompileSettings(sample_docs=args.sample_docs, max_attempts=args.max_attempts,
                               chunk_size=args.chunk_size, judge="written")
    started = time.perf_counter()
    result = compare_strategies(
        TASK, strategies=names, out=args.out, artifacts=args.artifacts, settings=settings, lm_overrides=overrides,
        heldout=HeldoutOptions(docs=args.heldout_docs, qrels=qrels, max_queries=args.heldout_max_queries,
                               unjudged_k=args.unjudged_k),
        strategy_options=options, downstream=downstream)
    minutes = (time.perf_counter() - started) / 60
    table = Path(result.outputs["markdown"]).read_text(encoding="utf-8")
    lms = result.settings.get("lms", {})
    report = "\n".join([
        "# SciFact: strategy comparison (embedded model)", "",
        (f"Run {datetime.now(UTC).isoformat(timespec='minutes')} with syntra-dspy {__version__}, Python "
         f"{platform.python_version()} on {platform.machine()}, {minutes:.0f} min in all."), "",
        f"Command: `python benchmarks/compare_scifact.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
        "LM roles: " + "; ".join(f"{role}: {info.get('model')}" for role, info in lms.items()), "",
        human_session_line(args) if "human" in names else "No human session in this run.", "",
        (f"Held-out labels: SciFact qrels ({args.split} split); retrieved unjudged candidates count as hard "
         "negatives, random documents as easy negatives; the task's few-shot claims are excluded."), "",
        table.split("\n", 1)[1].lstrip(), "",
        "Chart: `comparison.png`; full data: `comparison.json`.", "",
    ])
    (args.out / "REPORT.md").write_text(report, encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
