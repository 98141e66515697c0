"""Training records in, (anchor, positive, negative_1..n) examples out.

Records are what ``syntra export`` writes: JSONL, one ``{"query", "instruction", "pos": [...], "neg": [...],
...}`` object a line, with an optional ``<file>.meta.json`` sidecar saying where they came from; or a
Hugging Face ``datasets.save_to_disk`` folder with the same columns. Bad records fail loudly with the
file, line (or row) and field. Building examples follows the reference loader (FlagEmbedding): one
positive drawn per record, ``n`` hard negatives drawn without replacement, the list repeated first when
it is shorter than ``n``; all draws come from one seeded generator, so the same seed gives the same
examples.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.training.config import check_query_format

if TYPE_CHECKING:
    from datasets import Dataset

    from syntra_dspy.training.teachers import Teacher

T = TypeVar("T")

META_SUFFIX = ".meta.json"
_DIR_META = "meta.json"
_HINT = "training records are written by `syntra export`"


@dataclass(frozen=True)
class TrainingRecord:
    """One exported query with its positive and negative document texts."""

    query: str
    pos: tuple[str, ...]
    neg: tuple[str, ...]
    instruction: str = ""
    query_id: str | None = None
    source_doc_id: str | None = None
    artifact_version: str | None = None
    #: The judge's evidence per positive / negative, in the same order as ``pos``/``neg`` (None where the record
    #: carries none): ``score`` (calibrated), ``expected`` (E), ``probs``, ``bm25``, ``retrieval_score``. What a
    #: distillation teacher (:mod:`syntra_dspy.training.teachers`) is computed from.
    pos_grades: tuple[Mapping[str, Any] | None, ...] = ()
    neg_grades: tuple[Mapping[str, Any] | None, ...] = ()


@dataclass(frozen=True)
class TrainingData:
    """Validated records plus what is known about their origin."""

    records: tuple[TrainingRecord, ...]
    source: str
    format: str  # "jsonl" | "hf-dataset" | "memory"
    sha256: str | None = None
    meta: Mapping[str, Any] | None = None  # the export sidecar (``<file>.meta.json``), when there is one
    meta_path: str | None = None

    def __len__(self) -> int:
        return len(self.records)

    @property
    def artifact_versions(self) -> list[str]:
        """The artifact version(s) the records were produced by: the sidecar's, else the records'."""
        if self.meta and self.meta.get("artifact_version"):
            return [str(self.meta["artifact_version"])]
        return sorted({r.artifact_version for r in self.records if r.artifact_version})

    @property
    def instructions(self) -> list[str]:
        return sorted({r.instruction for r in self.records if r.instruction})

    def provenance(self) -> dict[str, Any]:
        """What a model card and ``training.json`` say about the data."""
        meta = dict(self.meta or {})
        return {
            "source": self.source,
            "format": self.format,
            "sha256": self.sha256,
            "records": len(self.records),
            "artifact_version": ", ".join(self.artifact_versions) or None,
            "artifact_checksum": meta.get("artifact_checksum"),
            "task": meta.get("task"),
            "run_store": meta.get("run_store"),
            "export_options": meta.get("export_options"),
            "export_counts": meta.get("counts"),
            "meta_file": self.meta_path,
        }


def load_training_data(path: str | Path, *, require_negatives: bool = True,
                       require_instruction: bool = False) -> TrainingData:
    """Read and validate records from a JSONL file or a ``save_to_disk`` folder."""
    path = Path(path).expanduser()
    if not path.exists():
        raise InputError("no such file or folder", path=path, hint=_HINT)
    read = _read_hf_dataset if path.is_dir() else _read_jsonl
    records, digest = read(path, require_negatives, require_instruction)
    fmt = "hf-dataset" if path.is_dir() else "jsonl"
    if not records:
        raise InputError("holds no training records", path=path, hint=_HINT)
    meta, meta_path = _read_meta(path)
    return TrainingData(records=tuple(records), source=str(path.resolve()), format=fmt, sha256=digest,
                        meta=meta, meta_path=meta_path)


def records_from_dicts(rows: Iterable[Mapping[str, Any]], *, source: str = "<memory>",
                       require_negatives: bool = True, require_instruction: bool = False) -> TrainingData:
    """Validate records that are already in memory (tests, notebooks)."""
    records = [_parse_record(row, source, None, i + 1, require_negatives, require_instruction)
               for i, row in enumerate(rows)]
    if not records:
        raise InputError("holds no training records", path=source, hint=_HINT)
    return TrainingData(records=tuple(records), source=source, format="memory")


def build_examples(data: TrainingData | Iterable[TrainingRecord], *, num_negatives: int, seed: int,
                   query_format: str | None = None, teacher: Teacher | None = None) -> dict[str, list[Any]]:
    """Columns ``anchor``, ``positive``, ``negative_1`` .. ``negative_n``: one example per record; with a
    ``teacher``, also ``label``: the teacher's score of the drawn positive and of each drawn negative, in that
    order (what the distillation losses read). The draws are the same with and without a teacher."""
    if num_negatives < 0:
        raise ConfigError(f"must be >= 0, got {num_negatives}", field="num_negatives")
    if query_format is not None:
        check_query_format(query_format)
    records = data.records if isinstance(data, TrainingData) else tuple(data)
    source = data.source if isinstance(data, TrainingData) else None
    rng = random.Random(seed)
    columns: dict[str, list[Any]] = {"anchor": [], "positive": []}
    for k in range(1, num_negatives + 1):
        columns[f"negative_{k}"] = []
    if teacher is not None:
        columns["label"] = []
    for i, rec in enumerate(records, start=1):
        if num_negatives and not rec.neg:
            raise InputError(f"record {i} has no negatives", path=source, field="neg",
                             hint="train with num_negatives=0 (in-batch negatives only)")
        anchor = rec.query if query_format is None else query_format.format(
            instruction=rec.instruction, query=rec.query)
        columns["anchor"].append(anchor)
        pos = rng.choice(range(len(rec.pos)))  # the same draw as choosing from the texts
        columns["positive"].append(rec.pos[pos])
        negs = sample_negatives(range(len(rec.neg)), num_negatives, rng)
        for k, j in enumerate(negs, start=1):
            columns[f"negative_{k}"].append(rec.neg[j])
        if teacher is not None:
            pos_scores, neg_scores = teacher.score(rec, record=i, source=source)
            columns["label"].append([pos_scores[pos], *(neg_scores[j] for j in negs)])
    return columns


def build_train_dataset(data: TrainingData, *, num_negatives: int, seed: int,
                        query_format: str | None = None, teacher: Teacher | None = None) -> Dataset:
    """The examples as a ``datasets.Dataset`` in the column order the sentence-transformers losses expect."""
    from datasets import Dataset

    return Dataset.from_dict(build_examples(data, num_negatives=num_negatives, seed=seed,
                                            query_format=query_format, teacher=teacher))


def sample_negatives(neg: Sequence[T], n: int, rng: random.Random) -> list[T]:
    """``n`` negatives without replacement; a shorter list is repeated first (FlagEmbedding's rule)."""
    if n == 0:
        return []
    if not neg:
        raise ValueError("a record without negatives cannot supply hard negatives")
    pool = list(neg)
    if len(pool) < n:
        pool = pool * math.ceil(n / len(pool))
    return rng.sample(pool, n)


# --- reading ---------------------------------------------------------------------------------------


def _read_jsonl(path: Path, *checks: bool) -> tuple[list[TrainingRecord], str]:
    h = hashlib.sha256()
    records: list[TrainingRecord] = []
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            h.update(raw)
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InputError("is not UTF-8 text", path=path, line=lineno) from None
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg}, column {exc.colno})", path=path,
                                 line=lineno, hint="one JSON object per line") from None
            records.append(_parse_record(row, str(path), lineno, None, *checks))
    return records, h.hexdigest()


