"""SciFact: does self-improvement reach human calibration? No refinement, self-improvement, GEPA and human
calibration from people's judgments, all compiling the graded judge, scored on claims no compile touched.

The paper's central question on one task. ``examples/scifact.yaml`` is compiled once per row, with the same seed,
trial documents, encoder and corpus context, every row compiling the graded, calibrated judge:

* ``none``: the drafted instructions, untried; the judge calibrated once on the few-shot claims' candidates;
* ``self-improve``: every loop refined by the LM until it passes (the judge on the few-shot claims' candidates);
* ``gepa``: ``dspy.GEPA`` on the same metrics (the grading instruction against the judge's own metric);
* ``human``: self-improvement's loops with people's judgments in the judge's calibration set: SciFact train qrels of
  ``--calibration-queries`` claims (seeded), no one reviewing at the terminal;
* ``developer`` (``--developer FILE``): a recorded terminal session replayed, a project developer's decisions: a
  second human row, never the reference.

Every row is then scored on the same held-out material: at least ``--min-heldout-queries`` SciFact train claims (by
default 100) that are no row's few-shot or calibration claim (checked, and refused otherwise), each with its judged
abstracts, ``--unjudged-k`` retrieved unjudged abstracts and random ones: binary and three-class kappa, positive
recall, AUC of the graded score, each row against ``human`` with a paired bootstrap interval over claims, and compile
cost; ``--downstream`` adds nDCG@10 of MiniLM trained on an equal number of each row's records with ``syntra
train``'s default loss (InfoNCE) at the strength issue 39 measured with (3 epochs, lr 5e-4, 3 negatives): the
margin-MSE setting it chose on development claims did not hold on its evaluation claims. The report goes to
``benchmarks/results/compare_scifact/`` (``README.md`` opening with the answer, ``comparison.{md,json,png}``, the
artifacts); it replaces the folder's earlier report.

    make bench-compare-scifact ARGS=--dry-run      # the LM work and hours it needs, nothing run
    make bench-compare-scifact                     # the comparison (hours with the embedded model on a CPU)
    make bench-compare-scifact ARGS="--strategies gepa --compile-only"   # one row compiled in a sitting, kept
    make bench-compare-scifact ARGS="--generator hosted_vllm/Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1 \\
        --verifier ... --refiner ..."              # the same on a served model
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    from benchmarks.common import REPO, RESULTS, write_readme
except ImportError:  # run as a file: python benchmarks/compare_scifact.py
    from common import REPO, RESULTS, write_readme  # type: ignore[no-redef]

TASK = REPO / "examples" / "scifact.yaml"
DATA = REPO.parent / "shared" / "data" / "scifact"
HERE = RESULTS / "compare_scifact"
ROWS = "none,self-improve,gepa,human"
#: How each row's records are trained for the downstream column: the default loss (InfoNCE) at the strength of
#: benchmarks/results/downstream_distill/, where margin-MSE on the judge's grades, chosen on development claims, did
#: not beat it on the evaluation claims (-0.005/-0.007 nDCG@10, two seeds).
TRAIN = {"epochs": 3, "learning_rate": 5e-4, "num_negatives": 3}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print the LM work every row would do, and stop")
    p.add_argument("--task", type=Path, default=TASK, help="the task file (default examples/scifact.yaml)")
    p.add_argument("--data", type=Path, default=DATA, help="SciFact in BEIR layout (corpus, queries, qrels/)")
    p.add_argument("--split", default="train", help="qrels split of people's calibration and held-out judgments")
    p.add_argument("--out", type=Path, default=HERE, help="where the report goes")
    p.add_argument("--strategies", default=ROWS, help=f"rows (default {ROWS}); --developer adds developer=human")
    p.add_argument("--developer", type=Path, default=None,
                   help="a recorded terminal session to replay as a 'developer' row (e.g. "
                        "benchmarks/scifact-human-feedback.jsonl, if it still matches what the session shows)")
    p.add_argument("--calibration-queries", type=int, default=10, help="people's claims in the human row's calibration")
    p.add_argument("--sample-docs", type=int, default=5, help="trial documents per loop (paper: 5)")
    p.add_argument("--max-attempts", type=int, default=3, help="attempts per loop (paper: 3)")
    p.add_argument("--gepa-max-metric-calls", type=int, default=None, help="GEPA's budget per stage (default 30)")
    p.add_argument("--heldout-docs", type=int, default=5, help="fresh documents the verifier scores")
    p.add_argument("--heldout-max-queries", type=int, default=100, help="held-out claims drawn")
    p.add_argument("--min-heldout-queries", type=int, default=100, help="refuse a run scored on fewer claims")
    p.add_argument("--unjudged-k", type=int, default=5, help="retrieved unjudged abstracts per held-out claim")
    p.add_argument("--random-negatives", type=int, default=2, help="random abstracts per held-out claim")
    p.add_argument("--downstream", action="store_true", help="also produce, train and evaluate each row (slow)")
    p.add_argument("--downstream-docs", type=int, default=200, help="documents each row produces from")
    p.add_argument("--downstream-records", type=int, default=300, help="records each row trains on (equal)")
    p.add_argument("--generator", default=None, help="MODEL[@API_BASE] for the generator (default: the task's)")
    p.add_argument("--verifier", default=None)
    p.add_argument("--refiner", default=None)
    p.add_argument("--index-dir", default=None, help="where the corpus index is cached")
    p.add_argument("--fresh", action="store_true", help=(
        "make every row again; by default a rerun takes the rows an interrupted run with the same inputs finished "
        "(OUT/rows/: each row's artifact once compiled, its scores once scored)"))
    p.add_argument("--compile-only", action="store_true", help=(
        "compile the rows (recorded under OUT/rows/) and stop before scoring; the report is written by a later run "
        "without it, once every row is compiled"))
    return p.parse_args(argv)


def build(args: argparse.Namespace) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The comparison's config and each row's options."""
    from syntra_dspy.comparison import CompareConfig, DownstreamOptions, HeldoutOptions
    from syntra_dspy.optimizers import CompileSettings, HumanLabels, ReviewSession
    from syntra_dspy.training import TrainConfig

    qrels = args.data / "qrels" / f"{args.split}.tsv"
    rows = [r.strip() for r in args.strategies.split(",") if r.strip()]
    options: dict[str, dict[str, Any]] = {}
    if "human" in rows:  # people's judgments, no one at the terminal
        options["human"] = {"labels": HumanLabels(file=qrels), "review": ReviewSession(reviewed=False)}
    if args.developer is not None:
        rows.append("developer=human")
        options["developer"] = {"review": ReviewSession(feedback=args.developer)}
    if "gepa" in rows and args.gepa_max_metric_calls:
        options["gepa"] = {"gepa": {"max_metric_calls": args.gepa_max_metric_calls}}
    downstream = None
    if args.downstream:
        downstream = DownstreamOptions(dataset=f"beir:{args.data}:{args.split}", docs=args.downstream_docs,
                                       records=args.downstream_records, train=TrainConfig(**TRAIN))
    overrides = {r: getattr(args, r) for r in ("generator", "verifier", "refiner") if getattr(args, r)}
    config = CompareConfig(
        strategies=rows, reference="human" if "human" in rows else None, lm_overrides=overrides or None,
        index_dir=args.index_dir,
        settings=CompileSettings(sample_docs=args.sample_docs, max_attempts=args.max_attempts,
                                 calibration_queries=args.calibration_queries),
        heldout=HeldoutOptions(docs=args.heldout_docs, qrels=qrels, max_queries=args.heldout_max_queries,
                               unjudged_k=args.unjudged_k, random_negatives=args.random_negatives),
        downstream=downstream, resume=not args.fresh, compile_only=args.compile_only)
    return config, options


