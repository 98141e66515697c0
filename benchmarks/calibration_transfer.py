"""Does a judge calibration fitted on more human-judged queries agree better on queries it never saw?

Reads the logged grades of two `syntra agreement` runs over disjoint judged query samples (their `candidates.json` and
`judgments.jsonl`; the same grading prompt, so the grades are the same model calls) and, for each direction, fits a
calibration on one sample's grades and human labels and applies it unchanged to the other, against the artifact's
own (compile-time) calibration on the same grades: binary and three-class kappa, positive precision and recall, and a
paired bootstrap over queries. No LLM call: every grade is read from the logs.

    python benchmarks/calibration_transfer.py --artifact artifacts/scifact/22e653baa2bb \
        --a benchmarks/results/judge_agreement_hybrid --b benchmarks/results/judge_agreement_hybrid_fresh \
        --out benchmarks/results/calibration_transfer
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.agreement import label_agreement, paired_kappa_bootstrap
from syntra_dspy.judging.calibration import (CalibrationSample, JudgeCalibration, describe, fit_calibration,
                                                    sample_contexts)


def load_sample(folder: Path, artifact: str) -> list[CalibrationSample | None]:
    """One sample per logged candidate (None where the judge gave no grade), in candidates.json order."""
    candidates = json.loads((folder / "candidates.json").read_text())
    grades: dict[tuple[str, str], float] = {}
    for line in (folder / "judgments.jsonl").read_text().splitlines():
        row = json.loads(line)
        judgment = row.get("judgment") or {}
        expected = (judgment.get("grade") or {}).get("expected")
        if row["artifact"] == artifact and row["judge"] == "graded" and expected is not None:
            grades[(row["query_id"], row["doc_id"])] = float(expected)
    out: list[CalibrationSample | None] = []
    for c in candidates:
        e = grades.get((c["query_id"], c["doc_id"]))
        source = "human" if c["gold"] == "positive" else "control" if c["source"] == "random" else "retrieved"
        out.append(None if e is None else CalibrationSample(c["query"], e, c["cosine"], c["gold"], source,
                                                            listed=c["rank"] is not None, lexical=c["lexical"]))
    return out


def classes(calibration: JudgeCalibration, samples: list[CalibrationSample]) -> list[str]:
    """The calibrated class of each sample, against the rest of its query's retrieved list."""
    return [calibration.classify(s.expected, s.cosine, c, s.lexical) for s, c in zip(samples, sample_contexts(samples))]


def summary(gold: list[str], pred: list[str]) -> dict[str, Any]:
    a = label_agreement(gold, pred)
    rel = a["binary"]["per_class"]["relevant"]
    return {"binary_kappa": a["binary"]["kappa"], "precision": rel["precision"], "recall": rel["recall"],
            "three_class_kappa": a["three_class"]["kappa"],
            "predicted_positive": pred.count("positive"), "positives": gold.count("positive")}


def transfer(fit_on: list[CalibrationSample], test: list[CalibrationSample], compiled: JudgeCalibration,
             features: list[str]) -> dict[str, Any]:
    gold = [s.gold for s in test]
    groups = [s.query for s in test]
    base = classes(compiled, test)
    out: dict[str, Any] = {"fit_candidates": len(fit_on), "fit_queries": len({s.query for s in fit_on}),
                           "test_candidates": len(test), "test_queries": len({s.query for s in test}),
                           "compiled": {**summary(gold, base), "calibration": describe(compiled)}}
    for feature in features:
        fitted = fit_calibration(fit_on, feature=feature)  # type: ignore[arg-type]
        pred = classes(fitted, test)
        out[feature] = {**summary(gold, pred), "chose": fitted.feature, "calibration": describe(fitted),
                        "vs_compiled": paired_kappa_bootstrap(gold, groups, base, pred, rounds=4000, seed=0)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifact", type=Path, required=True)
    parser.add_argument("--a", type=Path, required=True, help="one agreement results folder")
    parser.add_argument("--b", type=Path, required=True, help="another, over disjoint queries")
    parser.add_argument("--features", nargs="+", default=["auto", "hybrid", "relative"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    artifact = load_artifact(args.artifact)
    compiled = artifact.program.state.judge
    samples = {name: load_sample(folder, artifact.version) for name, folder in (("a", args.a), ("b", args.b))}
    graded = {name: [s for s in rows if s is not None] for name, rows in samples.items()}
    overlap = {s.query for s in graded["a"]} & {s.query for s in graded["b"]}
    if overlap:
        raise SystemExit(f"the two samples share {len(overlap)} queries: they must be disjoint")
    report = {"artifact": f"{artifact.task}/{artifact.version}", "a": str(args.a), "b": str(args.b),
              "ungraded": {n: sum(s is None for s in rows) for n, rows in samples.items()},
              "fit_a_test_b": transfer(graded["a"], graded["b"], compiled, args.features),
              "fit_b_test_a": transfer(graded["b"], graded["a"], compiled, args.features)}
    pooled_gold, pooled_base, pooled_fit, pooled_groups = [], [], [], []
    for fit_name, test_name in (("a", "b"), ("b", "a")):
        test = graded[test_name]
        fitted = fit_calibration(graded[fit_name], feature="auto")
        pooled_gold += [s.gold for s in test]
        pooled_groups += [f"{test_name}:{s.query}" for s in test]
        pooled_base += classes(compiled, test)
        pooled_fit += classes(fitted, test)
    report["pooled_auto"] = {"compiled": summary(pooled_gold, pooled_base), "fitted": summary(pooled_gold, pooled_fit),
                             "vs_compiled": paired_kappa_bootstrap(pooled_gold, pooled_groups, pooled_base, pooled_fit,
                                                                   rounds=4000, seed=0)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "transfer.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "ungraded"}, indent=1, default=str)[:6000])


if __name__ == "__main__":
    main()
