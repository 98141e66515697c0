"""Shared pieces for the produce/export tests (no tests here): one compiled mini artifact per session,
and a scripted brain that misbehaves on purpose for chosen documents."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from syntra_dspy.testing import SyntraBrain

from helpers import compile_mini

_COMPILED: dict[str, Any] = {}


def mini_artifact(tmp_path_factory, judge: str = "written", feature: str = "expected") -> tuple[Path, Path]:
    """(artifact dir, index dir) of the mini task compiled once per test session with the scripted brain.

    ``written`` (most production tests: annotation in chunks with local ids) or ``graded`` (one candidate per
    call, label-token probabilities, a fitted calibration of score ``feature``)."""
    key = judge if feature == "expected" else f"{judge}-{feature}"
    if key not in _COMPILED:
        root = tmp_path_factory.getbasetemp() / f"produce-mini-{key}"
        root.mkdir(exist_ok=True)
        artifact, _ = compile_mini(root, judge=judge, judge_feature=feature)
        _COMPILED[key] = (artifact.path, root / "index")
    return _COMPILED[key]


def derived_version(original, root, **components) -> Path:
    """A version of ``original`` (a loaded artifact) with some components replaced, saved as ``syntra artifacts
    recalibrate`` does."""
    from syntra_dspy.artifacts import save_artifact

    manifest = {k: v for k, v in original.manifest.items()
                if k not in ("version", "program_id", "prompts", "schema_version", "kind")}
    return save_artifact(original.program.with_components(**components), manifest, root)


def prefix(text: str, n: int = 60) -> str:
    return " ".join(text.split())[:n]


class SabotageBrain(SyntraBrain):
    """SyntraBrain, except for documents chosen by their opening words:

    - ``bad_extract``: extraction always returns no identifiers (fails validation every time);
    - ``chinese_always``: queries always come back in Chinese (the task wants English);
    - ``chinese_once``: Chinese on the first try, English once a repair note says why;
    - ``bad_plan``: the planner gets its first blueprint right and names an option no dimension offers in every
      other one (every try, sampled or not: a planner that repeats its mistake);
    - ``bad_labels``: for the first query written for the document, the annotator skips a candidate in one
      chunk (the first to arrive) on every try, so exactly one chunk of that query stays unlabelled;
    - ``chinese_second``: the query for blueprint 1 comes back in Chinese on every try (the other blueprints'
      queries are fine), so the document ends partial with that position empty;
    - ``chinese_hot``: every query written at a temperature above 0 comes back in Chinese, whoever asks (the
      program's in-call retries and ``--retry-failed`` alike): a writer a fresh sample does not fix.

    A call sampled at a temperature above 0 by ``--retry-failed`` gets SyntraBrain's own answer (a fresh
    sample fixes it); the program's own in-call retries (sampled with a frequency penalty) stay sabotaged,
    so a document can still end up failed.
    """

    def __init__(self, *, bad_extract=(), chinese_always=(), chinese_once=(), bad_labels=(), bad_plan=(),
                 chinese_second=(), chinese_hot=()) -> None:
        super().__init__()
        self._call = threading.local()
        self.bad_extract = {prefix(t) for t in bad_extract}
        self.chinese_always = {prefix(t) for t in chinese_always}
        self.chinese_once = {prefix(t) for t in chinese_once}
        self.bad_labels = {prefix(t) for t in bad_labels}
        self.bad_plan = {prefix(t) for t in bad_plan}
        self.chinese_second = {prefix(t) for t in chinese_second}
        self.chinese_hot = {prefix(t) for t in chinese_hot}
        self.plan_calls: dict[str, int] = {}
        self.plan_answers: dict[str, list] = {}  # the first (sabotaged) plan answer per document
        self.bad_queries: set[str] = set()
        self.bad_chunks: dict[str, str] = {}

    def __call__(self, call):
        self._call.hot = (call.options.get("temperature") or 0) > 0
        self._call.sampled = self._call.hot and "frequency_penalty" not in call.options
        return super().__call__(call)

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        doc = prefix(inputs.get("document", ""))
        if name == "plan" and doc in self.bad_plan:
            self.plan_calls[doc] = self.plan_calls.get(doc, 0) + 1
            answer = {"blueprints": [bp if i == 0 else {**bp, "choices": [{**c, "option": "made-up option"}
                                                                           for c in bp["choices"]]}
                                     for i, bp in enumerate(answer["blueprints"])]}
            self.plan_answers.setdefault(doc, answer["blueprints"])
        if name == "write" and doc in self.chinese_hot and getattr(self._call, "hot", False):
            return name, {"queries": [{"blueprint": q["blueprint"], "query": f"关于{i}号研究的证据"}
                                      for i, q in enumerate(answer["queries"])]}
        if getattr(self._call, "sampled", False):
            return name, answer
        if name == "extract" and doc in self.bad_extract:
            answer = {"identifiers": [], "attributes": answer["attributes"]}
        if name == "write":
            retry = bool(inputs.get("retry_note", "").strip())
            if doc in self.chinese_always or (doc in self.chinese_once and not retry):
                answer = {"queries": [{"blueprint": q["blueprint"], "query": f"关于{i}号研究的证据"}
                                      for i, q in enumerate(answer["queries"])]}
            if doc in self.chinese_second:
                answer = {"queries": [{**q, "query": "关于第二个蓝图的证据"} if q["blueprint"] == 1 else q
                                      for q in answer["queries"]]}
            if doc in self.bad_labels and answer["queries"]:
                self.bad_queries.add(answer["queries"][0]["query"])
        query = inputs.get("query")
        if name == "annotate" and query in self.bad_queries:
            chunk = self.bad_chunks.setdefault(query, inputs.get("candidates", ""))
            if chunk == inputs.get("candidates", ""):
                answer = {"judgements": answer["judgements"][1:]}
        return name, answer


def rows(db: Path, sql: str, params=()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
