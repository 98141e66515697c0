"""Where syntra-dspy keeps what it assembles once per machine (models), kept apart from any heavy import."""

from __future__ import annotations

import os
from pathlib import Path


def model_cache_dir() -> Path:
    """``$SYNTRA_CACHE_DIR/models`` when the variable is set, else ``~/.cache/syntra-dspy/models``."""
    root = os.environ.get("SYNTRA_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "syntra-dspy"
    return base / "models"
