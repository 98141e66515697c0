"""Written vs graded vs graded-and-fused relevance judges of one artifact, against SciFact's human qrels.

1. ``syntra agreement`` (``measure_agreement``) grades the candidates production would retrieve for N held-out
   train claims (few-shot and calibration claims excluded) with the artifact's graded judge; every judgment is
   logged as it is made and a rerun resumes.
2. The artifact's calibration set is graded again (DSPy's cache answers: the compile graded the same prompts) and
   two more calibrations are fitted on it, E alone and E fused with the retriever's cosine; each is applied
   unchanged to the held-out grades, so the graded judges differ only in their score and cut points.
3. The written judge (the annotate step, one candidate per call, about twice the cost) labels the candidates of the
   first ``--written-queries`` claims, and each graded judge is compared with it on exactly those candidates.
4. Binary and three-class kappa, positive precision/recall, AUC, cost per candidate, and paired bootstrap
   differences (over claims) go to ``benchmarks/results/judge_agreement/``.

    python benchmarks/judge_agreement.py --artifact artifacts/scifact/<version> --work ~/syntra-runs/agreement
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

try:  # python -m benchmarks.judge_agreement (make bench-judge-agreement)
    from benchmarks.common import RESULTS, offline_environment
except ModuleNotFoundError:  # python benchmarks/judge_agreement.py: this folder is first on the path
    from common import RESULTS, offline_environment  # type: ignore

offline_environment()
RESULTS = RESULTS / "judge_agreement"


def load(artifact_path: str):
    """The artifact's inputs and its generator, loaded once for both re-judging passes below."""
    from syntra_dspy.lm.roles import prepare_lm
    from syntra_dspy.production.setup import load_inputs, resolve_generator

    inputs = load_inputs(artifact_path)
    lm, _ = resolve_generator(inputs.artifact.meta, None)
    prepare_lm(lm)
    return inputs, lm


def calibration_samples(inputs, lm) -> list:
    """The artifact's calibration set graded again (DSPy's cache answers what the compile already graded)."""
    import dspy

    from syntra_dspy.judging.candidates import with_lexical
    from syntra_dspy.judging.calibration_set import calibration_set, grade_set, samples_of
    from syntra_dspy.retrieval.sources import IndexCandidates

    program, s = inputs.artifact.program, inputs.artifact.meta.settings
    source = IndexCandidates(inputs.corpus, inputs.encoder, inputs.index)
    material = calibration_set(program.state.examples, source, k=s.annotation_candidates,
                               controls=max(1, s.control_negatives), seed=s.seed,
                               labels=s.calibration_labels, label_queries=s.calibration_queries or 0)
    lexical = lexical_for(inputs, program)
    if lexical is not None:
        material = with_lexical(material, lexical)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        grades = grade_set(program, material, inputs.corpus)
    return samples_of(material, grades)


def lexical_for(inputs, program):
    """BM25 over the corpus when the task's queries and documents share a language (the hybrid judge's witness)."""
    from syntra_dspy.judging.candidates import lexical_witness

    definition = program.state.task_definition
    return lexical_witness(inputs.corpus, definition.query_language, definition.document_language)


def relabel(rows: list[dict | None], candidates, program, calibration) -> list[dict | None]:
    """The held-out graded judgments with labels cut by another calibration (same grades, same candidates)."""
    from syntra_dspy.judging.measure import recalibrated_rows
    from syntra_dspy.judging.judge import RelevanceJudge

    return recalibrated_rows(RelevanceJudge(program.with_components(judge=calibration), mode="graded"), candidates,
                             rows)


