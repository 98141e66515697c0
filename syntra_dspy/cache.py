"""Where syntra-dspy keeps what it assembles once per machine (models), kept apart from any heavy import."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import IO, Any

#: Bytes read at a time when hashing or copying a model file (large models never sit in memory whole).
BLOCK = 8 * 1024 * 1024


def model_cache_dir() -> Path:
    """``$SYNTRA_CACHE_DIR/models`` when the variable is set, else ``~/.cache/syntra-dspy/models``."""
    root = os.environ.get("SYNTRA_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "syntra-dspy"
    return base / "models"


def hash_stream(digest: Any, src: IO[bytes], out: IO[bytes] | None = None) -> None:
    """Feed what is left of ``src`` into ``digest`` (a ``hashlib`` object) block by block, writing each block to
    ``out`` too when given: a file is checked while it is copied or assembled, in one read."""
    while block := src.read(BLOCK):
        digest.update(block)
        if out is not None:
            out.write(block)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        hash_stream(digest, fh)
    return digest.hexdigest()
