"""``export_records``: a run store → training records (JSONL, a Hugging Face ``datasets`` folder, or a Parquet
dataset sentence-transformers trains on as it is) + a dataset card + a sidecar.

Every stored query is considered, not only a document's first; a query becomes a record when it has at
least one positive and one usable negative under the chosen options, and every other query is counted
under a drop reason. Output order is plan order then query order, so the same store and options always
give byte-identical JSONL (a resumed run exports exactly what an uninterrupted one would). Files are
written to a temporary name and renamed, so a crash never leaves a half-written export behind.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.outputs import (
    Protected,
    atomic_write_text,
    check_output_file,
    check_replaceable_folder,
    read_marker,
    swap_folder_into_place,
)
from syntra_dspy.production.dataset_card import CardFacts, render_card
from syntra_dspy.production.owned import run_inputs
from syntra_dspy.production.records import (
    DROP_REASONS,
    FOLDER_FORMATS,
    ExportConfig,
    ExportOptions,
    normalise_query,
    retrieval_instruction,
    select_candidates,
)
from syntra_dspy.production.query_quality import query_quality
from syntra_dspy.production.relabel import Relabeller, load_relabeller
from syntra_dspy.production.store import RunStore
from syntra_dspy.redact import redact
from syntra_dspy.signatures.types import label_class

META_SUFFIX = ".meta.json"
#: The marker a folder export (``hf``, ``st``) leaves in its folder, listing the files it wrote: only such a
#: folder is replaced.
EXPORT_MARKER, HF_KIND, ST_KIND = "syntra-export.json", "syntra-export-hf", "syntra-export-st"
CARD_FILE = "README.md"
_BATCH = 256


@dataclass
class ExportSummary:
    """What an export wrote (or, for stats, would write) and why the other queries were left out."""

    out: str | None
    format: str
    records: int = 0
    queries: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    positives: int = 0
    negatives: int = 0
    meta_path: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    splits: dict[str, int] = field(default_factory=dict)  # records (st: rows) per split
    card_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("out", "format", "records", "queries", "dropped", "positives",
                                               "negatives", "meta_path", "options", "splits", "card_path")}


def _records(store: RunStore, options: ExportOptions, summary: ExportSummary,
             relabeller: Relabeller | None = None) -> Iterator[dict[str, Any]]:
    """Records in output order; counts queries and drop reasons into ``summary`` as it goes. With a
    ``relabeller`` the candidates' labels come from its judge, applied to the grades the run stored."""
    meta = store.meta()
    version = meta.get("artifact", {}).get("version")
    instruction = options.instruction if options.instruction is not None else meta.get("instruction") or \
        retrieval_instruction(meta.get("task_definition", {}))
    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    batch: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def flush() -> Iterator[dict[str, Any]]:
        texts = store.texts([d for row, picked in batch
                             for d in (row["doc_id"], *picked["pos_ids"], *picked["neg_ids"])])
        evidence = store.candidate_evidence([row["query_id"] for row, _ in batch])
        for row, picked in batch:
            summary.records += 1
            summary.positives += len(picked["pos_ids"])
            summary.negatives += len(picked["neg_ids"])
            graded = candidate_grades(row, evidence.get(row["query_id"], {}))
            score = {g["doc_id"]: g["score"] for g in graded}
            yield {
                "query": row["text"], "instruction": instruction, "prompt": instruction,
                "pos": [texts[d] for d in picked["pos_ids"]], "neg": [texts[d] for d in picked["neg_ids"]],
                "pos_scores": [score.get(d) for d in picked["pos_ids"]],
                "neg_scores": [score.get(d) for d in picked["neg_ids"]],
                "pos_ids": picked["pos_ids"], "neg_ids": picked["neg_ids"], "source_doc_id": row["doc_id"],
                "query_id": row["query_id"], "artifact_version": version, "labels": graded,
                "source_retrieved": picked["source_retrieved"], "source_label": picked["source_label"],
                "source_in_pos": picked["source_in_pos"],
            }
        batch.clear()

    for row in store.iter_queries():
        summary.queries += 1
        if relabeller is not None:
            row = relabeller.relabel(store, row)
        picked, reason = select_candidates(row, options)
        if picked is not None:
            key = normalise_query(row["text"])
            if key in seen:
                picked, reason = None, "duplicate_query"
            seen.add(key)
        if picked is None:
            dropped[reason or "unknown"] += 1
            continue
        batch.append((row, picked))
        if len(batch) >= _BATCH:
            yield from flush()
    yield from flush()
    summary.dropped = {r: dropped.get(r, 0) for r in DROP_REASONS}


#: What each entry of a record's ``labels`` holds, in the candidates' retrieval order: the judge's label (0-3) and
#: calibrated ``score`` (the teacher score ``pos_scores``/``neg_scores`` repeat), and the parts it was made of:
#: ``expected`` (E = sum k p(k)), ``probs`` (p(0..3)), ``bm25`` (the candidate's BM25 score for the query, stored for
#: a hybrid judge) and ``retrieval_score`` (what retrieval ranked it by: the cosine for dense candidates).
GRADE_FIELDS = ("doc_id", "rank", "label", "score", "expected", "probs", "bm25", "retrieval_score")