def _read_hf_dataset(path: Path, *checks: bool) -> tuple[list[TrainingRecord], str]:
    if not ((path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()):
        st = (path / "data").is_dir() and any((path / "data").glob("train-*.parquet"))
        raise InputError("is a folder but not a Hugging Face dataset saved with save_to_disk"
                         + (" (an `export --format st` dataset, for sentence-transformers' own trainer)" if st else ""),
                         path=path, hint="pass the exported .jsonl file or the save_to_disk folder (--format hf)")
    from datasets import DatasetDict, load_from_disk

    try:
        ds = load_from_disk(str(path))
    except Exception as exc:  # noqa: BLE001 - datasets raises many types for a damaged folder
        raise InputError(f"cannot load the dataset: {exc}".splitlines()[0], path=path) from None
    if isinstance(ds, DatasetDict):
        if "train" not in ds:
            raise InputError(f"a DatasetDict needs a 'train' split, found {sorted(ds)}", path=path)
        ds = ds["train"]
    missing = [c for c in ("query", "pos") if c not in ds.column_names]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; found {ds.column_names}",
                         path=path, field=missing[0], hint=_HINT)
    records = [_parse_record(row, str(path), None, i + 1, *checks) for i, row in enumerate(ds)]
    return records, _hash_folder(path)


