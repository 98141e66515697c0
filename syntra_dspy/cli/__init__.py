"""The ``syntra`` command. Each subcommand lives in its own module with a ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from syntra_dspy.errors import SyntraError

# Subcommand modules, in the order `syntra --help` lists them.
_COMMANDS = ("index", "compile", "artifacts", "produce", "export", "train", "eval", "compare")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="syntra",
        description="Compile a retrieval task into a frozen synthesis program, produce training data, train and evaluate.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"syntra_dspy.cli.{name}_cmd")
        except ModuleNotFoundError as exc:
            if exc.name == f"syntra_dspy.cli.{name}_cmd":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except SyntraError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