def answer(result: Any) -> str:
    """The question answered in one sentence: where self-improvement, GEPA and no refinement stand against human
    calibration on held-out agreement (paired bootstrap over claims)."""
    from syntra_dspy.comparison.report import standing

    by = {r.strategy: r for r in result.strategies}
    if "human" not in by or not by["human"].metrics.get("annotation"):
        return "No answer: the comparison had no human-calibration row scored on held-out judgments."
    names = {"self-improve": "Self-improvement", "gepa": "GEPA", "none": "no refinement"}
    parts = [f"{names[n]} is {standing(by[n].kappa_vs_reference, 'human calibration')}" for n in names if n in by]
    return "Answer (binary κ on held-out claims, each against human calibration): " + "; ".join(parts) + "."


def summary_lines(result: Any, args: argparse.Namespace, minutes: float, argv: list[str]) -> list[str]:
    """The README: the answer first, then how it was made."""
    from syntra_dspy import __version__
    from syntra_dspy.comparison.report import verdict

    lms = result.settings.get("lms", {})
    rule = [f"Ranking rule: {result.ranking.describe()}.", ""] if result.ranking else []
    return [
        "# SciFact: does self-improvement reach human calibration?", "",
        answer(result), "",
        *verdict(result), "",
        *rule,
        "Full table, per-class quality and artifacts: [`comparison.md`](comparison.md); data: `comparison.json` "
        "(`rank`, `metrics`, `compile_cost`); chart: `comparison.png`.", "",
        f"Regenerate: `make bench-compare-scifact` (this run: `python -m benchmarks.compare_scifact {' '.join(argv)}`"
        "); `make bench-compare-scifact ARGS=--dry-run` prints the LM work it needs first.", "",
        (f"Run {datetime.now(UTC).isoformat(timespec='minutes')} with syntra-dspy {__version__}, Python "
         f"{platform.python_version()} on {platform.machine()}, {minutes:.0f} min in this run (rows an earlier run "
         "compiled or scored are read from `rows/`: each row's compile minutes are in the table). LM roles: "
         + "; ".join(f"{role}: {info.get('model')}" for role, info in lms.items()) + "."), "",
        (f"Rows: none, self-improve and gepa calibrate the graded judge on the few-shot claims' candidates; human adds "
         f"people's judgments (SciFact {args.split} qrels) of {args.calibration_queries} claims to its calibration "
         "set, with no one reviewing at the terminal"
         + ("; developer replays a recorded terminal session (a project developer's decisions)."
            if args.developer else ".")),
        *([] if args.downstream else [
            "", "No downstream column: `--downstream` was not given (each row would produce, train on and evaluate "
            f"{args.downstream_records} records; production makes ~18 records per LM-hour with the embedded model on "
            "2 CPU cores, `../cost_replay/`, so it is for a served model)."]),
    ]


