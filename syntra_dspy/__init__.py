"""syntra-dspy: compile a retrieval task into a frozen DSPy synthesis program, then produce training data."""

from __future__ import annotations

__version__ = "0.1.0"

from typing import Any  # noqa: E402

from syntra_dspy.errors import SyntraError  # noqa: E402


def __getattr__(name: str) -> Any:
    """``Artifact`` and ``load_artifact`` on first use: importing them loads DSPy, which ``syntra --help`` and
    every light command should not pay for."""
    if name in ("Artifact", "load_artifact"):
        from syntra_dspy import artifacts

        return getattr(artifacts, name)
    raise AttributeError(f"module 'syntra_dspy' has no attribute {name!r}")


def compile_task(*args, **kwargs):  # noqa: D103 - re-exported lazily to keep `import syntra_dspy` light
    from syntra_dspy.compiler import compile_task as _compile

    return _compile(*args, **kwargs)


compile_task.__doc__ = "Compile a task into a frozen, versioned synthesis program (see syntra_dspy.compiler)."

__all__ = ["Artifact", "SyntraError", "__version__", "compile_task", "load_artifact"]
