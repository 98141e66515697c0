"""syntra-dspy: compile a retrieval task into a frozen DSPy synthesis program, then produce training data."""

from __future__ import annotations

__version__ = "0.1.0"

from syntra_dspy.artifacts import Artifact, load_artifact  # noqa: E402
from syntra_dspy.errors import SyntraError  # noqa: E402


def compile_task(*args, **kwargs):  # noqa: D103 - re-exported lazily to keep `import syntra_dspy` light
    from syntra_dspy.compiler import compile_task as _compile

    return _compile(*args, **kwargs)


compile_task.__doc__ = "Compile a task into a frozen, versioned synthesis program (see syntra_dspy.compiler)."

__all__ = ["Artifact", "SyntraError", "__version__", "compile_task", "load_artifact"]
