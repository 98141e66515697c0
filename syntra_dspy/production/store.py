"""The run store: one SQLite file (WAL) that holds a production run and loses nothing when it is killed.

Why SQLite: a single file users can copy and inspect, transactions that survive ``kill -9``, and readers
(``syntra export --stats``) that work while a run is writing. Each document is one unit of work written
in one transaction (:meth:`RunStore.commit`): either all of its queries, candidates, labels, failures and
LM usage are there, or none are. A document is committed at most once as ``done``; the guard is in SQL,
so even a bug or a second process cannot add its records twice. An advisory lock on the database file
itself keeps a second producer off a store that is being written.

Tables: ``meta`` (JSON values: schema, artifact version and checksum, settings, task definition, retrieval
instruction, selection), ``sessions`` (one row per ``produce`` invocation), ``documents`` (the planned
units, with status, failed stage and error), ``queries``, ``candidates`` (rank, retrieval score, 0-3
label), ``texts`` (the content of every document referred to, so export needs only this file),
``failures`` (every failure with stage, kind and error; ``superseded`` once a retry replaced it),
``usage`` (LM calls, tokens, prompt tokens served from a cached prefix, latency and failures per
session and stage), ``schema_forms`` (per session and role: how structured steps sent their JSON schema, and
whether the server refused it) and ``endpoint_usage`` (per session, role and server address of a role spread
over several servers: answered calls, failures, tokens, health).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.cascade import GradedCandidate
from syntra_dspy.production.store_file import StoreError, StoreLock, check_schema, probe, writable_path
from syntra_dspy.production.units import BackendState, DocumentResult, KeptQuery, KeptWork, WorkUnit

SCHEMA_VERSION = 1
KIND = "syntra-dspy/run-store"
_USAGE_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cached", "failures", "seconds", "cached_prompt_tokens")
_ENDPOINT_FIELDS = ("calls", "failures", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "seconds",
                    "healthy", "last_error")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
    status TEXT NOT NULL DEFAULT 'running', pid INTEGER, concurrency INTEGER, generator TEXT, options TEXT);
CREATE TABLE documents (
    doc_id TEXT PRIMARY KEY, position INTEGER NOT NULL UNIQUE,
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'partial', 'failed')),
    stage TEXT, error_kind TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0, features TEXT,
    n_blueprints INTEGER, n_queries INTEGER, seconds REAL, session_id INTEGER, updated_at TEXT);
CREATE TABLE queries (
    query_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL REFERENCES documents(doc_id), position INTEGER NOT NULL,
    text TEXT NOT NULL, blueprint TEXT NOT NULL, source_rank INTEGER, complete INTEGER NOT NULL,
    UNIQUE (doc_id, position));
CREATE TABLE candidates (
    query_id TEXT NOT NULL REFERENCES queries(query_id), rank INTEGER NOT NULL, doc_id TEXT NOT NULL,
    score REAL NOT NULL, label INTEGER CHECK (label BETWEEN 0 AND 3),
    PRIMARY KEY (query_id, rank), UNIQUE (query_id, doc_id));
CREATE TABLE texts (doc_id TEXT PRIMARY KEY, content TEXT NOT NULL);
CREATE TABLE failures (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER, doc_id TEXT NOT NULL, query_id TEXT,
    stage TEXT NOT NULL, kind TEXT NOT NULL, error TEXT NOT NULL, detail TEXT,
    superseded INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL);
CREATE TABLE usage (
    session_id INTEGER NOT NULL, stage TEXT NOT NULL, calls INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0, completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0, seconds REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, stage));
CREATE INDEX failures_doc ON failures (doc_id);
CREATE INDEX documents_status ON documents (status, position);
"""

