"""A comparison's finished rows on disk, so an interrupted comparison picks up where it stopped.

A comparison on the embedded model takes half a day (SciFact: ~13 h for four rows on 2 CPU cores), longer than
one sitting of a machine. Each row's compiled artifact, and once scored its result, is recorded under
``OUT/rows/LABEL.json`` with a fingerprint of everything that decides it: the task, the comparison's settings, the
row's strategy and options, the LM roles and the encoder (and for a result, the held-out material). Run again with
the same inputs, a row whose record matches is taken as it is (its artifact is loaded and verified again; its
compile cost is the manifest's, as first measured); a record that does not match is ignored and overwritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

logger = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    """A JSON-ready form of ``value`` that says the same for the same setting on every run (no object ids)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=json.dumps) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return type(value).__name__


def fingerprint(*parts: Any) -> str:
    """sha256 of the parts' JSON form."""
    text = json.dumps([_plain(p) for p in parts], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RowCheckpoints:
    """The rows a comparison under ``folder`` (its ``out``) has compiled and scored, for inputs of fingerprint
    ``key``. ``enabled=False`` reads nothing (a fresh comparison) but still records."""

    def __init__(self, folder: Path, key: str, *, enabled: bool = True) -> None:
        self.folder, self.key, self.enabled = folder / "rows", key, enabled

    def _path(self, label: str) -> Path:
        return self.folder / f"{label}.json"

    def _read(self, label: str) -> dict[str, Any]:
        path = self._path(label)
        if not self.enabled or not path.is_file():
            return {}
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            logger.warning("compare: ignoring the unreadable row record %s (%s)", path, exc)
            return {}
        if record.get("key") != self.key:
            logger.info("compare: row %s was recorded for other inputs; it is made again", label)
            return {}
        return record

    def _write(self, label: str, record: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self._path(label).with_suffix(".json.tmp")
        tmp.write_text(json.dumps({"key": self.key, **record}, indent=2, ensure_ascii=False, default=str) + "\n",
                       encoding="utf-8")
        tmp.replace(self._path(label))

    def _shown(self, artifact: Path) -> str:
        """The artifact's path relative to the comparison's folder (a copy of the folder elsewhere still finds
        the artifacts beside it), or absolute when it lies on another drive."""
        try:
            return os.path.relpath(Path(artifact).resolve(), self.folder.parent.resolve())
        except ValueError:
            return str(Path(artifact).resolve())

    def artifact(self, label: str) -> Path | None:
        """The artifact this row compiled for these inputs, if it is still there."""
        path = self._read(label).get("artifact")
        if path and (self.folder.parent / path).is_dir():
            return self.folder.parent / path
        return None

    def compiled(self, label: str, artifact: Path) -> None:
        self._write(label, {"artifact": self._shown(artifact)})

    def result(self, label: str, material: str) -> dict[str, Any] | None:
        """The row's scored result, if it was scored on held-out material of fingerprint ``material``."""
        record = self._read(label)
        if record.get("material") == material and isinstance(record.get("result"), dict):
            return record["result"]
        return None

    def scored(self, label: str, artifact: Path, material: str, result: dict[str, Any]) -> None:
        self._write(label, {"artifact": self._shown(artifact), "material": material, "result": result})
