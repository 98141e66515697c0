"""Which code made a run: the package version and, when the package runs from a git checkout, its commit.

A production run can span sessions and code changes; each session records this next to its options, so a record
can be traced to the code that wrote it. Nothing is required: outside a checkout, or without git, the commit is None.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any


def code_version() -> dict[str, Any]:
    """``{"syntra_dspy": version, "git_commit": sha or None, "git_dirty": bool or None}`` (dirty: tracked files
    differ from the commit)."""
    from syntra_dspy import __version__

    info: dict[str, Any] = {"syntra_dspy": __version__, "git_commit": None, "git_dirty": None}
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():  # a directory in a clone, a file in a worktree
        return info
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return info
    info.update(git_commit=head or None, git_dirty=bool(status.strip()))
    return info
