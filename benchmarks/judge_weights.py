"""Equal weights or fitted weights? The hybrid score's terms, fitted on some held-out claims, applied to the others.

The ``hybrid`` score adds six standardised terms (the judge's E, the retriever's cosine, BM25, and each one's
standing in the query's list) with equal weight; ``weighted`` fits their weights by logistic regression on the
calibration set. Compiling and grading a calibration set takes the LLM tens of minutes; this benchmark needs no
LLM: it reads the grades ``syntra agreement`` logged for held-out claims (each with its human qrels class) and,
for many random splits of a sample's claims, fits both scores on ``--fit`` claims (15: the size of the SciFact
artifact's calibration set) and measures binary kappa, positive recall and precision on the rest. The splits are
the same for both scores, so the comparison is paired.

    python benchmarks/judge_weights.py --run benchmarks/results/judge_agreement_hybrid \\
        --run benchmarks/results/judge_agreement_hybrid_fresh --artifact 22e653baa2bb \\
        --out benchmarks/results/judge_weights

This explores a design on claims that were held out from the artifact, not from this analysis: the artifact
recalibrated with the chosen score is then measured with ``syntra agreement`` as any judge is.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

from syntra_dspy.judging.agreement import cohen_kappa
from syntra_dspy.judging.calibration import CalibrationSample, fit_feature, sample_contexts


def load_samples(folder: Path, artifact: str) -> list[CalibrationSample]:
    """The logged candidates of one ``syntra agreement`` run, with the artifact's grades and the qrels classes."""
    expected = {}
    for line in (folder / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["artifact"] == artifact and row["judge"] == "graded":
            expected[(row["query_id"], row["doc_id"])] = row["judgment"]["grade"]["expected"]
    return [CalibrationSample(c["query_id"], expected[(c["query_id"], c["doc_id"])], c["cosine"], c["gold"],
                              c["source"], listed=c["rank"] is not None, lexical=c["lexical"])
            for c in json.loads((folder / "candidates.json").read_text(encoding="utf-8"))]


def split_scores(samples: list[CalibrationSample], fit: int, draws: int, seed: int, features: tuple[str, ...]
                 ) -> dict[str, list[dict[str, float]]]:
    """Per feature, one row per random split: agreement on the claims the fit did not see."""
    contexts = sample_contexts(samples)
    queries = sorted({s.query for s in samples})
    out: dict[str, list[dict[str, float]]] = {f: [] for f in features}
    for draw in range(draws):
        chosen = set(random.Random(seed + draw).sample(queries, fit))
        train = [i for i, s in enumerate(samples) if s.query in chosen]
        test = [i for i, s in enumerate(samples) if s.query not in chosen]
        gold3 = [samples[i].gold for i in test]
        gold = ["p" if g == "positive" else "n" for g in gold3]
        for feature in features:
            cal = fit_feature([samples[i] for i in train], feature, [contexts[i] for i in train])
            pred3 = [cal.classify(samples[i].expected, samples[i].cosine, contexts[i], samples[i].lexical)
                     for i in test]
            pred = ["p" if k == "positive" else "n" for k in pred3]
            tp = sum(g == p == "p" for g, p in zip(gold, pred))
            out[feature].append({"kappa": cohen_kappa(gold, pred, ("p", "n")) or 0.0,
                                 "recall": tp / max(1, gold.count("p")), "precision": tp / max(1, pred.count("p")),
                                 "kappa3": cohen_kappa(gold3, pred3, ("positive", "hard_negative",
                                                                     "easy_negative")) or 0.0})
    return out


def summarise(rows: dict[str, list[dict[str, float]]], base: str) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for feature, values in rows.items():
        entry = {k: statistics.fmean(r[k] for r in values) for k in ("kappa", "recall", "precision", "kappa3")}
        if feature != base:
            diffs = [a["kappa"] - b["kappa"] for a, b in zip(values, rows[base])]
            entry["kappa_diff"] = statistics.fmean(diffs)
            entry["wins"] = sum(d > 0 for d in diffs)
            entry["losses"] = sum(d < 0 for d in diffs)
        summary[feature] = entry
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True, type=Path, help="a syntra agreement output folder")
    ap.add_argument("--artifact", required=True, help="version whose logged grades to use")
    ap.add_argument("--fit", action="append", type=int, default=[], help="claims to fit on (default 15 and 25)")
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()

    features = ("hybrid", "weighted")
    sizes = args.fit or [15, 25]
    report: dict[str, Any] = {"artifact": args.artifact, "draws": args.draws, "seed": args.seed, "runs": {}}
    lines = ["# Equal or fitted weights for the hybrid score's terms (no LLM: logged grades)", "",
             (f"Grades of artifact `{args.artifact}` logged by `syntra agreement`; reference: the qrels (judgments "
              f"people made). Each row: {args.draws} random splits of a sample's claims, both scores fitted on the "
              "same claims and measured on the rest (binary kappa, positive recall and precision, three-class "
              "kappa: means); paired difference in kappa, and in how many splits weighted is ahead / behind."), "",
             ("| sample | fitted on | hybrid κ | recall | precision | 3-class κ | weighted κ | recall | precision | "
              "3-class κ | Δκ | ahead / behind |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for folder in args.run:
        samples = load_samples(folder, args.artifact)
        n_queries = len({s.query for s in samples})
        for fit in sizes:
            summary = summarise(split_scores(samples, fit, args.draws, args.seed, features), "hybrid")
            report["runs"].setdefault(str(folder), {})[str(fit)] = summary
            h, w = summary["hybrid"], summary["weighted"]
            lines.append(f"| {folder.name} ({n_queries} claims, {len(samples)} candidates) | {fit} claims | "
                         f"{h['kappa']:.3f} | {h['recall']:.3f} | {h['precision']:.3f} | {h['kappa3']:.3f} | "
                         f"{w['kappa']:.3f} | {w['recall']:.3f} | {w['precision']:.3f} | {w['kappa3']:.3f} | "
                         f"{w['kappa_diff']:+.3f} | "
                         f"{w['wins']} / {w['losses']} |")
            print(lines[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "judge_weights.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "judge_weights.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
