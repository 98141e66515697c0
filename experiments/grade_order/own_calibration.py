"""Does a graded judge that reads the document first keep its agreement with people once its calibration is fitted on
grades of that order?

The artifact's calibration set (built as the compile built it) is graded in both orders on this machine's engine;
the artifact's score (hybrid for SciFact) is fitted on each; the 50 fresh claims' candidates are labelled from the
grades two ``syntra agreement`` logs already hold (one per order), each with the calibration of its own order; binary
kappa against people for each and the paired difference (bootstrap over claims). Grades of the calibration set are
saved beside the results, so a rerun fits again without a call.

    PYTHONPATH=. python experiments/grade_order/own_calibration.py artifacts/scifact/22e653baa2bb \\
        benchmarks/results/judge_agreement_hybrid_fresh/candidates.json \\
        benchmarks/results/judge_agreement_hybrid_fresh/avx512-build/judgments.jsonl \\
        benchmarks/results/judge_agreement_hybrid_fresh/document-first/judgments.jsonl experiments/grade_order
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.calibration import CalibrationSample, fit_calibration
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.judging.measure import JudgmentLog, log_key, paired_kappa_difference, recalibrated_rows, score_judge
from syntra_dspy.lm.usage import UsageMeter
from syntra_dspy.production.recalibrate import _graded_set

ORDERS = ("query-first", "document-first")


def calibration_samples(original, order: str, out: Path) -> list[CalibrationSample]:
    """The calibration set's samples graded in ``order``, read from ``out`` when an earlier run saved them."""
    path = out / f"calibration-grades-{order}.jsonl"
    if path.is_file():
        return [CalibrationSample(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]
    settings = original.meta.optimizer
    samples, graded, _ = _graded_set(original, settings.get("calibration_labels"),
                                     int(settings.get("calibration_queries") or 0), (), None, None, UsageMeter(), None,
                                     order=order)
    path.write_text("".join(json.dumps(dataclasses.asdict(s), ensure_ascii=False) + "\n" for s in samples),
                    encoding="utf-8")
    print(f"{order}: graded {graded} calibration candidates", flush=True)
    return samples


def main(artifact: str, candidates_json: str, query_first_log: str, document_first_log: str, out: str) -> None:
    out_dir = Path(out)
    original = load_artifact(artifact)
    feature = original.program.state.judge.feature
    cands = [JudgedCandidate(**c) for c in json.loads(Path(candidates_json).read_text(encoding="utf-8"))]
    logs = dict(zip(ORDERS, (JudgmentLog(Path(query_first_log)), JudgmentLog(Path(document_first_log)))))
    result: dict = {"artifact": original.version, "feature": feature, "candidates": len(cands)}
    rows: dict[tuple[str, str], list] = {}
    for order in ORDERS:
        key = "graded" if order == "query-first" else f"graded:{order}"  # how syntra agreement keyed its rows
        logged = [logs[order].done.get(log_key(original.version, key, c)) for c in cands]
        missing = sum(r is None for r in logged)
        if missing:
            raise SystemExit(f"{missing} candidates have no {order} judgment in its log")
        samples = calibration_samples(original, order, out_dir)
        fitted = fit_calibration(samples, feature=feature, grade_order=order)  # type: ignore[arg-type]
        for name, calibration in (("artifact's calibration", original.program.state.judge),
                                  (f"fitted on {order} grades", fitted)):
            # the logged grades cut again with ``calibration`` (the order they were graded in is the log's)
            judge = RelevanceJudge(original.program.with_components(judge=calibration), mode="graded")
            rows[(order, name)] = labelled = recalibrated_rows(judge, cands, logged)
            score = score_judge(cands, labelled)
            result[f"{order}, {name}"] = {
                "binary_kappa": round(score["binary"]["kappa"], 3),
                "positive_recall": round(score["binary"]["per_class"]["relevant"]["recall"], 3),
                "positive_precision": round(score["binary"]["per_class"]["relevant"]["precision"], 3)}
        result[f"{order}, calibration set"] = {
            "samples": len(samples), "cv_binary_kappa": fitted.summary.cv_binary_kappa.get(feature),
            "expected_mean": round(fitted.expected_mean, 3), "expected_std": round(fitted.expected_std, 3)}
    own = {order: rows[(order, f"fitted on {order} grades")] for order in ORDERS}
    result["paired, each order with its own fitted calibration (document-first - query-first)"] = \
        paired_kappa_difference(cands, own["query-first"], own["document-first"])
    result["paired, both with the artifact's calibration (document-first - query-first)"] = \
        paired_kappa_difference(cands, rows[("query-first", "artifact's calibration")],
                                rows[("document-first", "artifact's calibration")])
    text = json.dumps(result, indent=1, default=str)
    (out_dir / "own_calibration.json").write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main(*sys.argv[1:6])