def _hash_folder(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _read_meta(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    candidates = [path.with_name(path.name + META_SUFFIX)]
    if path.is_dir():
        candidates.append(path / _DIR_META)
    for meta_path in candidates:
        if not meta_path.is_file():
            continue
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"not valid JSON: {exc}", path=meta_path) from None
        if not isinstance(meta, dict):
            raise InputError(f"must be a JSON object, got {type(meta).__name__}", path=meta_path)
        return meta, str(meta_path.resolve())
    return None, None


# --- validation ------------------------------------------------------------------------------------


def _parse_record(row: Any, path: str, line: int | None, index: int | None, require_negatives: bool,
                  require_instruction: bool) -> TrainingRecord:
    where = f"row {index}: " if index is not None else ""

    def fail(message: str, field: str | None = None, hint: str | None = None) -> InputError:
        return InputError(where + message, path=path, line=line, field=field, hint=hint)

    if not isinstance(row, Mapping):
        raise fail(f"a record must be a JSON object, got {type(row).__name__}")
    query = row.get("query")
    if query is None:
        raise fail("missing", field="query", hint=_HINT)
    if not isinstance(query, str) or not query.strip():
        raise fail(f"must be a non-empty string, got {_show(query)}", field="query")
    pos = _texts(row, "pos", fail, minimum=1)
    neg = _texts(row, "neg", fail, minimum=1 if require_negatives else 0)
    instruction = row.get("instruction", row.get("prompt"))
    if instruction is None:
        instruction = ""
    if not isinstance(instruction, str):
        raise fail(f"must be a string, got {_show(instruction)}", field="instruction")
    if require_instruction and not instruction.strip():
        raise fail("is empty, but the query format uses {instruction}", field="instruction",
                   hint="train without an instruction prefix, or export records with instructions")
    pos_grades = _grades(row, "pos", len(pos), fail)
    neg_grades = _grades(row, "neg", len(neg), fail)
    return TrainingRecord(
        query=query, pos=pos, neg=neg, instruction=instruction.strip(),
        query_id=_opt_str(row.get("query_id")), source_doc_id=_opt_str(row.get("source_doc_id")),
        artifact_version=_opt_str(row.get("artifact_version")), pos_grades=pos_grades, neg_grades=neg_grades,
    )


def _grades(row: Mapping[str, Any], side: str, n: int, fail: Any) -> tuple[Mapping[str, Any] | None, ...]:
    """Each positive's (or negative's) grade: its entry in ``labels`` (matched by ``pos_ids``/``neg_ids``), with
    ``score`` from ``pos_scores``/``neg_scores``. Records of other tools may carry only the scores, or nothing."""
    scores = row.get(f"{side}_scores")
    if scores is not None:
        if not isinstance(scores, (list, tuple)) or len(scores) != n:
            raise fail(f"must be a list of {n} numbers (one per {side} text), got {_show(scores)}",
                       field=f"{side}_scores")
        for i, value in enumerate(scores):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise fail(f"must be a finite number or null, got {_show(value)}", field=f"{side}_scores[{i}]")
    ids, labels = row.get(f"{side}_ids"), row.get("labels")
    by_id: dict[str, Mapping[str, Any]] = {}
    if isinstance(labels, list) and isinstance(ids, (list, tuple)) and len(ids) == n:
        by_id = {str(g["doc_id"]): g for g in labels if isinstance(g, Mapping) and "doc_id" in g}
    if scores is None and not by_id:
        return ()
    out = []
    for i in range(n):
        grade = dict(by_id.get(str(ids[i]), {})) if by_id else {}
        if scores is not None:
            grade["score"] = scores[i]
        out.append(grade or None)
    return tuple(out)


def _texts(row: Mapping[str, Any], field: str, fail: Any, *, minimum: int) -> tuple[str, ...]:
    value = row.get(field)
    if value is None:
        if minimum == 0:
            return ()
        raise fail("missing", field=field, hint=_HINT)
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise fail(f"must be a list of texts, got {_show(value)}", field=field)
    for i, text in enumerate(value):
        if not isinstance(text, str) or not text.strip():
            raise fail(f"must be a non-empty string, got {_show(text)}", field=f"{field}[{i}]")
    if len(value) < minimum:
        hint = "or train with num_negatives=0 (in-batch negatives only)" if field == "neg" else None
        raise fail(f"must hold at least {minimum} text(s), got none", field=field, hint=hint)
    return tuple(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
