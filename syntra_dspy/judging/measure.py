"""Measuring a relevance judge on judged candidates: the judgment log, each judge's agreement and ranking scores,
the paired bootstrap between two judges, and the reliability chart.

Every judgment is appended to ``judgments.jsonl`` as soon as it is made, keyed by artifact, judge mode, query and
document, so a long run resumes where it stopped and two judges can be compared on exactly the same candidates.
The whole measurement (``syntra agreement``), which opens artifacts with production's loader, is
:func:`syntra_dspy.comparison.judge_agreement.measure_agreement`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from syntra_dspy.judging.agreement import label_agreement, paired_kappa_bootstrap
from syntra_dspy.judging.calibration import best_cut, roc_auc
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate, Judgment, RelevanceJudge
from syntra_dspy.signatures.types import label_class


def log_key(artifact: str, judge: str, c: JudgedCandidate) -> str:
    """The key of a candidate's row in a judgment log: artifact version, judge (:func:`judge_key`), query, document."""
    return f"{artifact}|{judge}|{c.query_id}|{c.doc_id}"


def judge_key(judge: RelevanceJudge) -> str:
    """How a judge's judgments are keyed in the log: its mode, and the grade order when the document comes first
    (its grades are another prompt's, so neither order's row may stand for the other's)."""
    return judge.mode if not judge.groups_by_document else f"{judge.mode}:{judge.grade_order}"