def written_on_subset(inputs, lm, candidates: list, queries: int, log) -> list:
    """The artifact's written judge on every candidate of the first ``queries`` claims (same log, resumable)."""
    import dspy

    from syntra_dspy.judging.measure import judge_candidates
    from syntra_dspy.lm.usage import UsageMeter
    from syntra_dspy.judging.judge import RelevanceJudge

    keep = list(dict.fromkeys(c.query_id for c in candidates))[:queries]
    subset = [c for c in candidates if c.query_id in keep]
    judge = RelevanceJudge(inputs.artifact.program, mode="written")
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None):
        judge_candidates(judge, inputs.artifact.version, subset, corpus=inputs.corpus, log=log, meter=UsageMeter())
    return subset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--dataset", default="beir:../shared/data/scifact:train")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--written-queries", type=int, default=50,
                        help="judge the first N claims' candidates with the written judge too (it costs ~2x)")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--random", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path.home() / "syntra-runs" / "agreement")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the results are written")
    args = parser.parse_args()

    from syntra_dspy.judging.candidates import JudgedCandidate
    from syntra_dspy.comparison.judge_agreement import measure_agreement
    from syntra_dspy.judging.measure import JudgmentLog, paired_kappa_difference, score_judge
    from syntra_dspy.judging.calibration import fit_calibration

    report = measure_agreement([args.artifact], args.dataset, judges=["graded"], n_queries=args.queries,
                               top_k=args.top_k, random_negatives=args.random, seed=args.seed, out=args.work)
    candidates = [JudgedCandidate(**c) for c in json.loads((args.work / "candidates.json").read_text())]
    log = JudgmentLog(args.work / "judgments.jsonl")
    (graded,) = report["judges"]
    version = report["judges"][graded]["version"]

    def rows_of(mode: str, cands: list) -> list:
        return [log.done.get(f"{version}|{mode}|{c.query_id}|{c.doc_id}") for c in cands]

    inputs, lm = load(args.artifact)
    samples = calibration_samples(inputs, lm)
    compiled = report["judges"][graded]["judge"].get("calibration", {}).get("feature", "?")
    # The log holds each candidate's judgment as it was made; a relative calibration settles a query's labels
    # afterwards, so the compiled judge's labels are cut again here from the same grades.
    program = inputs.artifact.program
    judges = {f"graded, compiled calibration ({compiled})": relabel(rows_of("graded", candidates), candidates,
                                                                    program, program.state.judge)}
    names = {"expected": "E alone", "fused": "E + cosine (fused)",
             "relative": "fused + standing in the list (relative)",
             "hybrid": "relative + BM25 and its standing (hybrid)"}
    for feature, label in names.items():
        if feature == "hybrid" and any(s.lexical is None for s in samples):
            continue  # a cross-language task: no lexical witness
        calibration = fit_calibration(samples, feature=feature)
        name = f"graded, {label}"
        judges[name] = relabel(rows_of("graded", candidates), candidates, program, calibration)
    held_out = {name: score_judge(candidates, rows) for name, rows in judges.items()}
    first, *others = judges  # every other calibration against the compiled one, on the same grades and candidates
    held_out_pairs = {f"{name} vs {first}": paired_kappa_difference(candidates, judges[first], judges[name])
                      for name in others}

    subset = written_on_subset(inputs, lm, candidates, args.written_queries, log) if args.written_queries else []
    on_subset, comparisons = {}, {}
    if subset:
        index = {(c.query_id, c.doc_id): i for i, c in enumerate(candidates)}
        pick = [index[(c.query_id, c.doc_id)] for c in subset]
        sub_rows = {name: [rows[i] for i in pick] for name, rows in judges.items()}
        sub_rows["written"] = rows_of("written", subset)
        on_subset = {name: score_judge(subset, rows) for name, rows in sub_rows.items()}
        for name in judges:
            comparisons[f"{name} vs written"] = paired_kappa_difference(subset, sub_rows["written"], sub_rows[name])
    summary = {**report, "calibration_samples": len(samples), "held_out": held_out,
               "held_out_comparisons": held_out_pairs,
               "written_subset": {"queries": len({c.query_id for c in subset}), "candidates": len(subset),
                                  "judges": on_subset, "comparisons": comparisons}}
    text = (args.work / "agreement.md").read_text() + render_variants(
        "All held-out claims: the graded judge under each calibration (fitted on the artifact's calibration set, "
        "applied unchanged)", held_out, held_out_pairs)
    if subset:
        text += render_variants(f"The first {summary['written_subset']['queries']} claims "
                                f"({len(subset)} candidates): written against graded, same candidates",
                                on_subset, comparisons)
    print(text)
    if not args.no_write:
        results = args.results
        results.mkdir(parents=True, exist_ok=True)
        (results / "agreement.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        (results / "agreement.md").write_text(text)
        for name in ("candidates.json", "judgments.jsonl", "reliability.png"):
            if (args.work / name).exists():
                shutil.copy(args.work / name, results / name)
    return 0


def render_variants(title: str, judges: dict, comparisons: dict | None = None) -> str:
    fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    lines = ["", f"## {title}", "",
             "| judge | binary κ | pos. precision | pos. recall | 3-class κ | AUC of E | s/candidate | "
             "predicted pos/hard/easy |",
             "|---|---|---|---|---|---|---|---|"]
    for name, v in judges.items():
        b, pred = v["binary"], v["predicted"]
        pos = b["per_class"]["relevant"]
        auc = v["ranking"].get("expected", {}).get("auc")
        lines.append(f"| {name} | {fmt(b['kappa'])} | {fmt(pos['precision'])} | {fmt(pos['recall'])} | "
                     f"{fmt(v['three_class']['kappa'])} | {fmt(auc)} | {fmt(v['cost']['seconds_per_candidate'])} | "
                     f"{pred['positive']}/{pred['hard_negative']}/{pred['easy_negative']} |")
    if comparisons:
        lines += ["", "| paired (bootstrap over claims) | κ difference | 95% CI | P(not better) |",
                  "|---|---|---|---|"]
        for name, c in comparisons.items():
            lines.append(f"| {name} | {fmt(c['difference'])} | [{fmt(c['ci95'][0])}, {fmt(c['ci95'][1])}] | "
                         f"{fmt(c['p_b_not_better'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
