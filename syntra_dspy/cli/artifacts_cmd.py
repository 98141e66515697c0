"""``syntra artifacts list|show|verify|diff``."""

from __future__ import annotations

import argparse
import json

from syntra_dspy.cli._args import positive_int, rename
from syntra_dspy.judging.calibration import FEATURES
from syntra_dspy.judging.settings import GRADE_ORDERS

#: The loops a compile runs (syntra_dspy.optimizers.metric.STAGE_NAMES, which loads DSPy), for ``diff --loop``.
LOOPS = ("task_definition", "idattr", "query_instruction", "annotation_instruction")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("artifacts", help="list, show, verify and diff compiled artifacts")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    ls = sub.add_parser("list", help="list artifact versions under a root")
    ls.add_argument("root", nargs="?", default="artifacts", help="artifact root (default artifacts/)")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    ls.set_defaults(func=_list)
    show = sub.add_parser("show", help="print an artifact's manifest summary and instructions")
    show.add_argument("path", help="artifact directory")
    show.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    show.set_defaults(func=_show)
    verify = sub.add_parser("verify", help="check checksums, schema, version id and rendered prompts (integrity); "
                                           "with --key-env also the team signature (who approved it)")
    verify.add_argument("path", help="artifact directory")
    verify.add_argument("--key-env", metavar="VAR", default=None,
                        help="also require a signature made with the team key in this environment variable")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")
    verify.set_defaults(func=_verify)
    sign = sub.add_parser("sign", help="verify an artifact and sign it (HMAC-SHA256) with the team key in $VAR")
    sign.add_argument("path", help="artifact directory")
    sign.add_argument("--key-env", metavar="VAR", required=True, help="environment variable holding the team key")
    sign.add_argument("--json", action="store_true", help="print the result as JSON")
    sign.set_defaults(func=_sign)
    diff = sub.add_parser("diff", help="instruction changes between two versions, or between two attempts of a loop")
    diff.add_argument("a", help="artifact directory")
    diff.add_argument("b", nargs="?", help="second artifact directory (omit with --loop)")
    diff.add_argument("--loop", choices=LOOPS, help="diff attempts of this loop inside artifact A (first vs kept)")
    diff.add_argument("--attempts", nargs=2, type=positive_int, metavar=("FIRST", "LAST"),
                      help="with --loop: the two attempts to diff, by number (default: the first and the kept one)")
    diff.add_argument("--json", action="store_true", help="print the diff as JSON")
    diff.set_defaults(func=_diff)
    recal = sub.add_parser(
        "recalibrate", help="refit an artifact's judge calibration on its graded calibration set (grading only "
                            "what the artifact holds no grade for) and save it as a new version",
        description="Fit a new judge calibration on the artifact's calibration set: another score (e.g. "
                    "--judge-feature hybrid), or human judgments given later. "
                    "The grades the artifact keeps are reused (with the "
                    "compile's calibration set unchanged, nothing is graded and no model is loaded); candidates it "
                    "holds no grade for are graded with the artifact's own grading prompt. The new version differs "
                    "from the original in its judge only (every rendered prompt is the same), so grades logged for "
                    "one are valid for the other; its manifest names the original. --without-guidance and "
                    "--brief-grading are the exceptions: the grading prompt changes and everything is graded again.")
    recal.add_argument("path", help="artifact directory")
    recal.add_argument("--out", default="artifacts", help="artifact root for the new version (default artifacts/)")
    recal.add_argument("--judge-feature", dest="feature", default="auto", choices=("auto", *FEATURES),
                       help="the judge's score (default auto: best leave-one-query-out kappa on the calibration set)")
    rename(recal, "--feature", "--judge-feature")
    recal.add_argument("--calibration-labels", default=None, metavar="beir:PATH[:split]",
                       help="judged data whose human qrels join the calibration set (default: the compile's)")
    recal.add_argument("--calibration-queries", type=int, default=None, metavar="N",
                       help="how many of its queries (default: the compile's)")
    recal.add_argument("--generator", default=None, metavar="MODEL[@API_BASE]",
                       help="judge LM (default: the artifact's)")
    recal.add_argument("--api-key-env", default=None, metavar="VAR",
                       help="environment variable holding the judge server's key")
    recal.add_argument("--index-dir", default=None, help="where the corpus index is cached")
    recal.add_argument("--regrade", action="store_true",
                       help="grade every calibration candidate again instead of reusing the artifact's grades (e.g. "
                            "to measure another llama.cpp build; another --generator always grades again)")
    recal.add_argument("--grade-order", default=None, choices=GRADE_ORDERS,
                       help="which the grading prompt shows first (default: the order of the artifact's calibration); "
                            "document-first lets production grade a candidate for all its queries in a row, reusing "
                            "the evaluated document; another order than the artifact's grades everything again")
    recal.add_argument("--without-guidance", action="store_true",
                       help="grade with the task definition and the 0-3 scale only, leaving the compiled annotation "
                            "guidance out of the grading prompt (a shorter prompt; every calibration candidate is "
                            "graded again, and the new version's grades are not the original's)")
    recal.add_argument("--brief-grading", action="store_true",
                       help="grade with the brief prompt: the task's relevance definition and a one-line 0-3 scale, "
                            "about half the instruction's tokens and no guidance (every calibration candidate is "
                            "graded again; measure its agreement with people before relying on it)")
    recal.add_argument("--json", action="store_true", help="print the result as JSON")
    recal.set_defaults(func=_recalibrate)