class JudgmentLog:
    """The append-only record of judgments made (one JSON line each), read back to resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.done[row["key"]] = row

    def add(self, row: dict[str, Any]) -> None:
        self.done[row["key"]] = row
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _as_candidate(c: JudgedCandidate, text: str) -> Candidate:
    return Candidate(text, c.cosine, listed=c.rank is not None, lexical=c.lexical)


def judge_candidates(judge: RelevanceJudge, artifact: str, candidates: Sequence[JudgedCandidate], *, corpus: Any,
                     log: JudgmentLog, meter: Any = None, progress: Any = None,
                     same_grades: Sequence[str] = ()) -> list[dict[str, Any] | None]:
    """Judge every candidate not judged yet (in query order, so the query's prompt prefix is reused).

    ``same_grades``: versions of artifacts whose grading prompt is this one's, character for character, shown the
    same share of each document (:func:`~syntra_dspy.artifacts.grading_identity`); a graded judgment already logged
    for one of them is not asked again: its grade is calibrated with this judge (the row says ``grade_from``, and
    keeps the original call's time and tokens)."""
    rows: list[dict[str, Any] | None] = []
    for c in candidates:
        key = log_key(artifact, judge_key(judge), c)
        if key not in log.done:
            shared = next((log.done[k] for k in (log_key(v, judge_key(judge), c) for v in same_grades) if k in log.done
                           and (log.done[k].get("judgment") or {}).get("grade")), None) \
                if judge.mode == "graded" else None
            if shared is not None:
                judgment = judge.calibrate(Grade.from_dict(shared["judgment"]["grade"]), _as_candidate(c, ""))
                log.add({**shared, "key": key, "artifact": artifact, "grade_from": shared["artifact"],
                         "judgment": judgment.to_dict()})
            else:
                before = meter.snapshot().get("judge", {}) if meter is not None else {}
                started = time.perf_counter()
                with (meter.stage("judge") if meter is not None else _null()):
                    (judgment,) = judge.judge_all(c.query, [_as_candidate(c, corpus[c.doc_id].content)])
                after = meter.snapshot().get("judge", {}) if meter is not None else {}
                log.add({"key": key, "artifact": artifact, "judge": judge.mode,
                         **({"grade_order": judge.grade_order} if judge.groups_by_document else {}),
                         "query_id": c.query_id,
                         "doc_id": c.doc_id, "seconds": round(time.perf_counter() - started, 3),
                         "prompt_tokens": after.get("prompt_tokens", 0) - before.get("prompt_tokens", 0),
                         "completion_tokens": after.get("completion_tokens", 0) - before.get("completion_tokens", 0),
                         "judgment": None if judgment is None else judgment.to_dict()})
        if progress is not None:
            progress()
        rows.append(log.done[key])
    return settle_rows(judge, candidates, rows, corpus)


def settle_rows(judge: RelevanceJudge, candidates: Sequence[JudgedCandidate], rows: Sequence[dict[str, Any] | None],
                corpus: Any) -> list[dict[str, Any] | None]:
    """Rows whose labels are final: a relative judge labels each candidate against the rest of its query's
    retrieved list, so the per-candidate labels logged while judging are provisional and are settled here."""
    if judge.mode != "graded" or not judge.calibration.needs_list:
        return list(rows)
    out = list(rows)
    for members in _by_query(candidates).values():
        asked = [_as_candidate(candidates[i], "") for i in members]
        judged = [_judgment_of(rows[i]) for i in members]
        for i, judgment in zip(members, judge.settle(asked, judged)):
            row = rows[i]
            if row is not None and judgment is not None:
                out[i] = {**row, "judgment": judgment.to_dict()}
    return out


def recalibrated_rows(judge: RelevanceJudge, candidates: Sequence[JudgedCandidate],
                      rows: Sequence[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """Logged graded rows labelled by ``judge``'s calibration instead of the one that logged them: the same grades,
    cut again (and settled against each query's list for a list-relative calibration). Rows without a grade stay.

    With a cascade, a candidate it would not have asked about carries the cascade's judgment instead of its logged
    grade, as production would have labelled it: what a cascade costs in agreement, from one log."""
    out = list(rows)
    for members in _by_query(candidates).values():
        asked = [_as_candidate(candidates[i], "") for i in members]
        grades = [None if (logged := _judgment_of(rows[i])) is None else logged.grade for i in members]
        for i, judgment in zip(members, judge.label_grades(asked, grades)):
            row = rows[i]
            if row is not None and judgment is not None:
                out[i] = {**row, "judgment": judgment.to_dict()}
    return out


def _by_query(candidates: Sequence[JudgedCandidate]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(c.query_id, []).append(i)
    return groups


def _judgment_of(row: dict[str, Any] | None) -> Judgment | None:
    if row is None or row.get("judgment") is None or "grade" not in row["judgment"]:
        return None
    return Judgment(row["judgment"]["label"], Grade.from_dict(row["judgment"]["grade"]), row["judgment"].get("score"))


def _null():
    from contextlib import nullcontext

    return nullcontext()


def score_judge(candidates: Sequence[JudgedCandidate], rows: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Agreement of one judge's labels with the reference, and how well its scores rank positives first."""
    gold = [c.gold for c in candidates]
    labels = [None if r is None or r["judgment"] is None else r["judgment"]["label"] for r in rows]
    pred = [None if label is None else label_class(label) for label in labels]
    result: dict[str, Any] = label_agreement(gold, pred)
    is_pos = [g == "positive" for g in gold]
    expected = [None if r is None or r["judgment"] is None or "grade" not in r["judgment"]
                else r["judgment"]["grade"]["expected"] for r in rows]
    cosines = [c.cosine for c in candidates]
    ranking: dict[str, Any] = {"cosine": {"auc": roc_auc(cosines, is_pos),
                                          "best_binary_kappa": best_cut(cosines, is_pos).kappa}}
    if candidates and all(c.lexical is not None for c in candidates):  # BM25 alone: what no LLM call gives
        lexical = [float(c.lexical) for c in candidates]  # type: ignore[arg-type]
        ranking["bm25"] = {"auc": roc_auc(lexical, is_pos), "best_binary_kappa": best_cut(lexical, is_pos).kappa}
    scored = [(e, c, p) for e, c, p in zip(expected, cosines, is_pos) if e is not None]
    if scored:
        import statistics

        e_vals, c_vals, pos = zip(*scored)

        def z(values: Sequence[float]) -> list[float]:
            mean, sd = statistics.fmean(values), statistics.pstdev(values) or 1.0
            return [(v - mean) / sd for v in values]

        fused = [a + b for a, b in zip(z(e_vals), z(c_vals))]
        ranking["expected"] = {"auc": roc_auc(e_vals, pos), "best_binary_kappa": best_cut(e_vals, pos).kappa}
        ranking["fused"] = {"auc": roc_auc(fused, pos), "best_binary_kappa": best_cut(fused, pos).kappa}
    result["ranking"] = ranking
    done = [r for r in rows if r is not None]
    result["cost"] = {
        "candidates": len(done),
        "seconds_per_candidate": sum(r["seconds"] for r in done) / len(done) if done else None,
        "prompt_tokens_per_candidate": sum(r["prompt_tokens"] for r in done) / len(done) if done else None,
        "completion_tokens_per_candidate": sum(r["completion_tokens"] for r in done) / len(done) if done else None,
    }
    result["predicted"] = {k: pred.count(k) for k in ("positive", "hard_negative", "easy_negative")}
    result["unlabelled"] = pred.count(None)
    return result


def paired_kappa_difference(candidates: Sequence[JudgedCandidate], a: Sequence[dict | None], b: Sequence[dict | None],
                            *, rounds: int = 2000, seed: int = 0) -> dict[str, float | None]:
    """Binary kappa of judge b minus judge a, with a 95% bootstrap interval over queries (paired: same candidates)."""
    def classes(rows: Sequence[dict | None]) -> list[str | None]:
        return [None if r is None or r["judgment"] is None else label_class(r["judgment"]["label"]) for r in rows]

    return paired_kappa_bootstrap([c.gold for c in candidates], [c.query_id for c in candidates], classes(a),
                                  classes(b), rounds=rounds, seed=seed)


def reliability_chart(candidates: Sequence[JudgedCandidate], judged: dict[str, Sequence[dict | None]],
                      path: Path) -> None:
    """Share of reference positives per bin of E (0-3, width 0.5), one line per graded judge, with counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0001]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, rows in judged.items():
        xs, ys, ns = [], [], []
        pairs = [(r["judgment"]["grade"]["expected"], c.gold == "positive") for c, r in zip(candidates, rows)
                 if r is not None and r["judgment"] is not None and "grade" in r["judgment"]
                 and r["judgment"]["grade"]["expected"] is not None]
        for lo, hi in zip(edges, edges[1:]):
            inside = [p for e, p in pairs if lo <= e < hi]
            if inside:
                xs.append((lo + min(hi, 3.0)) / 2)
                ys.append(sum(inside) / len(inside))
                ns.append(len(inside))
        if xs:
            ax.plot(xs, ys, marker="o", label=name)
            for x, y, n in zip(xs, ys, ns):
                ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(0, 6), fontsize=7, ha="center")
    ax.set_xlabel("expected label E = sum k p(k)")
    ax.set_ylabel("share judged relevant by people")
    ax.set_xlim(0, 3)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Reliability of graded judgments (bin counts above points)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def candidates_to_json(candidates: Sequence[JudgedCandidate]) -> list[dict[str, Any]]:
    return [asdict(c) for c in candidates]


def excluded_queries(program: Any) -> list[str]:
    """Queries a judge must not be measured on: the task's few-shot queries and its calibration queries."""
    out = [ex.query for ex in program.state.examples]
    judge = program.state.judge
    if judge is not None and judge.summary is not None:
        out += list(judge.summary.query_texts)
    return out
