"""The ``syntra`` command. Each subcommand lives in its own module with a ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from syntra_dspy.errors import RunAbandoned, SyntraError

# Subcommand modules, in the order `syntra --help` lists them.
_COMMANDS = ("index", "compile", "artifacts", "produce", "backup", "export", "train", "eval", "compare", "agreement",
             "devset")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="syntra",
        description="Compile a retrieval task into a frozen synthesis program, produce training data, "
                    "train and evaluate.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"syntra {_version()}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        module_name = f"syntra_dspy.cli.{name}_cmd"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise  # a dependency of the subcommand: its own message says what to install
            raise ImportError(f"the '{name}' subcommand's module {module_name} is missing: this syntra-dspy "
                              "installation is incomplete; reinstall it (pip install --force-reinstall syntra-dspy, "
                              "or pip install -e . in a checkout)") from exc
        module.register(sub)
    return parser


def _version() -> str:
    """The installed distribution's version (the package's own when it is not installed)."""
    from syntra_dspy import __version__

    try:
        from importlib.metadata import version

        installed = version("syntra-dspy")
    except Exception:  # noqa: BLE001 - not installed: the package's own
        installed = __version__
    return installed


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a command run again in a child is given
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    from syntra_dspy.redact import RedactingFilter, redact

    for handler in logging.getLogger().handlers:  # no credential in an address reaches the terminal or a log
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    previous = _stop_on_sigterm()
    try:
        return int(args.func(args) or 0)
    except SyntraError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("interrupted", file=sys.stderr)
        if isinstance(exc, RunAbandoned):
            # A second Ctrl-C: the store is closed and everything committed is kept. Worker threads may still
            # sit in a call (an in-process model cannot be interrupted); exit without waiting for them.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _stop_on_sigterm() -> Callable[..., Any] | int | None:
    """Make SIGTERM stop a command the way Ctrl-C does (returns the handler it replaced; None off the main thread).

    ``kill PID``, ``systemctl stop``, ``docker stop`` and batch schedulers all send SIGTERM, and a run started with
    ``nohup ... &`` from a script ignores SIGINT. Python's default for SIGTERM ends the process on the spot: a
    production run then loses the documents in flight and its session is found "killed" only on the next start.
    As a KeyboardInterrupt it takes the graceful path instead (the documents in flight are committed, the session
    is marked interrupted; a second signal abandons them)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


if __name__ == "__main__":
    sys.exit(main())
