"""Queries to leave out of an evaluation: a file of query ids, or a task file's few-shot queries.

A task's few-shot examples were seen while compiling the synthesis program, so evaluating on them
would flatter the model. A task YAML is matched by query *text* (Unicode NFKC, case-folded,
whitespace collapsed) against the dataset's queries, since task files hold texts, not ids.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from syntra_dspy.errors import InputError

logger = logging.getLogger(__name__)

TASK_SUFFIXES = (".yaml", ".yml")


def normalize_query(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def read_query_ids(path: str | Path) -> list[str]:
    """One query id per line (the first whitespace-separated token); blank lines and ``#`` comments skip."""
    path = Path(path)
    if not path.is_file():
        raise InputError("exclusion file not found", path=path)
    ids: list[str] = []
    for raw in path.read_text(encoding="utf-8-sig").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            ids.append(line.split()[0])
    return ids


def task_query_ids(path: str | Path, queries: Mapping[str, str]) -> list[str]:
    """Ids of the dataset queries whose text equals one of the task's example queries."""
    from syntra_dspy.task import load_task

    task = load_task(path)
    by_text: dict[str, list[str]] = {}
    for qid, text in queries.items():
        by_text.setdefault(normalize_query(text), []).append(qid)
    ids: list[str] = []
    unmatched = []
    for example in task.examples:
        found = by_text.get(normalize_query(example.query))
        if found:
            ids.extend(found)
        else:
            unmatched.append(example.query)
    if unmatched:
        logger.warning("%d of %d few-shot queries in %s are not among the dataset's queries, so nothing "
                       "is excluded for them: %s", len(unmatched), len(task.examples), path,
                       "; ".join(q[:60] for q in unmatched))
    return list(dict.fromkeys(ids))


def load_exclusions(path: str | Path, queries: Mapping[str, str]) -> set[str]:
    """Query ids to exclude: from a task YAML (``.yaml``/``.yml``, matched by text) or an id list."""
    path = Path(path)
    if path.suffix.lower() in TASK_SUFFIXES:
        return set(task_query_ids(path, queries))
    ids = read_query_ids(path)
    unknown = [q for q in ids if q not in queries]
    if unknown:
        logger.warning("%d excluded query ids from %s are not in the dataset (e.g. %s)", len(unknown), path,
                       ", ".join(unknown[:3]))
    return set(ids)


def resolve_exclusions(exclude: Iterable[str] | str | Path | None, queries: Mapping[str, str]) -> set[str]:
    """``None`` -> nothing; a path -> :func:`load_exclusions`; an iterable -> those ids."""
    if exclude is None:
        return set()
    if isinstance(exclude, (str, Path)):
        return load_exclusions(exclude, queries)
    return {str(q) for q in exclude}