def candidate_grades(row: dict[str, Any], evidence: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The judged candidates of one stored query with their grades (``GRADE_FIELDS``), best rank first. A
    relabelled row (``syntra export --relabel-with``) carries its judge's scores in ``row["scores"]`` by rank."""
    rescored = row.get("scores") or {}
    out = []
    for rank, doc_id, label in row["candidates"]:
        if label is None:
            continue
        found = evidence.get(rank, {})
        out.append({"doc_id": doc_id, "rank": rank, "label": label,
                    "score": rescored.get(rank, found.get("score")), "expected": found.get("expected"),
                    "probs": found.get("probs"), "bm25": found.get("bm25"), "retrieval_score": found.get("cosine")})
    return out


def _hf_features() -> Any:
    from datasets import Features, List, Value

    texts, scores = List(Value("string")), List(Value("float64"))
    return Features({
        "query": Value("string"), "instruction": Value("string"), "prompt": Value("string"), "pos": texts,
        "neg": texts, "pos_scores": scores, "neg_scores": scores, "pos_ids": texts, "neg_ids": texts,
        "source_doc_id": Value("string"), "query_id": Value("string"), "artifact_version": Value("string"),
        "labels": List({"doc_id": Value("string"), "rank": Value("int32"), "label": Value("int8"),
                        "score": Value("float64"), "expected": Value("float64"), "probs": scores,
                        "bm25": Value("float64"), "retrieval_score": Value("float64")}),
        "source_retrieved": Value("bool"), "source_label": Value("int8"), "source_in_pos": Value("bool"),
    })


def export_records(store: str | Path, out: str | Path, config: ExportConfig | None = None, *,
                   overwrite: bool = False, command: str | None = None, **settings: Any) -> ExportSummary:
    """Write the records of a run store to ``out`` (a JSONL file; a ``save_to_disk`` folder for ``hf``; a Parquet
    dataset folder for ``st``), a ``README.md`` dataset card (inside a folder, ``<out>.README.md`` beside a file)
    and ``<out>.meta.json`` with the artifact version and checksum, the run store, options and counts.

    ``config`` (an :class:`ExportConfig`) holds the settings; a caller may pass its fields as keywords instead
    (``export_records(store, out, num_negatives=3)``), not both. Among them: ``judge``, an artifact recalibrated
    from the run's (same grading prompt) whose judge labels the candidates from the grades the run stored, instead
    of the labels production wrote (nothing is graded again); ``dev_split``, a fraction of the source documents
    (drawn with ``seed``) whose records go to a ``dev`` split instead of ``train``: a document's queries are never
    in both (``jsonl``: ``<stem>.dev.jsonl`` beside ``out``; ``st``: a second Parquet file). ``command``: the
    command line, for the card.

    Works on a store that a run is still writing (it exports what is committed). ``out``, its card and its sidecar
    are checked before anything is written: never the run store (or its WAL and lock files), the corpus or the
    artifact; never a symlink, directory or FIFO; an existing output only with ``overwrite`` (a folder only when
    an earlier export wrote it).
    """
    config = ExportConfig.of_call(config, settings)
    format, judge, dev_split, seed, options = config.format, config.judge, config.dev_split, config.seed, config.options
    out = Path(out)
    summary = ExportSummary(out=str(out), format=format, options=options.to_dict())
    with RunStore.open(store, readonly=True) as run:
        meta = run.meta()
        relabeller = load_relabeller(run, judge) if judge is not None else None
        protected = run_inputs(Path(store), meta)  # the store and its companions, the corpus, the artifact
        meta_path = out.with_name(out.name + META_SUFFIX)
        card_path = out / CARD_FILE if format in FOLDER_FORMATS else out.with_name(f"{out.name}.{CARD_FILE}")
        dev_path = dev_file(out) if format == "jsonl" and dev_split is not None else None
        if format in FOLDER_FORMATS:
            _check_folder_out(out, protected, overwrite)
        else:
            for path in (out, card_path, *([dev_path] if dev_path else [])):
                check_output_file(path, protected=protected, overwrite=overwrite)
        check_output_file(meta_path, protected=protected, overwrite=overwrite)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp_dir = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        try:
            jsonl = tmp_dir / "records.jsonl"
            with jsonl.open("w", encoding="utf-8") as fh:
                for record in _records(run, options, summary, relabeller):
                    fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            dev_docs, split_info = (set(), None) if dev_split is None else _dev_documents(jsonl, dev_split, seed)
            counts = {"records": summary.records, "queries": summary.queries, "dropped": summary.dropped,
                      "positives": summary.positives, "negatives": summary.negatives,
                      "documents": run.document_counts()}
            quality = data_quality(run)
            made_by = provenance(run, run.sessions())
            card = CardFacts(
                meta=meta, quality=quality, fmt=format, options=options.to_dict(), counts=counts, dev_split=split_info,
                judge=relabeller.judge.describe() if relabeller else meta.get("judge", {"mode": "written"}),
                relabelled=relabeller.report() if relabeller else None,
                command=command or _python_call(store, out, format, options, judge, dev_split, seed))
            if format == "jsonl":
                summary.splits = _write_jsonl_splits(jsonl, dev_path, dev_docs)
                files = {"train": out.name, **({"dev": dev_path.name} if dev_path else {})}
                atomic_write_text(card_path, render_card(card, splits=summary.splits, files=files,
                                                         labels_included=None))
                os.replace(jsonl, out)
            elif format == "hf":
                summary.splits = {"train": summary.records}
                _write_hf(jsonl, tmp_dir, render_card(card, splits=summary.splits, files={}, labels_included=None))
                swap_folder_into_place(tmp_dir / "dataset", out)
            else:
                summary.splits, files, labelled = _write_st(jsonl, tmp_dir / "dataset", options.num_negatives,
                                                            dev_docs)
                _finish_folder(tmp_dir / "dataset", ST_KIND, render_card(
                    card, splits=summary.splits, files=files, labels_included=labelled))
                swap_folder_into_place(tmp_dir / "dataset", out)  # checked by _check_folder_out
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    summary.meta_path, summary.card_path = str(meta_path), str(card_path)
    sidecar = {
        "artifact_version": meta.get("artifact", {}).get("version"),
        "artifact_checksum": meta.get("artifact", {}).get("checksum"),
        "task": meta.get("artifact", {}).get("task"),
        "run_store": str(Path(store).resolve()),
        "export_options": options.to_dict(),
        "labels_from": (relabeller.report() if relabeller is not None
                        else {"artifact": f"{meta.get('artifact', {}).get('task')}/"
                                          f"{meta.get('artifact', {}).get('version')}", "relabelled": 0}),
        "format": format,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "counts": counts,
        "splits": summary.splits,
        "dev_split": split_info,
        "card": str(card_path),
        "command": card.command,
        "quality": quality,
        "provenance": made_by,
    }
    atomic_write_text(meta_path, json.dumps(sidecar, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    return summary


def dev_file(out: Path) -> Path:
    """Where a JSONL export's dev split goes: ``train.jsonl`` -> ``train.dev.jsonl``."""
    return out.with_name(f"{out.stem}.dev{out.suffix}" if out.suffix else f"{out.name}.dev")


def _python_call(store: str | Path, out: Path, format: str, options: ExportOptions, judge: Any,
                 dev_split: float | None, seed: int) -> str:
    """What the card says made an export that did not come from the command line."""
    given = {"format": format, **options.to_dict(), "judge": judge, "dev_split": dev_split,
             "seed": seed if dev_split is not None else None}
    shown = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    return f"export_records({str(store)!r}, {str(out)!r}, {shown})"


def _dev_documents(jsonl: Path, fraction: float, seed: int) -> tuple[set[str], dict[str, Any]]:
    """The source documents whose records form the dev split: ``round(fraction x documents)`` of those with
    records (at least one, and never all), drawn with ``seed`` from their sorted ids."""
    with jsonl.open(encoding="utf-8") as fh:
        documents = sorted({json.loads(line)["source_doc_id"] for line in fh})
    if len(documents) < 2:
        raise ConfigError(f"a dev split needs records from two source documents or more; this export has "
                          f"{len(documents)}", field="dev-split", hint="export without --dev-split")
    picked = min(max(1, round(fraction * len(documents))), len(documents) - 1)
    dev = set(random.Random(seed).sample(documents, picked))
    return dev, {"fraction": fraction, "seed": seed, "documents": picked, "of_documents": len(documents),
                 "by": "source_doc_id"}


def _split_of(record: dict[str, Any], dev_docs: set[str]) -> str:
    return "dev" if record["source_doc_id"] in dev_docs else "train"


def _write_jsonl_splits(jsonl: Path, dev_path: Path | None, dev_docs: set[str]) -> dict[str, int]:
    """Move the dev records of ``jsonl`` (in place) to ``dev_path``; returns the records per split."""
    counts = {"train": 0, **({"dev": 0} if dev_path else {})}
    train, dev = jsonl.with_suffix(".train"), jsonl.with_suffix(".dev")
    with jsonl.open(encoding="utf-8") as src, train.open("w", encoding="utf-8") as t, \
            dev.open("w", encoding="utf-8") as d:
        for line in src:
            split = _split_of(json.loads(line), dev_docs)
            (d if split == "dev" else t).write(line)
            counts[split] += 1
    os.replace(train, jsonl)
    if dev_path is not None:
        os.replace(dev, dev_path)
    return counts


def st_row(record: dict[str, Any], n: int) -> dict[str, Any]:
    """One ``st`` row: ``anchor`` (the query), ``positive`` (the first positive), ``negative_1..n`` (the record's
    negatives in rank order, repeated when it has fewer than ``n``: ``ST_NEGATIVES_RULE``) and ``label`` (the
    judge's scores of those texts, in that order; None when any is missing)."""
    picks = [k % len(record["neg"]) for k in range(n)]
    scores = [record["pos_scores"][0], *(record["neg_scores"][k] for k in picks)]
    row = {"anchor": record["query"], "positive": record["pos"][0]}
    row.update({f"negative_{i}": record["neg"][k] for i, k in enumerate(picks, start=1)})
    row["label"] = None if any(s is None for s in scores) else scores
    return row


def _write_st(jsonl: Path, folder: Path, n: int,
              dev_docs: set[str]) -> tuple[dict[str, int], dict[str, str], bool]:
    """The Parquet files of an ``st`` export in ``folder/data``; returns the rows per split, each split's file
    pattern and whether the rows carry ``label`` (only when every row has every score)."""
    import pyarrow as pa  # a dependency of datasets
    import pyarrow.parquet as pq

    rows: dict[str, list[dict[str, Any]]] = {"train": [], **({"dev": []} if dev_docs else {})}
    with jsonl.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            rows[_split_of(record, dev_docs)].append(st_row(record, n))
    labelled = all(r["label"] is not None for split in rows.values() for r in split) and any(rows.values())
    schema = pa.schema([(name, pa.string()) for name in ("anchor", "positive",
                                                         *(f"negative_{k}" for k in range(1, n + 1)))]
                       + ([("label", pa.list_(pa.float32()))] if labelled else []))
    (folder / "data").mkdir(parents=True)
    files, counts = {}, {}
    for split, split_rows in rows.items():
        table = pa.Table.from_pylist([{k: r[k] for k in schema.names} for r in split_rows], schema=schema)
        pq.write_table(table, folder / "data" / f"{split}-00000-of-00001.parquet")
        files[split], counts[split] = f"data/{split}-*.parquet", len(split_rows)
    return counts, files, labelled


def _check_folder_out(out: Path, protected: list[Protected], overwrite: bool) -> None:
    """A dataset folder replaces ``out`` whole: refuse anything but an earlier export's folder (``hf`` or ``st``)."""
    for item in protected:
        if item.covers(out) or out.resolve() in item.path.resolve().parents:
            raise ConfigError(f"holds or is the {item.label} ({item.path}); refusing to replace it", path=out,
                              field="out", hint="choose another output folder")
    stamp = read_marker(out / EXPORT_MARKER) if out.is_dir() else None
    kind = stamp.get("kind") if stamp is not None and stamp.get("kind") in (HF_KIND, ST_KIND) else HF_KIND
    check_replaceable_folder(out, marker=EXPORT_MARKER, kind=kind, what="a dataset folder `syntra export` wrote",
                             field="out", hint="choose another --out")
    if not out.exists() or not any(out.iterdir()):
        return
    if not overwrite:
        raise ConfigError("already exists", path=out, field="out",
                          hint="pass --overwrite to replace it, or choose another path")


def _finish_folder(staged: Path, kind: str, card: str) -> None:
    """Add the card and the marker (listing every file and folder the export wrote, the card included) to
    ``staged``: only a folder with that marker is ever replaced by a later export."""
    (staged / CARD_FILE).write_text(card, encoding="utf-8")
    written = sorted(p.name for p in staged.iterdir())
    (staged / EXPORT_MARKER).write_text(json.dumps({"kind": kind, "files": written}, indent=2) + "\n",
                                        encoding="utf-8")


def _write_hf(jsonl: Path, tmp_dir: Path, card: str) -> None:
    """The records of ``jsonl`` as a ``save_to_disk`` folder ``tmp_dir/dataset``, with its card and marker."""
    try:
        from datasets import Dataset
    except ImportError:
        from syntra_dspy.errors import DependencyError

        raise DependencyError("Hugging Face datasets is not installed", hint="pip install 'datasets>=3'") from None
    features = _hf_features()
    if jsonl.stat().st_size:
        ds = Dataset.from_json(str(jsonl), features=features, cache_dir=str(tmp_dir / "cache"))
    else:
        ds = Dataset.from_dict({name: [] for name in features}, features=features)
    ds.save_to_disk(str(tmp_dir / "dataset"))
    _finish_folder(tmp_dir / "dataset", HF_KIND, card)


def compute_stats(store: str | Path, *, negatives: str = "hard", num_negatives: int = 7, positives: str = "all",
                  include_unretrieved_source: bool = False, include_partial: bool = False,
                  qrels: str | Path | None = None) -> dict[str, Any]:
    """Counts, label distribution, source-document outcomes, failures by stage, LM usage, drop reasons and the
    data-quality report (:func:`data_quality`)."""
    options = ExportOptions(negatives=negatives, num_negatives=num_negatives, positives=positives,
                            include_unretrieved_source=include_unretrieved_source, include_partial=include_partial)
    with RunStore.open(store, readonly=True) as run:
        meta = run.meta()
        sessions = run.sessions()
        summary = count_records(run, options)
        labels = {str(k): 0 for k in (3, 2, 1, 0)}
        for label, n in run.rows("SELECT label, count(*) FROM candidates WHERE label IS NOT NULL GROUP BY label"):
            labels[str(label)] = n
        classes = Counter()
        for label, n in labels.items():
            classes[label_class(int(label))] += n
        failures = run.failures(current=True)
        source = {
            "retrieved": run.scalar("SELECT count(*) FROM queries WHERE source_rank IS NOT NULL"),
            "not_retrieved": run.scalar("SELECT count(*) FROM queries WHERE source_rank IS NULL"),
            "judged_positive": run.scalar(
                "SELECT count(*) FROM queries q JOIN candidates c ON c.query_id = q.query_id "
                "AND c.rank = q.source_rank WHERE c.label >= 2"),
        }
        return {
            "store": str(store),
            "artifact": meta.get("artifact", {}),
            "settings": meta.get("settings", {}),
            "documents": run.document_counts(),
            "queries": summary.queries,
            "candidates": {"labelled": sum(labels.values()),
                           "unlabelled": run.scalar("SELECT count(*) FROM candidates WHERE label IS NULL")},
            "labels": labels,
            "classes": {k: classes.get(k, 0) for k in ("positive", "hard_negative", "easy_negative")},
            "source": source,
            "failures": {"total": len(failures), "by_stage": dict(Counter(f["stage"] for f in failures)),
                         "by_kind": dict(Counter(f["kind"] for f in failures)),
                         "superseded": len(run.failures(current=False)) - len(failures)},
            "records": summary.records,
            "dropped": summary.dropped,
            "translations": len(run.translations()),
            "export_options": options.to_dict(),
            "usage": run.usage(),
            "judge_calls": run.judge_skips(),
            "write_checks": run.write_checks(),
            "backend": run.backend(),
            "sessions": sessions,
            "provenance": provenance(run, sessions),
            "quality": data_quality(run, qrels=qrels),
        }


def provenance(run: RunStore, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """What made a store's records: the generator, and every code version its sessions ran with the documents each
    was the last to write. A run resumed across versions holds records of each, and reproducing it needs them all
    (the SciFact production store: nine commits over 24 sessions). ``sessions``: ``run.sessions()``."""
    versions: dict[str, dict[str, Any]] = {}
    for session in sessions:
        code = session.get("code") or {}
        key = code.get("git_commit") or code.get("syntra_dspy") or "unrecorded"
        version = versions.setdefault(key, {"git_commit": code.get("git_commit"),
                                            "syntra_dspy": code.get("syntra_dspy"), "uncommitted_changes": False,
                                            "sessions": 0, "documents": 0, "last_session": None})
        version["uncommitted_changes"] |= bool(code.get("git_dirty"))
        version["sessions"] += 1
        version["documents"] += session["documents"]
        version["last_session"] = session["id"]
    return {"generator": run.meta().get("generator"),
            "sessions": [{k: session[k] for k in ("id", "started_at", "finished_at", "status", "code", "documents")}
                         for session in sessions],
            "code_versions": sorted(versions.values(), key=lambda v: v["last_session"])}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def data_quality(run: RunStore, *, qrels: str | Path | None = None) -> dict[str, Any]:
    """What the records are likely to teach: the judge and its label distribution, how often a query's own
    document is the first hit (under the dense index and under BM25: such queries mostly repeat its words), the
    queries' form and near-duplicates (:func:`query_quality`), and, given qrels for the produced queries (by query
    id), the labels' agreement with them."""
    meta = run.meta()
    queries = run.scalar("SELECT count(*) FROM queries")
    ranks: dict[str, Any] = {"queries": queries,
                             "dense_rank1": _share(run.scalar("SELECT count(*) FROM queries WHERE source_rank = 0"),
                                                   queries)}
    definition = meta.get("task_definition") or {}
    across = definition.get("query_language", "en") != definition.get("document_language", "en")
    if run.has_table("query_ranks"):
        # Across languages BM25 reads a query only in the documents' language: rank the translated queries alone
        # (an English query over Chinese abstracts matches nothing, and would read as "never first").
        found = run.rows("SELECT query_id, bm25_source_rank FROM query_ranks")
        if across:
            translated = set(run.translations())
            found = [(qid, rank) for qid, rank in found if qid in translated]
        ranked = len(found)
        ranks["bm25_rank1"] = _share(sum(rank == 0 for _, rank in found), ranked)
        ranks["bm25_top10"] = _share(sum(rank is not None and rank < 10 for _, rank in found), ranked)
        ranks["bm25_ranked_queries"] = ranked
        ranks.update(_source_judged(run, found))
        ranks["bm25_queries"] = "translated into the documents' language" if across else "as written"
    else:
        ranks["bm25_rank1"] = None  # produced before BM25 ranks were recorded
    quality: dict[str, Any] = {"judge": meta.get("judge", {"mode": "written"}), "source_ranks": ranks,
                               "queries": query_quality(run)}
    if run.has_table("grades") and run.scalar("SELECT count(*) FROM grades"):
        mean_e, mean_mass, graded, with_probs = run.rows(
            "SELECT avg(expected), avg(mass), count(*), count(p0) FROM grades")[0]
        quality["grades"] = {"candidates": graded, "with_probabilities": with_probs,
                             "mean_expected": None if mean_e is None else round(mean_e, 4),
                             "mean_label_mass": None if mean_mass is None else round(mean_mass, 4)}
    if qrels is not None:
        from syntra_dspy.judging.agreement import label_agreement
        from syntra_dspy.evaluation.trec import read_qrels

        judged = read_qrels(qrels)
        gold, pred = [], []
        for qid, doc_id, label in run.rows("SELECT query_id, doc_id, label FROM candidates WHERE label IS NOT NULL"):
            if doc_id in judged.get(qid, {}):
                gold.append("positive" if judged[qid][doc_id] >= 1 else "hard_negative")
                pred.append(label_class(int(label)))
        quality["qrels_agreement"] = {"qrels": str(qrels), "pairs": len(gold),
                                      **(label_agreement(gold, pred) if gold else {})}
    return quality


def _source_judged(run: RunStore, found: list[tuple[str, int | None]]) -> dict[str, float | None]:
    """Whether the judge calls a query's own document relevant, split by whether BM25 finds it first.

    A low BM25-first share is only worth having among queries their document answers: a small writer lowers it
    mostly with generic statements their document does not support (on the SciFact run, at 209 queries, the judge
    called the source relevant for 93% of the queries BM25 found it first for, and for 27% of the others).
    ``*_source_positive``: the share of those queries whose source is labelled positive (not retrieved counts as
    not); ``bm25_rank1_among_source_positive``: the BM25-first share among the queries whose source is positive."""
    labels = dict(run.rows("SELECT q.query_id, c.label FROM queries q JOIN candidates c "
                           "ON c.query_id = q.query_id AND c.doc_id = q.doc_id WHERE c.label IS NOT NULL"))
    positive = {qid: (labels.get(qid) or 0) >= 2 for qid, _ in found}
    first = [positive[qid] for qid, rank in found if rank == 0]
    lower = [positive[qid] for qid, rank in found if rank != 0]
    supported = [rank == 0 for qid, rank in found if positive[qid]]
    return {"bm25_rank1_source_positive": _share(sum(first), len(first)),
            "bm25_lower_source_positive": _share(sum(lower), len(lower)),
            "bm25_rank1_among_source_positive": _share(sum(supported), len(supported))}


def list_failures(store: str | Path) -> list[dict[str, Any]]:
    """The failures that still stand (not superseded by a retry), in order, with their detail parsed and any
    credential in an address masked (a store written by an older version may hold one)."""
    with RunStore.open(store, readonly=True) as run:
        failures = run.failures(current=True)
    for failure in failures:
        failure["error"] = redact(failure["error"] or "")
        failure["detail"] = json.loads(redact(failure["detail"])) if failure["detail"] else None
    return failures


class _NoTexts:
    """Stats need ids and counts only: skip fetching document texts."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def texts(self, doc_ids: list[str]) -> dict[str, str]:
        return dict.fromkeys(doc_ids, "")


def count_records(store: RunStore, options: ExportOptions | None = None) -> ExportSummary:
    """Queries, records and drop reasons an export with ``options`` (default: the defaults) would give."""
    options = options or ExportOptions()
    summary = ExportSummary(out=None, format="-", options=options.to_dict())
    for _ in _records(_NoTexts(store), options, summary):
        pass
    return summary


def format_stats(stats: dict[str, Any]) -> str:
    """The stats as a short human-readable report."""
    a, d, u = stats["artifact"], stats["documents"], stats["usage"]
    failures = stats["failures"]
    by_stage = ", ".join(f"{k} {v}" for k, v in sorted(failures["by_stage"].items()))
    lines = [
        f"run store {stats['store']}: artifact {a.get('task')}/{a.get('version')}",
        (f"documents  planned {d['planned']}, done {d['done']}, partial {d['partial']}, failed {d['failed']}, "
         f"pending {d['pending']}"),
        (f"queries    {stats['queries']}; candidates labelled {stats['candidates']['labelled']}, "
         f"unlabelled {stats['candidates']['unlabelled']}"),
        ("labels     " + ", ".join(f"{k}: {v}" for k, v in stats["labels"].items())
         + " (" + ", ".join(f"{k} {v}" for k, v in stats["classes"].items()) + ")"),
        (f"source doc retrieved {stats['source']['retrieved']}, not retrieved {stats['source']['not_retrieved']}, "
         f"judged positive {stats['source']['judged_positive']}"),
        (f"failures   {failures['total']}" + (f" ({by_stage})" if failures["total"] else "")
         + (f"; {failures['superseded']} superseded by retries" if failures["superseded"] else "")),
        f"records    {stats['records']} exportable with {_options_text(stats['export_options'])}",
        "dropped    " + ", ".join(f"{k} {v}" for k, v in stats["dropped"].items()),
    ]
    if stats.get("provenance"):
        lines.append(_code_line(stats["provenance"]))
    q = stats["quality"]
    judge, ranks = q["judge"], q["source_ranks"]
    pct = lambda v: "—" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    judge_text = judge.get("mode", "written") + (" (calibrated)" if judge.get("calibrated") else
                                                 " (uncalibrated)" if judge.get("mode") == "graded" else "")
    if judge.get("fallback"):
        judge_text += f"; fallback: {judge['fallback']}"
    if judge.get("calibration_grader"):
        grader = judge["calibration_grader"]
        judge_text += (f"; calibrated on grades of {grader['fitted_on']}, graded by {grader['grading_with']} "
                       "(syntra artifacts recalibrate --generator refits it)")
    lines.append(f"judge      {judge_text}")
    calls = stats.get("judge_calls") or {}
    if calls.get("skipped") or judge.get("cascade"):
        lines.append(_cascade_line(calls, judge.get("cascade") or {}))
    retrieval = (stats.get("settings") or {}).get("candidates") or {"source": "dense"}
    if retrieval["source"] == "bm25-translated":
        translated = (f"; {stats.get('translations', 0)} of {stats['queries']} queries translated"
                      if retrieval.get("translation") else "")
        lines.append(f"candidates BM25 over {retrieval.get('bm25_language')} documents{translated}")
    bm25 = f"{pct(ranks.get('bm25_rank1'))} (BM25)"
    if ranks.get("bm25_queries", "as written") != "as written":
        bm25 = (f"{pct(ranks.get('bm25_rank1'))} (BM25 over the {ranks.get('bm25_ranked_queries', 0)} queries "
                "translated into the documents' language)" if ranks.get("bm25_ranked_queries") else
                "— (BM25: no query was translated into the documents' language)")
    lines.append(f"difficulty source document is the first hit for {pct(ranks['dense_rank1'])} of queries "
                 f"({retrieval['source']} candidates), {bm25}")
    if ranks.get("bm25_ranked_queries"):
        lines.append(f"           judged relevant to its query for {pct(ranks.get('bm25_rank1_source_positive'))} "
                     f"of the queries BM25 finds it first for, {pct(ranks.get('bm25_lower_source_positive'))} of "
                     f"the others; BM25 finds it first for {pct(ranks.get('bm25_rank1_among_source_positive'))} of "
                     "the queries it is judged relevant to")
    written, shape = q["queries"], q["queries"]["form"]
    shown = f" ({shape['kind']}, {shape['min_length']}-{shape['max_length']} {shape['unit']})" if shape else ""
    lines.append(f"form       {pct(written['in_form'])} of queries have the examples' form{shown}; "
                 f"{pct(written['near_duplicates'])} nearly duplicate another query of their document"
                 + (f"; {pct(written['restated'])} rewritten from a rejected query (a question, a copied passage)"
                    if written.get("restated") is not None else ""))
    checks = stats.get("write_checks") or {}
    if checks:
        lines.append(_writing_line(checks))
    if "grades" in q:
        g = q["grades"]
        lines.append(f"grades     {g['candidates']} graded ({g['with_probabilities']} with label probabilities), "
                     f"mean E {g['mean_expected']}, mean label-token mass {g['mean_label_mass']}")
    if "qrels_agreement" in q:
        a = q["qrels_agreement"]
        kappa = a.get("binary", {}).get("kappa")
        lines.append(f"qrels      {a['pairs']} judged pairs; binary kappa "
                     f"{'—' if kappa is None else f'{kappa:.3f}'}")
    for stage, s in u.items():
        lat = f", {s['latency_s']:.3f} s/call" if s["latency_s"] is not None else ""
        cached = ""
        if s.get("cached_prompt_tokens"):
            cached = f", {pct(s['cached_prompt_share'])} of prompt tokens reused from a cached prefix"
            if s.get("cached_prompt_basis", s["prompt_tokens"]) < s["prompt_tokens"]:
                cached += " (in the sessions that counted it)"
        lines.append(f"usage      {stage:<9} {s['calls']} calls, {s['prompt_tokens']}+{s['completion_tokens']} tokens"
                     f", {s['failures']} failed calls{lat}{cached}")
    lines.extend(_backend_lines(stats.get("backend") or {}))
    if stats.get("teaching"):
        from syntra_dspy.training import TrainConfig
        from syntra_dspy.training.signal import format_signal

        t = stats["teaching"]
        lines.extend(format_signal(t, encoder=t["encoder"], config=TrainConfig(
            temperature=t["temperature"], teacher_scale=t["teacher_scale"])))
    return "\n".join(lines)


def _writing_line(checks: dict[str, Any]) -> str:
    """How the write step's first answers fared, by the check that rejected them, and what fixing them took."""
    first = checks["first_answer"]
    total = sum(first.values()) or 1
    failed = ", ".join(f"{k} {100 * n / total:.0f}%" for k, n in sorted(first.items(), key=lambda kv: -kv[1])
                       if k != "kept")
    steps = checks["by_step"]
    code = steps.get("code", {}).get("kept", 0)
    rewrites = steps.get("rewrite", {})
    return (f"writing    {100 * first.get('kept', 0) / total:.0f}% of first answers kept"
            + (f" (rejected: {failed})" if failed else "")
            + f"; {code} fixed in code, {checks['rewrite_calls']} rewrite calls ({rewrites.get('kept', 0)} kept)")


def _cascade_line(calls: dict[str, Any], cascade: dict[str, Any]) -> str:
    """How many grading calls the judge's cascade skipped (one per candidate labelled without a grade), by rule."""
    skipped, graded = calls.get("skipped", 0), calls.get("graded", 0)
    rules = "; ".join(f"{rule}: " + ", ".join(f"{k} {v}" for k, v in by.items())
                      for rule, by in (calls.get("by_rule") or {}).items())
    now = cascade.get("mode")
    if now == "margin":
        now += (f" (coverage {cascade.get('coverage')}, learned from {cascade.get('lists')} lists of the "
                f"{cascade.get('learned_from')})")
    share = f" ({100 * skipped / (skipped + graded):.0f}%)" if skipped + graded else ""
    return (f"cascade    {skipped} of {skipped + graded} grading calls skipped{share}"
            + (f" ({rules})" if rules else "") + (f"; last session's rule: {now}" if now else ""))


def _code_line(made_by: dict[str, Any], shown: int = 4) -> str:
    """The code versions a store's documents were written with, latest last ("bb5c537 (12 documents)")."""
    versions = made_by["code_versions"]
    sessions = sum(v["sessions"] for v in versions)

    def name(v: dict[str, Any]) -> str:
        label = (v["git_commit"] or "")[:7] or (f"version {v['syntra_dspy']}" if v["syntra_dspy"] else "unrecorded")
        return label + (" with uncommitted changes" if v["uncommitted_changes"] else "")

    listed = ", ".join(f"{name(v)} ({v['documents']} documents)" for v in versions[-shown:])
    more = f"{len(versions) - shown} earlier, " if len(versions) > shown else ""
    return (f"code       {len(versions)} version{'s' if len(versions) != 1 else ''} over {sessions} "
            f"session{'s' if sessions != 1 else ''}: {more}{listed}")


def _backend_lines(backend: dict[str, list[dict[str, Any]]]) -> list[str]:
    """How structured steps sent their schema, and each endpoint's books, per session."""
    lines = []
    for f in backend.get("schema_forms", []):
        fell = f" → none since {f['fallback_at']} ({f['fallback_reason']})" if f["fallback_reason"] else ""
        lines.append(f"schema     session {f['session_id']} {f['role']}: {f['form']} ({f['chosen_by']}){fell}")
    for e in backend.get("endpoints", []):
        state = "healthy" if e["healthy"] else f"failing ({e['last_error']})"
        lines.append(f"endpoint   session {e['session_id']} {e['role']} {e['endpoint']}: {e['calls']} calls, "
                     f"{e['failures']} failed, {e['prompt_tokens']}+{e['completion_tokens']} tokens, {state}")
    return lines


def _options_text(options: dict[str, Any]) -> str:
    return (f"--negatives {options['negatives']} --num-negatives {options['num_negatives']} "
            f"--positives {options['positives']}"
            + (" --include-unretrieved-source" if options["include_unretrieved_source"] else "")
            + (" --include-partial" if options["include_partial"] else ""))


def teaching_stats(store: str | Path, encoder: str, **options: Any) -> dict[str, Any]:
    """What the records an export with ``options`` would write can still teach ``encoder`` before training
    (:mod:`syntra_dspy.training.signal`): its InfoNCE loss on them, the share of positives it already ranks
    first, and where each teacher the records' grades allow orders their candidates differently from it."""
    from syntra_dspy.retrieval.encoder import load_encoder
    from syntra_dspy.training import TrainConfig, records_from_dicts
    from syntra_dspy.training.signal import score_records, summarise

    summary = ExportSummary(out=None, format="-", options=ExportOptions(**options).to_dict())
    with RunStore.open(store, readonly=True) as run:
        rows = list(_records(run, ExportOptions(**options), summary))
    if not rows:
        raise ConfigError("the run has no exportable records to measure", path=store, field="encoder",
                          hint="measure once the run has records (see the counts above)")
    config = TrainConfig()
    model = load_encoder(encoder)
    return {"encoder": model.name, "temperature": config.temperature, "teacher_scale": config.teacher_scale,
            **summarise(score_records(records_from_dicts(rows, source=str(store)).records, model, config=config))}