#: Tables added after the first release: created by any writer that opens a store, so older stores gain them and
#: readers check that they exist. ``grades``: the graded judgment behind a label (p(0..3), E, the written digit,
#: the calibrated score); ``query_ranks``: where the source document ranks for its query under BM25;
#: ``query_translations``: each query in the documents' language, when candidates came from BM25 over it;
#: ``schema_forms`` and ``endpoint_usage``: how the served generator was reached (see the module docstring);
#: ``judge_skips``: the candidates the judge's cascade labelled without grading them (the rule, the class and the
#: range the score could take; the candidate's BM25 score, which ``grades`` keeps for the graded ones). A labelled
#: candidate with neither a ``grades`` nor a ``judge_skips`` row was labelled by the written judge.
#: ``write_checks``: every query answer the write step checked, in order, per document and query position: the step
#: that gave it (``write``, ``rewrite``, ``code``: fixed without a call) and what became of it (``kept``, or the
#: check it failed); kept for every attempt, so a retried document's earlier calls still count.
#: Columns added the same way (:data:`_ADDED_COLUMNS`): ``usage.cached_prompt_tokens``, ``grades.lexical`` (the
#: candidate's BM25 score, for a hybrid judge) and ``queries.restated_from`` (the question a query restates).
_ADDED = """
CREATE TABLE IF NOT EXISTS grades (
    query_id TEXT NOT NULL, rank INTEGER NOT NULL, p0 REAL, p1 REAL, p2 REAL, p3 REAL, expected REAL,
    written INTEGER, mass REAL, judge_score REAL, PRIMARY KEY (query_id, rank));
CREATE TABLE IF NOT EXISTS query_ranks (query_id TEXT PRIMARY KEY, bm25_source_rank INTEGER);
CREATE TABLE IF NOT EXISTS query_translations (query_id TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schema_forms (
    session_id INTEGER NOT NULL, role TEXT NOT NULL, form TEXT NOT NULL, chosen_by TEXT NOT NULL,
    active TEXT NOT NULL, fallback_reason TEXT, fallback_at TEXT, PRIMARY KEY (session_id, role));
CREATE TABLE IF NOT EXISTS endpoint_usage (
    session_id INTEGER NOT NULL, role TEXT NOT NULL, endpoint TEXT NOT NULL, calls INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0, cached_prompt_tokens INTEGER NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0, healthy INTEGER, last_error TEXT, PRIMARY KEY (session_id, role, endpoint));
CREATE TABLE IF NOT EXISTS write_checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id INTEGER NOT NULL, doc_id TEXT NOT NULL,
    position INTEGER NOT NULL, step TEXT NOT NULL, outcome TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS judge_skips (
    query_id TEXT NOT NULL, rank INTEGER NOT NULL, rule TEXT NOT NULL, class TEXT NOT NULL, low REAL NOT NULL,
    high REAL NOT NULL, lexical REAL, PRIMARY KEY (query_id, rank));
"""
_ADDED_COLUMNS = (("usage", "cached_prompt_tokens", "INTEGER NOT NULL DEFAULT 0"), ("grades", "lexical", "REAL"),
                  ("queries", "restated_from", "TEXT"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class RunStore:
    """A production run on disk. ``RunStore.open(path)`` to write, ``RunStore.open(path, readonly=True)`` to read."""

    def __init__(self, path: Path, conn: sqlite3.Connection, lock: StoreLock | None) -> None:
        self.path, self._conn, self._lock = path, conn, lock

    # ── opening ──

    @classmethod
    def open(cls, path: str | Path, *, readonly: bool = False) -> RunStore:
        """Open (creating it unless ``readonly``) and check the schema; a writer also takes the lock."""
        path = Path(path)
        if readonly:
            if not path.is_file():
                raise StoreError("run store not found", path=path, hint="pass the --store file of `syntra produce`")
            conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, isolation_level=None)
            store = cls(path, conn, None)
            store._check_schema()
            return store
        real = writable_path(path)
        real.parent.mkdir(parents=True, exist_ok=True)
        lock = StoreLock(real)
        lock.acquire()
        try:
            if real.stat().st_size:
                probe(real, kind=KIND)  # before the WAL switch below: a foreign file is refused untouched
            conn = sqlite3.connect(str(real), isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")  # a committed document survives power loss, not only kill -9
            conn.execute("PRAGMA foreign_keys=ON")
            store = cls(path, conn, lock)
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                with store._transaction():
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    store._set_meta(conn, {"schema_version": SCHEMA_VERSION, "kind": KIND, "created_at": _now()})
            store._check_schema()
            with store._transaction():
                for statement in _ADDED.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                for table, column, kind in _ADDED_COLUMNS:
                    if not store.has_column(table, column):
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
            return store
        except BaseException:
            lock.release()
            raise

    def _check_schema(self) -> None:
        check_schema(self._conn, self.path, kind=KIND, version=SCHEMA_VERSION)

    def close(self) -> None:
        self._conn.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transaction(self) -> _Tx:
        return _Tx(self._conn)

    # ── metadata ──

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._conn.execute("SELECT key, value FROM meta")}

    def check_graded_like(self, program: Any, *, path: Path, field: str, use: str, hint: str) -> None:
        """Refuse to read this run's stored grades as ``program``'s (``use``: what for) unless they were made with
        its grading prompt shown the same share of each document, in the same order
        (:func:`~syntra_dspy.artifacts.grading_identity`); a store from before the clip was recorded is checked on the
        prompt and order only (a store that names no order graded query first)."""
        from syntra_dspy.artifacts import grading_identity
        from syntra_dspy.judging.settings import DEFAULT_GRADE_ORDER

        meta = self.meta()
        theirs = ((meta.get("artifact") or {}).get("prompts_sha256") or {}).get("grade")
        clip = (meta.get("settings") or {}).get("max_doc_chars")
        mine = grading_identity(program)
        if theirs != mine["prompt_sha256"]:
            raise ConfigError(f"{use}: this run store was graded with another prompt than the artifact's", path=path,
                              field=field, hint=hint)
        order = (meta.get("judge") or {}).get("grade_order", DEFAULT_GRADE_ORDER)
        if order != mine["grade_order"]:
            raise ConfigError(f"{use}: this run store's judge graded {order}, the artifact's grades "
                              f"{mine['grade_order']}, so its grades are not this judge's", path=path, field=field,
                              hint=hint)
        if clip is not None and clip != mine["max_doc_chars"]:
            raise ConfigError(f"{use}: this run store's judge was shown {clip} characters of each document, the "
                              f"artifact's is shown {mine['max_doc_chars']}, so its grades are not this judge's",
                              path=path, field=field, hint=hint)

    @staticmethod
    def _set_meta(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?) "
                         "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                         [(k, json.dumps(v, sort_keys=True, ensure_ascii=False)) for k, v in values.items()])

    def set_meta(self, **values: Any) -> None:
        with self._transaction():
            self._set_meta(self._conn, values)

    # ── planning ──

    def planned(self) -> list[str]:
        """Planned document ids in selection order."""
        return [r[0] for r in self._conn.execute("SELECT doc_id FROM documents ORDER BY position")]

    def plan(self, doc_ids: Sequence[str]) -> int:
        """Append the ids not planned yet, keeping their order; returns how many were added."""
        with self._transaction():
            start = self._conn.execute("SELECT coalesce(max(position) + 1, 0) FROM documents").fetchone()[0]
            known = {r[0] for r in self._conn.execute("SELECT doc_id FROM documents")}
            new = [d for d in doc_ids if d not in known]
            self._conn.executemany("INSERT INTO documents (doc_id, position) VALUES (?, ?)",
                                   [(d, start + i) for i, d in enumerate(new)])
        return len(new)

    def todo(self, *, retry_failed: bool = False) -> list[WorkUnit]:
        """``(doc_id, resample, kept)`` to process, in plan order: pending documents, those that failed on the
        backend (transient), and with ``retry_failed`` also those whose LM output stayed invalid and the partial ones.

        ``resample`` is the number of earlier attempts for documents whose outputs were the problem (a fresh
        sample is needed: a deterministic model, or a cached answer, would repeat them), else 0. ``kept`` is what
        earlier attempts left (:meth:`kept_work`), so a retry continues from it; None for a document never tried.
        """
        if retry_failed:
            where = "status IN ('pending', 'failed', 'partial')"
        else:
            where = "status = 'pending' OR (status = 'failed' AND error_kind = 'call')"
        rows = self._conn.execute(
            f"SELECT doc_id, status, error_kind, attempts FROM documents WHERE {where} ORDER BY position").fetchall()
        return [(doc_id, attempts if status == "partial" or (status == "failed" and kind != "call") else 0,
                 None if status == "pending" else self.kept_work(doc_id))
                for doc_id, status, kind, attempts in rows]

    def kept_work(self, doc_id: str) -> KeptWork | None:
        """What earlier attempts at ``doc_id`` left: its extracted features and its queries (None: nothing). A
        query counts as complete when it has candidates and every one is labelled (a query kept without candidates,
        e.g. one whose translation failed, is retrieved and labelled again)."""
        row = self._conn.execute("SELECT features FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        queries = tuple(
            KeptQuery(position=pos, text=text, blueprint=json.loads(blueprint), complete=bool(complete),
                      restated_from=restated)
            for pos, text, blueprint, complete, restated in self._conn.execute(
                "SELECT position, text, blueprint, complete AND EXISTS (SELECT 1 FROM candidates c WHERE "
                "c.query_id = q.query_id), restated_from FROM queries q WHERE doc_id=? ORDER BY position",
                (doc_id,)))
        features = json.loads(row[0]) if row is not None and row[0] else None
        return KeptWork(features=features, queries=queries) if features is not None or queries else None

    # ── sessions ──

    def begin_session(self, *, concurrency: int, generator: dict[str, Any], options: dict[str, Any]) -> int:
        """Open a session row. Sessions left ``running`` were killed: this writer holds the lock, so none is alive."""
        with self._transaction():
            self._conn.execute("UPDATE sessions SET status='killed' WHERE status='running' AND finished_at IS NULL")
            cur = self._conn.execute(
                "INSERT INTO sessions (started_at, pid, concurrency, generator, options) VALUES (?, ?, ?, ?, ?)",
                (_now(), os.getpid(), concurrency, json.dumps(generator, sort_keys=True),
                 json.dumps(options, sort_keys=True)))
            return int(cur.lastrowid)

    def end_session(self, session_id: int, status: str) -> None:
        with self._transaction():
            self._conn.execute("UPDATE sessions SET finished_at=?, status=? WHERE id=?", (_now(), status, session_id))

    def sessions(self) -> list[dict[str, Any]]:
        """Every session in order, with its generator, the code it ran (``code``: package version and git commit,
        None where not recorded) and how many documents it was the last to write (``documents``)."""
        written = dict(self._conn.execute(
            "SELECT session_id, count(*) FROM documents WHERE status != 'pending' GROUP BY session_id"))
        cur = self._conn.execute(
            "SELECT id, started_at, finished_at, status, pid, concurrency, generator, options FROM sessions "
            "ORDER BY id")
        cols = [c[0] for c in cur.description]
        rows = [dict(zip(cols, r)) for r in cur]
        for row in rows:
            row["documents"] = written.get(row["id"], 0)
            row["generator"] = json.loads(row["generator"] or "null")
            row["code"] = (json.loads(row.pop("options") or "null") or {}).get("code")
            if row["finished_at"] is None and row["status"] == "running":
                row["status"] = "running or killed"
        return rows

    # ── the unit of work ──

    def commit(self, result: DocumentResult, session_id: int, backend: BackendState | None = None) -> None:
        """Write one document's result in one transaction; refuses to overwrite a document already ``done``.

        ``backend`` (how the generator was reached so far this session) is written in the same transaction."""
        c = self._conn
        with self._transaction():
            if backend is not None:
                self._record_backend(session_id, backend)
            row = c.execute("SELECT status FROM documents WHERE doc_id=?", (result.doc_id,)).fetchone()
            if row is None:
                raise StoreError(f"document {result.doc_id!r} is not planned in this store", path=self.path)
            if row[0] == "done":
                raise StoreError(f"document {result.doc_id!r} is already done; it will not be written twice",
                                 path=self.path)
            if row[0] in ("failed", "partial"):  # a retry replaces the earlier attempt, except the queries it kept
                kept = ",".join(str(int(p)) for p in result.kept)
                replaced = f"doc_id=? AND position NOT IN ({kept})"
                found = {p for (p,) in c.execute("SELECT position FROM queries WHERE doc_id=?", (result.doc_id,))}
                if not set(result.kept) <= found:
                    raise StoreError(f"document {result.doc_id!r}: the retry keeps queries at positions "
                                     f"{sorted(set(result.kept) - found)} that the store does not hold", path=self.path)
                for table in ("candidates", "grades", "judge_skips", "query_ranks", "query_translations"):
                    c.execute(f"DELETE FROM {table} WHERE query_id IN (SELECT query_id FROM queries WHERE {replaced})",
                              (result.doc_id,))
                c.execute(f"DELETE FROM queries WHERE {replaced}", (result.doc_id,))
                c.execute("UPDATE failures SET superseded=1 WHERE doc_id=?", (result.doc_id,))
            elif result.kept:
                raise StoreError(f"document {result.doc_id!r} has no earlier attempt whose queries a retry could keep",
                                 path=self.path)
            c.execute(
                "UPDATE documents SET status=?, stage=?, error_kind=?, error=?, attempts=attempts+1, features=?, "
                "n_blueprints=?, n_queries=?, seconds=?, session_id=?, updated_at=? WHERE doc_id=?",
                (result.status, result.stage, result.error_kind, result.error,
                 None if result.features is None else json.dumps(result.features, ensure_ascii=False),
                 result.n_blueprints, len(result.kept) + len(result.queries), round(result.seconds, 3), session_id,
                 _now(),
                 result.doc_id))
            c.executemany(
                "INSERT INTO queries (query_id, doc_id, position, text, blueprint, source_rank, complete, "
                "restated_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(q.query_id, result.doc_id, q.position, q.text, json.dumps(q.blueprint, ensure_ascii=False),
                  q.source_rank, int(q.complete), q.restated_from) for q in result.queries])
            c.executemany(
                "INSERT INTO candidates (query_id, rank, doc_id, score, label) VALUES (?, ?, ?, ?, ?)",
                [(q.query_id, cand.rank, cand.doc_id, cand.score, cand.label)
                 for q in result.queries for cand in q.candidates])
            graded = [(q.query_id, cand.rank, *(cand.grade.probs or (None,) * 4), cand.grade.expected,
                       cand.grade.written, cand.grade.mass, cand.judge_score, cand.lexical)
                      for q in result.queries for cand in q.candidates if cand.grade is not None]
            c.executemany("INSERT INTO grades (query_id, rank, p0, p1, p2, p3, expected, written, mass, "
                          "judge_score, lexical) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", graded)
            c.executemany("INSERT INTO judge_skips (query_id, rank, rule, class, low, high, lexical) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?)",
                          [(q.query_id, cand.rank, cand.skipped.rule, cand.skipped.klass, cand.skipped.low,
                            cand.skipped.high, cand.lexical)
                           for q in result.queries for cand in q.candidates if cand.skipped is not None])
            c.executemany("INSERT INTO write_checks (session_id, doc_id, position, step, outcome) "
                          "VALUES (?, ?, ?, ?, ?)",
                          [(session_id, result.doc_id, pos, step, outcome)
                           for pos, step, outcome in result.write_checks])
            c.executemany("INSERT INTO query_ranks (query_id, bm25_source_rank) VALUES (?, ?)",
                          [(q.query_id, q.bm25_source_rank) for q in result.queries])
            c.executemany("INSERT INTO query_translations (query_id, text) VALUES (?, ?)",
                          [(q.query_id, q.translation) for q in result.queries if q.translation is not None])
            c.executemany("INSERT OR IGNORE INTO texts (doc_id, content) VALUES (?, ?)", list(result.texts.items()))
            c.executemany(
                "INSERT INTO failures (session_id, doc_id, query_id, stage, kind, error, detail, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(session_id, result.doc_id, f.query_id, f.stage, f.kind, f.error,
                  None if f.detail is None else json.dumps(f.detail), _now()) for f in result.failures])
            self._add_usage(session_id, result.usage)

    def record_backend(self, session_id: int, backend: BackendState) -> None:
        """Record how each role's server was reached this session (its schema form, its endpoints' books)."""
        with self._transaction():
            self._record_backend(session_id, backend)

    def _record_backend(self, session_id: int, backend: BackendState) -> None:
        for role, form in backend.schema_forms.items():
            fallback = form.get("fallback") or {}
            self._conn.execute(
                "INSERT OR REPLACE INTO schema_forms (session_id, role, form, chosen_by, active, fallback_reason, "
                "fallback_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, role, form["form"], form["chosen_by"], form["active"], fallback.get("reason"),
                 fallback.get("at")))
        cols = ", ".join(_ENDPOINT_FIELDS)
        self._conn.executemany(
            f"INSERT OR REPLACE INTO endpoint_usage (session_id, role, endpoint, {cols}) "
            f"VALUES (?, ?, ?, {', '.join('?' * len(_ENDPOINT_FIELDS))})",
            [(session_id, role, endpoint, *(stats.get(f) for f in _ENDPOINT_FIELDS))
             for role, books in backend.endpoints.items() for endpoint, stats in books.items()])

    def _add_usage(self, session_id: int, usage: dict[str, dict[str, Any]]) -> None:
        sets = ", ".join(f"{f} = {f} + excluded.{f}" for f in _USAGE_FIELDS)
        self._conn.executemany(
            f"INSERT INTO usage (session_id, stage, {', '.join(_USAGE_FIELDS)}) "
            f"VALUES (?, ?, {', '.join('?' * len(_USAGE_FIELDS))}) "
            f"ON CONFLICT(session_id, stage) DO UPDATE SET {sets}",
            [(session_id, stage, *(u.get(f, 0) for f in _USAGE_FIELDS)) for stage, u in usage.items()])

    def copy_to(self, path: Path) -> list[str]:
        """Write the committed state to a new standalone SQLite file ``path`` (online backup: one read
        transaction, so a producer writing meanwhile is neither blocked nor half copied) and return SQLite's
        integrity check of the copy (``["ok"]`` when sound)."""
        copy = sqlite3.connect(str(path), isolation_level=None)
        try:
            self._conn.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # no -wal file beside the copy
            return [r[0] for r in copy.execute("PRAGMA integrity_check")]
        finally:
            copy.close()

    # ── reading ──

    def document_counts(self) -> dict[str, int]:
        counts = {"planned": 0, "pending": 0, "done": 0, "partial": 0, "failed": 0}
        for status, n in self._conn.execute("SELECT status, count(*) FROM documents GROUP BY status"):
            counts[status] = n
            counts["planned"] += n
        return counts

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(sql, params).fetchone()[0]

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._conn.execute(sql, params).fetchall()

    def usage(self, session_id: int | None = None) -> dict[str, dict[str, Any]]:
        """Per-stage LM usage for one session, or summed over all sessions, with mean latency per call.

        ``cached_prompt_share`` is taken over ``cached_prompt_basis``, the prompt tokens of the sessions that
        reported cached tokens for the stage: a session whose backend (or release) did not count them says nothing
        about how much was reused, rather than that nothing was."""
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id is not None else ("", ())
        out: dict[str, dict[str, Any]] = {}
        # a store written before the column existed, opened read-only, has no cached prompt tokens to report
        counted = self.has_column("usage", "cached_prompt_tokens")
        sums = ", ".join(f"sum({f})" if f != "cached_prompt_tokens" or counted else "0" for f in _USAGE_FIELDS)
        basis = "sum(CASE WHEN cached_prompt_tokens > 0 THEN prompt_tokens ELSE 0 END)" if counted else "0"
        for stage, *values, reported in self._conn.execute(
                f"SELECT stage, {sums}, {basis} FROM usage {where} GROUP BY stage ORDER BY stage", params):
            u = dict(zip(_USAGE_FIELDS, values))
            u["seconds"] = round(u["seconds"], 3)
            u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
            u["latency_s"] = round(u["seconds"] / u["calls"], 4) if u["calls"] else None
            u["cached_prompt_basis"] = reported
            u["cached_prompt_share"] = round(u["cached_prompt_tokens"] / reported, 4) if reported else None
            out[stage] = u
        return out

    def backend(self, session_id: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """``{"schema_forms": [...], "endpoints": [...]}`` rows per session and role (empty for older stores)."""
        out: dict[str, list[dict[str, Any]]] = {"schema_forms": [], "endpoints": []}
        where, params = ("WHERE session_id = ?", (session_id,)) if session_id is not None else ("", ())
        for key, table in (("schema_forms", "schema_forms"), ("endpoints", "endpoint_usage")):
            if self.has_table(table):
                cur = self._conn.execute(f"SELECT * FROM {table} {where} ORDER BY session_id, role", params)
                cols = [c[0] for c in cur.description]
                out[key] = [dict(zip(cols, r)) for r in cur]
        return out

    def failures(self, *, current: bool = True) -> list[dict[str, Any]]:
        where = "WHERE superseded = 0" if current else ""
        cur = self._conn.execute("SELECT doc_id, query_id, stage, kind, error, detail, session_id "
                                 f"FROM failures {where} ORDER BY id")
        cols = [c[0] for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def iter_queries(self, batch: int = 256) -> Iterator[dict[str, Any]]:
        """Every stored query, in plan order then query order, with its candidates (best rank first).

        Reads documents in batches through the indexes, so a store of millions of candidates is never
        sorted as a whole."""
        docs = [r[0] for r in self._conn.execute(
            "SELECT doc_id FROM documents WHERE status IN ('done', 'partial') ORDER BY position")]
        for start in range(0, len(docs), batch):
            part = docs[start:start + batch]
            order = {doc_id: i for i, doc_id in enumerate(part)}
            marks = ",".join("?" * len(part))
            found: dict[str, dict[str, Any]] = {}
            for qid, doc_id, pos, text, source_rank, complete, rank, cand_id, label in self._conn.execute(
                    "SELECT q.query_id, q.doc_id, q.position, q.text, q.source_rank, q.complete, c.rank, c.doc_id, "
                    f"c.label FROM queries q LEFT JOIN candidates c ON c.query_id = q.query_id "
                    f"WHERE q.doc_id IN ({marks})", part):
                row = found.setdefault(qid, {"query_id": qid, "doc_id": doc_id, "position": pos, "text": text,
                                             "source_rank": source_rank, "complete": bool(complete),
                                             "candidates": []})
                if cand_id is not None:
                    row["candidates"].append((rank, cand_id, label))
            for row in sorted(found.values(), key=lambda r: (order[r["doc_id"]], r["position"])):
                row["candidates"].sort()
                yield row

    def count_records(self) -> int:
        """Complete queries with >= 1 positive (2-3) and >= 1 hard negative (1): what the default export keeps
        before removing queries duplicated across documents. Counted in SQL, cheap on any store size."""
        return self.scalar(
            "SELECT count(*) FROM queries q WHERE q.complete = 1 "
            "AND EXISTS (SELECT 1 FROM candidates c WHERE c.query_id = q.query_id AND c.label >= 2) "
            "AND EXISTS (SELECT 1 FROM candidates c WHERE c.query_id = q.query_id AND c.label = 1)")

    def translations(self) -> dict[str, str]:
        """Query id -> the query in the documents' language (empty unless candidates came from translated BM25)."""
        if not self.has_table("query_translations"):
            return {}
        return dict(self._conn.execute("SELECT query_id, text FROM query_translations ORDER BY query_id"))

    def has_table(self, name: str) -> bool:
        return self.scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)) > 0

    def has_column(self, table: str, column: str) -> bool:
        return any(row[1] == column for row in self._conn.execute(f"PRAGMA table_info({table})"))

    def candidate_evidence(self, query_ids: Sequence[str]) -> dict[str, dict[int, dict[str, Any]]]:
        """Query id -> rank -> what the run knew of each candidate: its retrieval ``cosine`` and, when the judge
        graded it, ``expected`` (E), ``probs`` (p(0..3)), ``score`` (the calibrated score its label was cut from)
        and ``bm25`` (its BM25 score for the query, stored for a hybrid judge). Missing parts are None: a written
        judge grades nothing, and stores made before a column existed lack it."""
        graded = self.has_table("grades")
        lexical = "g.lexical" if graded and self.has_column("grades", "lexical") else "NULL"
        join = "LEFT JOIN grades g ON g.query_id = c.query_id AND g.rank = c.rank" if graded else ""
        if self.has_table("judge_skips"):  # a skipped candidate's BM25 score is kept with the skip
            lexical = f"coalesce({lexical}, s.lexical)"
            join += " LEFT JOIN judge_skips s ON s.query_id = c.query_id AND s.rank = c.rank"
        grade_cols = ("g.p0, g.p1, g.p2, g.p3, g.expected, g.judge_score" if graded
                      else "NULL, NULL, NULL, NULL, NULL, NULL")
        out: dict[str, dict[int, dict[str, Any]]] = {}
        ids = list(dict.fromkeys(query_ids))
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            for qid, rank, cosine, p0, p1, p2, p3, expected, score, bm25 in self._conn.execute(
                    f"SELECT c.query_id, c.rank, c.score, {grade_cols}, {lexical} FROM candidates c {join} "
                    f"WHERE c.query_id IN ({marks})", part):
                out.setdefault(qid, {})[rank] = {
                    "score": score, "expected": expected,
                    "probs": None if p0 is None else [p0, p1, p2, p3], "bm25": bm25, "cosine": cosine}
        return out

    def graded_lists(self, regrades: Mapping[tuple[str, int], float] | None = None) -> list[list[GradedCandidate]]:
        """Every candidate (E, cosine, BM25 score, whether it is the query's own document) of each query whose
        candidates were all graded, in plan order: what a judge cascade's margin can be learned from without
        reference labels.

        ``regrades`` (E by query id and candidate rank) replaces the store's grades: the same production lists
        graded again with another prompt, whose margin is that prompt's; a list counts when every candidate of it
        was regraded."""
        if not self.has_table("grades"):
            return []
        lexical = "g.lexical" if self.has_column("grades", "lexical") else "NULL"
        skips = ""
        if regrades is not None and self.has_table("judge_skips"):  # a skipped candidate's BM25 score is kept there
            lexical = f"COALESCE({lexical}, s.lexical)"
            skips = "LEFT JOIN judge_skips s ON s.query_id = c.query_id AND s.rank = c.rank "
        rows = self._conn.execute(
            f"SELECT c.query_id, c.rank, g.expected, c.score, {lexical}, c.doc_id = q.doc_id FROM candidates c "
            "JOIN queries q USING (query_id) JOIN documents d ON d.doc_id = q.doc_id "
            f"LEFT JOIN grades g ON g.query_id = c.query_id AND g.rank = c.rank {skips}"
            "ORDER BY d.position, q.position, c.rank")
        lists: dict[str, list[GradedCandidate] | None] = {}
        for qid, rank, expected, cosine, bm25, source in rows:
            if regrades is not None:
                expected = regrades.get((qid, rank))
            found = lists.setdefault(qid, [])
            if expected is None or found is None:
                lists[qid] = None  # not every candidate graded: not a whole list
            else:
                found.append(GradedCandidate(expected=expected, cosine=cosine, lexical=bm25, source=bool(source)))
        return [group for group in lists.values() if group]

    def judge_skips(self) -> dict[str, Any]:
        """How many labelled candidates the judge's cascade skipped, by rule and class, next to those graded
        (zeros for a store written before the cascade existed)."""
        graded = self.scalar("SELECT count(*) FROM grades") if self.has_table("grades") else 0
        skipped: dict[str, dict[str, int]] = {}
        if self.has_table("judge_skips"):
            for rule, klass, n in self.rows("SELECT rule, class, count(*) FROM judge_skips GROUP BY rule, class "
                                            "ORDER BY rule, class"):
                skipped.setdefault(rule, {})[klass] = n
        return {"graded": graded, "skipped": sum(n for by in skipped.values() for n in by.values()),
                "by_rule": skipped}

    def write_checks(self) -> dict[str, Any]:
        """What the write step's answers came to: by step and outcome, how the first answer for each query position
        fared, and the rewrite calls made (empty for a store written before they were recorded)."""
        if not self.has_table("write_checks") or not self.scalar("SELECT count(*) FROM write_checks"):
            return {}
        by_step: dict[str, dict[str, int]] = {}
        for step, outcome, n in self.rows("SELECT step, outcome, count(*) FROM write_checks GROUP BY step, outcome "
                                          "ORDER BY step, outcome"):
            by_step.setdefault(step, {})[outcome] = n
        first = dict(self.rows(
            "SELECT outcome, count(*) FROM write_checks w WHERE id = (SELECT min(id) FROM write_checks "
            "WHERE doc_id = w.doc_id AND position = w.position) GROUP BY outcome ORDER BY outcome"))
        return {"by_step": by_step, "first_answer": first,
                "rewrite_calls": sum(by_step.get("rewrite", {}).values())}

    def texts(self, doc_ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        ids = list(dict.fromkeys(doc_ids))
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            out.update(self._conn.execute(f"SELECT doc_id, content FROM texts WHERE doc_id IN ({marks})", part))
        return out


class _Tx:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on any exception (including KeyboardInterrupt)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:  # SQLite may already have rolled back (e.g. on a full disk)
            self.conn.execute("ROLLBACK")


def check_compatible(stored: dict[str, Any], wanted: dict[str, Any], *, path: Path) -> None:
    """Refuse to resume a store with settings that would change its records (an explicit error per field)."""
    for key, value in wanted.items():
        if key in stored and stored[key] != value:
            raise ConfigError(f"this run store was started with {key}={stored[key]!r}, not {value!r}",
                              path=path, field=key,
                              hint="rerun with the original setting to resume, or pass a new --store")
