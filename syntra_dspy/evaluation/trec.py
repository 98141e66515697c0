"""TREC run and qrels files, read and written as plain dict-of-dicts (what ir_measures accepts).

``Run``   = ``{query_id: {doc_id: score}}``
``Qrels`` = ``{query_id: {doc_id: gain}}``

Readers fail on the first malformed line with an :class:`InputError` naming the file, the line and the
column. Qrels may be TREC qrels (``qid iter docid gain``, whitespace separated, as NeuCLIRTech's
``qrels.gains.txt``) or BEIR TSV (``query-id<TAB>corpus-id<TAB>score`` with a header line).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from syntra_dspy.errors import InputError

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]

_RUN_COLUMNS = ("topic_id", "Q0", "doc_id", "rank", "score", "tag")
_QRELS_COLUMNS = ("topic_id", "iteration", "doc_id", "gain")
_BEIR_HEADER = ("query-id", "corpus-id", "score")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if not path.is_file():
        raise InputError("file not found", path=path)
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").strip()
            except UnicodeDecodeError as exc:
                raise InputError(f"not valid UTF-8 ({exc.reason})", path=path, line=lineno) from None
            if line:
                yield lineno, line


def read_run(path: str | Path) -> Run:
    """Read a TREC run (``topic_id Q0 doc_id rank score tag``); the rank column is checked, not used.

    Like trec_eval and ir_measures, ordering comes from the score (ties: doc id, descending).
    """
    path = Path(path)
    run: Run = {}
    for lineno, line in _lines(path):
        cols = line.split()
        if len(cols) != 6:
            raise InputError(f"found {len(cols)} columns, expected 6", path=path, line=lineno,
                             hint="TREC run lines are 'topic_id Q0 doc_id rank score tag'")
        qid, _, doc_id, rank, score, _ = cols
        try:
            int(rank)
        except ValueError:
            raise InputError(f"rank must be an integer, got {rank!r}", path=path, line=lineno,
                             field="rank") from None
        try:
            value = float(score)
        except ValueError:
            raise InputError(f"score must be a number, got {score!r}", path=path, line=lineno,
                             field="score") from None
        docs = run.setdefault(qid, {})
        if doc_id in docs:
            raise InputError(f"document {doc_id!r} appears twice for query {qid!r}", path=path,
                             line=lineno, field="doc_id", hint="a run lists each document once per query")
        docs[doc_id] = value
    if not run:
        raise InputError("the run file is empty", path=path)
    return run


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """(doc_id, score) in trec_eval order: score descending, then doc id descending."""
    return sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)


def write_run(run: Mapping[str, Mapping[str, float]], path: str | Path, *, tag: str) -> Path:
    """Write ``run`` as a TREC run file, atomically; ranks follow the order trec_eval scores in.

    Scores are written in full (shortest round-trip form), so rereading the file gives the same run and
    no ties appear that the in-memory run did not have. ``tag`` (the run name, e.g. the model) must be
    one token; whitespace in it is replaced by ``_``.
    """
    path = Path(path)
    tag = "_".join(str(tag).split()) or "syntra"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            for qid in sorted(run, key=_natural):
                for rank, (doc_id, score) in enumerate(ranked(run[qid]), start=1):
                    fh.write(f"{qid} Q0 {doc_id} {rank} {float(score)!r} {tag}\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels (``qid iter docid gain``) or BEIR qrels TSV (header ``query-id corpus-id score``)."""
    path = Path(path)
    qrels: Qrels = {}
    beir = False
    for lineno, line in _lines(path):
        cols = line.split("\t") if "\t" in line else line.split()
        cols = [c.strip() for c in cols]
        if lineno == 1 and tuple(c.lower() for c in cols) == _BEIR_HEADER:
            beir = True
            continue
        if beir:
            if len(cols) != 3:
                raise InputError(f"found {len(cols)} columns, expected 3", path=path, line=lineno,
                                 hint="BEIR qrels lines are 'query-id<TAB>corpus-id<TAB>score'")
            qid, doc_id, gain = cols
        else:
            if len(cols) != 4:
                raise InputError(f"found {len(cols)} columns, expected 4", path=path, line=lineno,
                                 hint="TREC qrels lines are 'topic_id 0 doc_id gain' (BEIR TSV needs its "
                                      "'query-id corpus-id score' header)")
            qid, _, doc_id, gain = cols
        try:
            value = int(gain)
        except ValueError:
            raise InputError(f"gain must be an integer, got {gain!r}", path=path, line=lineno,
                             field="score" if beir else "gain") from None
        qrels.setdefault(qid, {})[doc_id] = value
    if not qrels:
        raise InputError("the qrels file has no judgments", path=path)
    return qrels


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> Path:
    """Write TREC qrels (``qid 0 docid gain``), e.g. to hand BEIR judgments to trec_eval."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for qid in sorted(qrels, key=_natural):
            for doc_id, gain in qrels[qid].items():
                fh.write(f"{qid} 0 {doc_id} {int(gain)}\n")
    return path


def _natural(qid: str) -> tuple[int, int | str]:
    """Numeric ids in numeric order, then the rest alphabetically."""
    return (0, int(qid)) if qid.isdigit() else (1, qid)
