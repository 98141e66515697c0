"""``syntra compile TASK.yaml``: run test mode and write a new artifact version."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, get_args

from syntra_dspy.cli._args import rename
from syntra_dspy.optimizers.settings import CompileSettings

if TYPE_CHECKING:
    from syntra_dspy.artifacts.manifest import Manifest

#: ``syntra compile --strategy``: the optimizer strategies (syntra_dspy.optimizers.STRATEGIES, which loads DSPy).
STRATEGY_NAMES = ("self-improve", "none", "gepa", "human")
#: Settings whose flag is not the field's name, and the old spelling each keeps for one release.
_FLAG_NAMES = {"judge": ("--judge-mode", "--judge")}

_SETTING_FLAGS = {
    "max_attempts": int, "sample_docs": int, "queries_per_doc": int, "pass_threshold": int, "seed": int,
    "annotation_candidates": int, "chunk_size": int, "max_doc_chars": int, "selection_tau": float,
    "judge": str, "judge_feature": str, "judge_kappa_target": float, "judge_recall_target": float,
    "calibration_labels": str, "calibration_queries": int, "near_duplicate": float, "bm25_top1_target": float,
    "form_target": float, "query_verifier": str,
}


def add_lm_flags(parser: argparse.ArgumentParser) -> None:
    from syntra_dspy.cli._args import positive_seconds

    for role in ("generator", "verifier", "refiner"):
        parser.add_argument(f"--{role}", metavar="MODEL[@API_BASE]", action="append",
                            help=f"{role} LM: 'embedded[:NAME]' or a DSPy/LiteLLM model string, "
                                 "optionally @ an OpenAI-compatible server address; repeat MODEL@URL to spread "
                                 "the role over several servers of one model")
    parser.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                        help="total time one request to a served LM may take (every served role; default: the "
                             "task file's lms.<role>.timeout, else 120)")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compile", help="compile a task into a frozen, versioned synthesis program",
                              description="Test mode: adapt the task's synthesis instructions and save an artifact.")
    p.add_argument("task", help="task YAML file")
    p.add_argument("--strategy", default="self-improve", choices=STRATEGY_NAMES,
                   help="self-improve (default), none, gepa (dspy.GEPA on the same metrics), or human (you review "
                        "every attempt in the terminal; recorded to --record-feedback or human-feedback-<time>.jsonl)")
    p.add_argument("--human-feedback", metavar="FILE", default=None,
                   help="human strategy: replay this recorded session (no person needed)")
    p.add_argument("--record-feedback", metavar="FILE", default=None,
                   help="human strategy: record the session here (with --human-feedback: resume it)")
    add_human_label_flags(p)
    p.add_argument("--out", default="artifacts", help="artifact root (default: artifacts/)")
    add_compile_flags(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the planned LM calls, prompt and generated tokens per stage and the expected time "
                        "(stages x attempts x trials), then stop before any LM call")
    p.add_argument("--json", action="store_true", help="print the outcome (or the --dry-run plan) as JSON")
    p.set_defaults(func=run)


def add_compile_flags(p: argparse.ArgumentParser) -> None:
    """Encoder, index, test-mode settings and LM roles: shared by compile and compare."""
    p.add_argument("--encoder", default=None,
                   help="sentence-transformers model name or folder, replacing the task file's encoder setting "
                        "(default: that setting, else all-MiniLM-L6-v2)")
    p.add_argument("--index-dir", default=None, help="where to cache the corpus index")
    p.add_argument("--keep", choices=("last", "best"), default=None, help="attempt a loop keeps when none passes")
    p.add_argument("--selection-target", type=int, default=None, help="documents selected before sampling")
    for name, kind in _SETTING_FLAGS.items():
        field = CompileSettings.model_fields[name]
        flag, old = _FLAG_NAMES.get(name, ("--" + name.replace("_", "-"), None))
        values = get_args(field.annotation)
        p.add_argument(flag, dest=name, type=kind, default=None,
                       choices=values if kind is str and values and all(isinstance(v, str) for v in values) else None,
                       help=f"{field.description} (default {field.default})")
        if old:
            rename(p, old, flag)
    add_lm_flags(p)


def settings_from_args(args: argparse.Namespace) -> CompileSettings:
    """The compile settings the flags ask for; a value out of range is an error naming the flag."""
    from pydantic import ValidationError

    from syntra_dspy.errors import ConfigError

    values = {name: getattr(args, name) for name in (*_SETTING_FLAGS, "keep", "selection_target")
              if getattr(args, name, None) is not None}
    try:
        return CompileSettings(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        flag = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "a setting"
        raise ConfigError(f"{first['msg']}, got {first.get('input')!r}", field=flag,
                          hint=f"see `syntra compile --help` for {flag}") from None


def check_used(args: argparse.Namespace, settings: CompileSettings) -> None:
    """Refuse a setting that would do nothing under the judge this compile makes, rather than ignore it silently."""
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.optimizers import STRATEGIES

    judge = STRATEGIES[args.strategy].settings_for(settings).judge
    if judge == "graded" and args.chunk_size is not None:
        raise ConfigError(f"--chunk-size {args.chunk_size} would do nothing: the graded judge grades one candidate "
                          "per call (chunks are the written judge's)", field="chunk-size",
                          hint="drop --chunk-size, or compile the written judge with --judge-mode written")
    tuning = ["--" + name.replace("_", "-") for name in ("judge_feature", "judge_kappa_target", "judge_recall_target")
              if getattr(args, name) is not None]
    if judge == "written" and tuning:
        graded = " or ".join(name for name, cls in STRATEGIES.items() if "graded" in cls.judges)
        raise ConfigError(f"{', '.join(tuning)} would do nothing: they tune the graded judge's calibration, and this "
                          f"compile makes the written judge", field="judge-mode",
                          hint=f"drop them, or compile the graded judge: --judge-mode graded with --strategy {graded}")


def lm_timeout(args: argparse.Namespace) -> float | None:
    return getattr(args, "timeout", None)


def lm_overrides(args: argparse.Namespace) -> dict[str, list[str]]:
    return {role: getattr(args, role) for role in ("generator", "verifier", "refiner") if getattr(args, role, None)}


def add_human_label_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--human-labels", metavar="FILE", default=None,
                   help="human strategy: calibrate the annotation loop on judgments people made: BEIR/TREC qrels, a "
                        "beir:PATH:split spec, or a 'query, doc_id, label' file (up to --calibration-queries queries)")
    p.add_argument("--human-label-queries", metavar="FILE", default=None,
                   help="query texts for --human-labels qrels outside a BEIR layout (queries.jsonl or id<TAB>text)")
    p.add_argument("--no-review", action="store_true",
                   help="human strategy: no one reviews the attempts (every verifier judgement stands); the "
                        "annotation loop is calibrated on --human-labels alone")


def human_label_options(args: argparse.Namespace, *, human: bool) -> dict[str, object]:
    """The human strategy's labels (a ``HumanLabels``) and, with ``--no-review``, its review session, from the
    command line (refused without that strategy)."""
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.optimizers.human_inputs import HumanLabels, ReviewSession

    if not args.human_labels and not args.no_review:
        return {}
    flag = "--human-labels" if args.human_labels else "--no-review"
    if not human:
        raise ConfigError(f"{flag} belongs to the human strategy", field=flag.lstrip("-"),
                          hint="use --strategy human (compare: add human to --strategies)")
    labels = {"labels": HumanLabels(file=args.human_labels, queries=args.human_label_queries)} \
        if args.human_labels else {}
    if not args.no_review:
        return labels
    if getattr(args, "human_feedback", None) or getattr(args, "record_feedback", None):
        raise ConfigError("--no-review leaves no session to replay or record", field="no-review",
                          hint="drop --human-feedback/--record-feedback, or drop --no-review")
    return {**labels, "review": ReviewSession(reviewed=False)}


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.compiler import CompileConfig, compile_task

    extra: dict = human_label_options(args, human=args.strategy == "human")
    if args.human_feedback or args.record_feedback:
        if args.strategy != "human":
            from syntra_dspy.errors import ConfigError

            raise ConfigError("--human-feedback and --record-feedback belong to --strategy human")
        from syntra_dspy.optimizers.human_inputs import ReviewSession

        extra["review"] = ReviewSession(feedback=args.human_feedback, record=args.record_feedback)
    settings = settings_from_args(args)
    check_used(args, settings)
    config = CompileConfig(strategy=args.strategy, settings=settings, lm_overrides=lm_overrides(args),
                           lm_timeout=lm_timeout(args), index_dir=args.index_dir)
    if args.dry_run:
        from syntra_dspy.compiler import plan_compile

        plan = plan_compile(args.task, config, out=args.out)
        print(json.dumps(plan.to_dict(), indent=2) if args.json else "\n".join(plan.lines()))
        return 0
    artifact = compile_task(args.task, config, out=args.out, encoder=args.encoder, optimizer_kwargs=extra)
    print(json.dumps(summary_dict(artifact.meta, artifact.path), indent=2) if args.json
          else summary(artifact.meta, artifact.path))
    return 0


def summary_dict(meta: Manifest, path) -> dict:
    """:func:`summary` as JSON-ready data."""
    from syntra_dspy.artifacts.manifest import StageUsage

    loops = []
    for loop in meta.history:
        u = meta.usage.get(loop.name) or StageUsage()
        loops.append({"loop": loop.name, "scores": [a.score for a in loop.attempts], "kept": loop.kept,
                      "passed": loop.passed, "stop_reason": loop.stop_reason, "calls": u.calls,
                      "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens})
    return {"artifact": str(path), "task": meta.task, "version": meta.version, "program": meta.program_identity,
            "strategy": meta.strategy, "seconds": meta.seconds, "loops": loops}


def summary(meta: Manifest, path) -> str:
    """The compile's outcome per loop: scores, the kept attempt, calls and tokens."""
    from syntra_dspy.artifacts.manifest import StageUsage

    lines = [f"artifact {meta.task}/{meta.version} (program {meta.program_identity}) written to {path}",
             f"strategy {meta.strategy}, {meta.seconds} s"]
    for loop in meta.history:
        scores = ", ".join("-" if a.score is None else f"{a.score:g}" for a in loop.attempts)
        u = meta.usage.get(loop.name) or StageUsage()
        lines.append(f"  {loop.name:<24} scores [{scores}] kept #{loop.kept} "
                     f"{'passed' if loop.passed else loop.stop_reason}; "
                     f"{u.calls} calls, {u.prompt_tokens}+{u.completion_tokens} tokens")
    return "\n".join(lines)
