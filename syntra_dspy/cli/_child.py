"""Run a command again in a child process, so that its death by a signal becomes an error that says what to change.

Training a LoRA on a CPU machine can take more memory than it has (EmbeddingGemma-300m with plain MNRL was killed
by the kernel at 22 GB on a 24 GB machine). The kernel's SIGKILL cannot be caught, so in-process the command just
stops: a terminal shows a bare "Killed", a ``nohup`` log nothing at all. Run in a child, the parent sees the signal
and reports it with the settings that bound memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from syntra_dspy.errors import SyntraError

#: Set in the child's environment: the command does its work in this process (set it to 1 to keep the work in the
#: process you started, e.g. under a debugger).
CHILD_ENV = "SYNTRA_IN_CHILD"


class ProcessKilled(SyntraError):
    """The child doing a command's work was ended by a signal."""


def in_child() -> bool:
    """Whether this process does the work itself: it is the child a parent started, or ``SYNTRA_IN_CHILD=1``."""
    return os.environ.get(CHILD_ENV) == "1"


def rerun_in_child(argv: Sequence[str], *, what: str, on_kill: str) -> int:
    """Run ``python -m syntra_dspy.cli ARGV`` in a child marked by :data:`CHILD_ENV`; see :func:`run_child`."""
    return run_child([sys.executable, "-m", "syntra_dspy.cli", *argv], what=what, on_kill=on_kill)


def run_child(command: Sequence[str], *, what: str, on_kill: str) -> int:
    """Run ``command`` and return its exit code; raise :class:`ProcessKilled` when a signal ended it (``on_kill``
    says what to change after a SIGKILL, the out-of-memory killer's signal). A Ctrl-C reaches the child too (same
    process group); the parent waits for it to stop. A SIGTERM to the parent is passed on to the child, so that
    stopping the command by its process id stops the work too."""
    proc = subprocess.Popen(list(command), env={**os.environ, CHILD_ENV: "1"})
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: proc.terminate()) if main_thread else None
    try:
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:
                continue
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    if code >= 0:
        return code
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code == signal.SIGKILL:
        raise ProcessKilled(f"{what} was killed by the operating system ({name}), most likely because the machine "
                            "ran out of memory", hint=on_kill)
    raise ProcessKilled(f"{what} was ended by {name}")
