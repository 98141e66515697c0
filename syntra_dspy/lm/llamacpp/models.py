"""The embedded models' registry and assembly now live with every model shipped as PyPI parts
(:mod:`syntra_dspy.models`); these names stay importable from here for callers of the old path."""

from __future__ import annotations

from syntra_dspy.models.install import ensure_gguf
from syntra_dspy.models.registry import DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS, EmbeddedModel, get_embedded_model

__all__ = ["DEFAULT_EMBEDDED_MODEL", "EMBEDDED_MODELS", "EmbeddedModel", "ensure_gguf", "get_embedded_model"]
