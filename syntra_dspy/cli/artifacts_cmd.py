"""``syntra artifacts list|show|verify|diff``."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("artifacts", help="list, show, verify and diff compiled artifacts")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    ls = sub.add_parser("list", help="list artifact versions under a root")
    ls.add_argument("root", nargs="?", default="artifacts")
    ls.set_defaults(func=_list)
    show = sub.add_parser("show", help="print an artifact's manifest summary and instructions")
    show.add_argument("path")
    show.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    show.set_defaults(func=_show)
    verify = sub.add_parser("verify", help="check checksums, schema, version id and rendered prompts (integrity); "
                                           "with --key-env also the team signature (who approved it)")
    verify.add_argument("path")
    verify.add_argument("--key-env", metavar="VAR", default=None,
                        help="also require a signature made with the team key in this environment variable")
    verify.set_defaults(func=_verify)
    sign = sub.add_parser("sign", help="verify an artifact and sign it (HMAC-SHA256) with the team key in $VAR")
    sign.add_argument("path")
    sign.add_argument("--key-env", metavar="VAR", required=True, help="environment variable holding the team key")
    sign.set_defaults(func=_sign)
    diff = sub.add_parser("diff", help="instruction changes between two versions, or between two attempts of a loop")
    diff.add_argument("a", help="artifact directory")
    diff.add_argument("b", nargs="?", help="second artifact directory (omit with --loop)")
    diff.add_argument("--loop", help="diff attempts of this loop inside artifact A (first vs kept)")
    diff.add_argument("--attempts", nargs=2, type=int, metavar=("FIRST", "LAST"))
    diff.set_defaults(func=_diff)


def _list(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import list_artifacts

    rows = list_artifacts(args.root)
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
    signed = f", signed with ${args.key_env}" if args.key_env else " (integrity only; --key-env checks a signature)"
    print(f"ok: {artifact.task}/{artifact.version} (checksum {artifact.checksum[:16]}…){signed}")
    return 0


def _sign(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import sign

    print(f"signed: {sign(args.path, args.key_env)}")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from syntra_dspy.artifacts import diff_artifacts, diff_attempts, verify_artifact

    if args.loop:
        first, last = args.attempts or (1, None)
        print(diff_attempts(verify_artifact(args.a), args.loop, first, last) or "(no change)")
        return 0
    if not args.b:
        from syntra_dspy.errors import ConfigError

        raise ConfigError("give two artifact directories, or one with --loop NAME")
    print(diff_artifacts(args.a, args.b))
    return 0