def replace_old_report(out: Path, result: Any) -> None:
    """This run's report replaces the folder's earlier one: its REPORT.md and the artifacts it alone named."""
    (out / "REPORT.md").unlink(missing_ok=True)
    kept = {Path(r.artifact).name for r in result.strategies}
    for folder in sorted((out / "artifacts").glob("*/*")):
        if folder.is_dir() and folder.name not in kept:
            shutil.rmtree(folder)


def main(argv: list[str] | None = None, *, lms: Any = None) -> int:
    """``lms``: built LM roles in place of the task's (the tests' scripted model)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from syntra_dspy.comparison import compare_strategies, plan_comparison

    qrels = args.data / "qrels" / f"{args.split}.tsv"
    if not qrels.is_file():
        print(f"error: {qrels} not found; give --data (SciFact in BEIR layout)", file=sys.stderr)
        return 2
    config, options = build(args)
    if args.dry_run:
        print("\n".join(plan_comparison(args.task, config, artifacts=args.out / "artifacts",
                                        strategy_options=options).lines()))
        return 0
    started = time.perf_counter()
    result = compare_strategies(args.task, config, out=args.out, artifacts=args.out / "artifacts", lms=lms,
                                strategy_options=options)
    if args.compile_only:
        from syntra_dspy.cli.compare_cmd import compiled_lines

        print(compiled_lines(result))
        return 0
    if result.heldout.get("queries", 0) < args.min_heldout_queries:
        print(f"error: only {result.heldout.get('queries', 0)} held-out claims could be scored, fewer than "
              f"--min-heldout-queries {args.min_heldout_queries}; the report in {args.out} is not an answer",
              file=sys.stderr)
        return 1
    replace_old_report(args.out, result)
    readme = write_readme(args.out, summary_lines(result, args, (time.perf_counter() - started) / 60, argv))
    print(readme.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