def _list(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import list_artifacts

    rows = list_artifacts(args.root)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return 0
    if not rows:
        print(f"no artifacts under {args.root}")
        return 0
    for r in rows:
        print(f"{r['task']}/{r['version']}  program {r['program_id']}  {r['created_at']}  {r['strategy']:<13} "
              f"{r['passed']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import component_texts, load_artifact
    from syntra_dspy.cli.compile_cmd import summary

    artifact = load_artifact(args.path)
    if args.json:
        print(json.dumps(artifact.manifest, indent=2, ensure_ascii=False))
        return 0
    print(summary(artifact.meta, args.path))
    for name, text in component_texts(artifact.program).items():
        print(f"\n== {name} ==\n{text or '(empty)'}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import load_artifact

    artifact = load_artifact(args.path, key_env=args.key_env)
    if args.json:
        print(json.dumps({"ok": True, "task": artifact.task, "version": artifact.version,
                          "checksum": artifact.checksum, "signature_checked": args.key_env is not None}, indent=2))
        return 0
    signed = f", signed with ${args.key_env}" if args.key_env else " (integrity only; --key-env checks a signature)"
    print(f"ok: {artifact.task}/{artifact.version} (checksum {artifact.checksum[:16]}…){signed}")
    return 0


def _sign(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import sign

    signature = sign(args.path, args.key_env)
    print(json.dumps({"signed": str(signature)}, indent=2) if args.json else f"signed: {signature}")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import diff_artifacts, diff_attempts, verify_artifact

    if args.loop:
        first, last = args.attempts or (1, None)
        text = diff_attempts(verify_artifact(args.a), args.loop, first, last)
        what = {"artifact": args.a, "loop": args.loop, "first": first, "last": last}
    elif not args.b:
        from syntra_dspy.errors import ConfigError

        raise ConfigError("give two artifact directories, or one with --loop NAME")
    else:
        text = diff_artifacts(args.a, args.b)
        what = {"a": args.a, "b": args.b}
    if args.json:
        print(json.dumps({**what, "diff": text}, indent=2, ensure_ascii=False))
    else:
        print(text or "(no change)")
    return 0


def _recalibrate(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.production.recalibrate import recalibrate_artifact

    if args.calibration_queries is not None and args.calibration_queries < 0:
        from syntra_dspy.errors import ConfigError

        raise ConfigError("--calibration-queries must be 0 or more", field="calibration_queries")
    path = recalibrate_artifact(args.path, args.out, feature=args.feature, calibration_labels=args.calibration_labels,
                                calibration_queries=args.calibration_queries, generator=args.generator,
                                api_key_env=args.api_key_env, index_dir=args.index_dir, regrade=args.regrade,
                                grade_order=args.grade_order, without_guidance=args.without_guidance,
                                brief_grading=args.brief_grading)
    judge = load_artifact(path).program.state.judge
    summary = judge.summary if judge is not None else None
    if args.json:
        print(json.dumps({"artifact": str(path), "judge": None if judge is None else judge.description()},
                         indent=2, ensure_ascii=False))
        return 0
    print(f"recalibrated: {path}")
    if judge is not None and summary is not None:
        cv = ", ".join(f"{k} {v:.3f}" for k, v in summary.cv_binary_kappa.items() if v is not None)
        print(f"judge: {judge.feature} (leave-one-query-out kappa: {cv}); on the calibration set binary kappa "
              f"{summary.binary_kappa:.3f}, positive recall {summary.positive_recall:.3f}")
    return 0
