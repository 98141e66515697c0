"""``syntra produce ARTIFACT --store RUN.db``: turn a corpus into judged queries with a compiled artifact."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import get_args

from syntra_dspy.cli._args import count_or_all, positive_int, positive_seconds, temperature
from syntra_dspy.cli._settings import add_settings, given_settings
from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.settings import CASCADE_MODES
from syntra_dspy.production.config import PlannerMode, ProduceConfig, PromptFormat
from syntra_dspy.production.ray_cluster import RayOptions
from syntra_dspy.retrieval.corpus import FORMATS
from syntra_dspy.task import CandidateSource


# The settings' flags in help order: (flag, ProduceConfig field, argparse keywords). Help text and default come
# from the field, so ProduceConfig is the one source; the argparse type only refuses a malformed value early.
_SETTINGS = (
    ("--corpus-format", "corpus_format", {"choices": FORMATS}),
    ("--docs", "docs", {"type": count_or_all, "metavar": "N|all"}),
    ("--queries-per-doc", "queries_per_doc", {"type": positive_int, "metavar": "k"}),
    ("--top-k", "top_k", {"type": positive_int, "metavar": "K"}),
    ("--chunk-size", "chunk_size", {"type": positive_int, "metavar": "c"}),
    ("--concurrency", "concurrency", {"type": positive_int, "metavar": "C"}),
    ("--api-key-env", "api_key_env", {"metavar": "VAR"}),
    ("--artifact-key-env", "artifact_key_env", {"metavar": "VAR"}),
    ("--index-dir", "index_dir", {"type": Path}),
    ("--candidates", "candidates", {"choices": get_args(CandidateSource)}),
    ("--max-identifiers", "max_identifiers", {"type": count_or_all, "metavar": "N|all"}),
    ("--hide-copied", "hide_copied", {"action": argparse.BooleanOptionalAction}),
    ("--copy-guard", "copy_guard", {"type": positive_int, "metavar": "N"}),
    ("--question-guard", "question_guard", {"action": argparse.BooleanOptionalAction}),
    ("--planner", "planner", {"choices": get_args(PlannerMode)}),
    ("--prompt-format", "prompt_format", {"choices": get_args(PromptFormat)}),
    ("--judge-cascade", "judge_cascade", {"choices": CASCADE_MODES}),
    ("--cascade-coverage", "cascade_coverage", {"type": float, "metavar": "SHARE"}),
    ("--cascade-grades", "cascade_grades", {"type": Path, "metavar": "RUN.db"}),
    ("--retry-failed", "retry_failed", {"action": "store_true"}),
    ("--timeout", "timeout", {"type": positive_seconds, "metavar": "SECONDS"}),
    ("--retries", "retries", {"type": int, "choices": range(0, 21), "metavar": "N"}),
    ("--retry-temperature", "retry_temperature", {"type": temperature, "metavar": "T"}),
)
# The inputs, which are not settings, go between them where the help has always listed them.
_INPUTS = {
    "--corpus-format": ("--corpus", {"default": None,
                                     "help": "corpus file (default: the one the artifact was compiled on)"}),
    "--api-key-env": ("--generator", {
        "metavar": "MODEL[@API_BASE]", "default": None, "action": "append",
        "help": "generator LM: 'embedded[:NAME]' or a DSPy/LiteLLM model string, optionally @ an OpenAI-compatible "
                "server (e.g. hosted_vllm/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1); repeat MODEL@URL to "
                "balance over several servers of one model, with failover; default: the artifact's generator"}),
    "--index-dir": ("--encoder", {"default": None, "help": "use this encoder instead of the artifact's (only when "
                                                           "you mean to: records will differ)"}),
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "produce", help="produce training data from a compiled artifact into a resumable run store",
        description="Production mode: load a compiled artifact unchanged (refused if it does not verify), select "
                    "diverse documents and run each through extraction, blueprint planning, query writing, "
                    "top-K retrieval and chunked annotation. Every document is committed to the SQLite run store "
                    "in one transaction; rerun the same command to resume after any interruption.")
    p.add_argument("artifact", type=Path, help="artifact directory (artifacts/<task>/<version>)")
    p.add_argument("--store", required=True, type=Path, metavar="RUN.db", help="SQLite run store (created or resumed)")
    for flag, name, kwargs in _SETTINGS:
        if flag in _INPUTS:
            input_flag, input_kwargs = _INPUTS[flag]
            p.add_argument(input_flag, **input_kwargs)
        add_settings(p, ProduceConfig, [(flag, name, kwargs)])
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="spread the documents over a Ray cluster (needs the extra: pip install 'syntra-dspy[ray]'): "
                        "ADDRESS is HOST:PORT of `ray start --head`, or 'auto'; without it Ray uses $RAY_ADDRESS, a "
                        "cluster on this machine, or starts one. This process alone writes the store; "
                        "--concurrency counts the calls in flight across all workers. Give --ray after ARTIFACT, or "
                        "with an address, so it does not take ARTIFACT for one")
    p.add_argument("--ray-workers", type=positive_int, default=None, metavar="N",
                   help="Ray document workers (default: one per CPU of the cluster, at most --concurrency)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="print the documents left, the planned LM calls, prompt and generated tokens per stage and "
                        "the expected time (from the run store's own figures when resuming, else measured ones of "
                        "the embedded engine), then stop before loading or calling any model; the store is only read")
    p.add_argument("--json", action="store_true", help="print the summary (or the --dry-run plan) as JSON")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> ProduceConfig:
    """The ProduceConfig the command line asks for: ProduceConfig's defaults for anything not given."""
    if args.ray_workers is not None and args.ray is None:
        raise ConfigError("--ray-workers needs --ray", field="ray_workers", hint="add --ray [ADDRESS]")
    given = given_settings(args, _SETTINGS)
    if args.ray is not None:
        given["ray"] = RayOptions(address=args.ray or None, workers=args.ray_workers)
    return ProduceConfig(**given, progress=not args.no_progress)


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.production import produce

    if args.dry_run:
        from syntra_dspy.production.dry_run import plan_production

        plan = plan_production(args.artifact, args.store, config_from_args(args), corpus=args.corpus,
                               generator=args.generator)
        print(json.dumps(plan.to_dict(), indent=2) if args.json else "\n".join(plan.lines()))
        return 0
    summary = produce(args.artifact, args.store, config_from_args(args), corpus=args.corpus,
                      generator=args.generator, encoder=args.encoder)
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
        return 0
    d = summary.documents
    print(f"session {summary.session_id} {summary.status}: {summary.processed} documents in {summary.seconds:.1f} s, "
          f"{summary.calls} LM calls")
    print(f"run store {summary.store} (artifact {summary.artifact_version}): {d['done']} done, {d['partial']} partial, "
          f"{d['failed']} failed, {d['pending']} pending of {d['planned']} planned")
    print(f"{summary.queries} queries, {summary.records} exportable records (default export options)")
    if summary.failures_by_stage:
        print("failures by stage: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.failures_by_stage.items()))
              + f"  (details: syntra export {summary.store} --stats)")
    return 0
