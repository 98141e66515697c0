"""Two ``syntra agreement`` judgment logs of the same candidates against each other, with no LM call: binary kappa,
positive precision and recall of each against people, how many labels differ (and, of the relevant/not flips, how
many move toward people), and the paired binary kappa difference with its bootstrap interval over claims.

Only claims both logs judged whole count (a list-relative score such as the hybrid's needs a claim's whole list), so
a run stopped early compares on what it finished. Each log's grades are those its rows for the artifact hold under
``--ref-judge`` / ``--new-judge`` (the judge part of the log's keys: ``graded``, or ``graded:document-first`` for a
judge that read the document first), cut with the artifact's calibration as ``syntra agreement`` cut them.
``--new-artifact`` reads and cuts the other log with another version's calibration instead (e.g. one refitted on
another grader's grades by ``syntra artifacts recalibrate --generator``, whose log ``syntra agreement`` keyed by it).
``--new-cascade-grades STORE`` labels the other log as ``syntra produce --judge-cascade margin --cascade-grades
STORE`` would have (a candidate the margin skips gets the cascade's label, not its logged grade's), so a log made
on one engine build and cut with the cascade is compared with another build's full judge: what production's
fastest settings cost in agreement, with no LM call; ``--new-cascade-own`` learns the margin as production does
with no ``--cascade-grades``, from the other artifact's own calibration grades; ``--new-cascade-regrades JSONL``
learns it from the lists of the ``--new-cascade-grades`` store graded again with the other artifact's prompt (rows of
``query_id``, ``rank``, ``expected``; a list counts when all of its candidates were regraded), for a store graded with
a prompt other than the one compared, which production refuses as ``--cascade-grades``. Several ``--candidates`` files
(with the logs of each in ``--ref`` and ``--new``) compare samples of different claims pooled, the interval
resampling all their claims.

    python -m benchmarks.compare_judgments artifacts/scifact/22e653baa2bb \\
        --candidates benchmarks/results/judge_agreement_hybrid_fresh/candidates.json \\
        --ref benchmarks/results/judge_agreement_hybrid_fresh/avx512-build/judgments.jsonl \\
        --new benchmarks/results/judge_agreement_hybrid_fresh/document-first/judgments.jsonl \
        --new-judge graded:document-first
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:  # python -m benchmarks.compare_judgments
    from benchmarks.common import plain_store
except ModuleNotFoundError:  # python benchmarks/compare_judgments.py: this folder is first on the path
    from common import plain_store  # type: ignore


Paths = Path | Sequence[Path]


def compare(artifact: Path, candidates_json: Paths, ref: Paths, new: Paths, *, ref_judge: str = "graded",
            new_judge: str = "graded", new_artifact: Path | None = None, new_cascade_grades: Path | None = None,
            new_cascade_coverage: float | None = None, new_cascade_own: bool = False,
            new_cascade_regrades: Path | None = None) -> dict[str, Any]:
    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.judging.candidates import JudgedCandidate
    from syntra_dspy.judging.cascade import JudgeCascade
    from syntra_dspy.judging.judge import RelevanceJudge
    from syntra_dspy.judging.measure import (JudgmentLog, log_key, paired_kappa_difference, recalibrated_rows,
                                             score_judge)
    from syntra_dspy.production.cascade import production_cascade
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.store import RunStore

    def listed(paths: Paths) -> list[Path]:
        return [paths] if isinstance(paths, Path) else list(paths)

    def log_rows(paths: Paths) -> dict[str, dict]:  # several samples' logs read as one (their keys hold the claim)
        return {k: row for path in listed(paths) for k, row in JudgmentLog(path).done.items()}

    if new_cascade_regrades is not None and new_cascade_grades is None:
        raise SystemExit("--new-cascade-regrades regrades the lists of a run store: give it with --new-cascade-grades")
    cands = [JudgedCandidate(**c) for path in listed(candidates_json)
             for c in json.loads(path.read_text(encoding="utf-8"))]
    if len({(c.query_id, c.doc_id) for c in cands}) < len(cands):
        raise SystemExit("the candidates files list a claim's candidate twice: give each sample of claims once")
    art = load_artifact(artifact)
    other = art if new_artifact is None else load_artifact(new_artifact)
    sides = {name: (log, key, log_rows(log), a) for name, log, key, a in (("ref", ref, ref_judge, art),
                                                                         ("new", new, new_judge, other))}

    def judged(c: JudgedCandidate) -> bool:
        return all((done.get(log_key(a.version, key, c)) or {}).get("judgment") for _, key, done, a in sides.values())

    whole = {q for q in {c.query_id for c in cands} if all(judged(c) for c in cands if c.query_id == q)}
    if not whole:
        raise SystemExit(f"no claim is judged whole in both logs under keys {art.version}:{ref_judge} and "
                         f"{other.version}:{new_judge}: name the artifact each log was made with (--new-artifact) "
                         "and the judge part of its keys (--ref-judge, --new-judge)")
    cands = [c for c in cands if c.query_id in whole]
    out: dict[str, Any] = {"claims": len(whole), "candidates": len(cands)}
    rows = {}
    coverage = new_cascade_coverage or ProduceConfig.model_fields["cascade_coverage"].default  # production's
    for name, (log, key, done, a) in sides.items():
        logged = [done[log_key(a.version, key, c)] for c in cands]  # every claim kept is judged whole in both
        cascade = None
        if name == "new" and new_cascade_regrades is not None:
            regrades = {(r["query_id"], r["rank"]): r["expected"] for r in map(
                json.loads, new_cascade_regrades.read_text(encoding="utf-8").splitlines()) if r["expected"] is not None}
            with tempfile.TemporaryDirectory() as tmp, RunStore.open(plain_store(new_cascade_grades, Path(tmp)),
                                                                      readonly=True) as run:
                lists = run.graded_lists(regrades)
            try:
                cascade = JudgeCascade.margin(a.program.state.judge, lists, coverage=coverage, learned_from=(
                    f"run store {new_cascade_grades.name} regraded ({new_cascade_regrades.name})"))
            except ValueError as exc:  # too few lists regraded whole
                raise SystemExit(f"--new-cascade-regrades: {exc}") from None
        elif name == "new" and new_cascade_grades is not None:
            with tempfile.TemporaryDirectory() as tmp:
                cascade = production_cascade(a.program, "margin", coverage=coverage,
                                             grades=plain_store(new_cascade_grades, Path(tmp)))
        elif name == "new" and new_cascade_own:  # as production learns it with no --cascade-grades
            cascade = production_cascade(a.program, "margin", coverage=coverage)
        judge = RelevanceJudge(a.program, mode="graded", cascade=cascade)
        rows[name] = recalibrated_rows(judge, cands, logged)  # no LM call: the logged grades, cut and settled
        score = score_judge(cands, rows[name])
        out[name] = {"log": ", ".join(map(str, listed(log))), "artifact": a.version, "judge": key,
                     **({"cascade": cascade.describe(),
                         "skipped": sum("skipped" in (r or {}).get("judgment", {}) for r in rows[name])}
                        if cascade is not None else {}),
                     "binary_kappa": round(score["binary"]["kappa"], 3),
                     "positive_precision": round(score["binary"]["per_class"]["relevant"]["precision"], 3),
                     "positive_recall": round(score["binary"]["per_class"]["relevant"]["recall"], 3)}

    def label(row: dict | None) -> int | None:
        return None if row is None or row["judgment"] is None else row["judgment"]["label"]

    def relevant(row: dict | None) -> bool:
        return row is not None and row["judgment"] is not None and row["judgment"]["class"] == "positive"

    out["labels_differ"] = sum(label(a) != label(b) for a, b in zip(rows["ref"], rows["new"]))
    flips = [(c, b) for c, a, b in zip(cands, rows["ref"], rows["new"]) if relevant(a) != relevant(b)]
    out["relevant_flips"] = len(flips)
    out["flips_toward_people"] = sum(relevant(b) == (c.gold == "positive") for c, b in flips)
    out["paired_kappa_difference"] = paired_kappa_difference(cands, rows["ref"], rows["new"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("artifact", type=Path)
    p.add_argument("--candidates", type=Path, nargs="+", required=True, help=(
        "the agreement run's candidates.json (several: samples of other claims, compared pooled)"))
    p.add_argument("--ref", type=Path, nargs="+", required=True, help="judgments.jsonl of the reference judge")
    p.add_argument("--new", type=Path, nargs="+", required=True, help="judgments.jsonl of the judge compared with it")
    p.add_argument("--ref-judge", default="graded", help="the judge part of the reference log's keys")
    p.add_argument("--new-judge", default="graded", help="the judge part of the other log's keys")
    p.add_argument("--new-artifact", type=Path, default=None,
                   help="the artifact whose version keys the other log and whose calibration cuts it (default: the "
                        "first)")
    p.add_argument("--new-cascade-grades", type=Path, default=None, metavar="STORE",
                   help="label the other log as production's margin cascade learned from this run store (.db or "
                        ".db.gz) would")
    p.add_argument("--new-cascade-own", action="store_true",
                   help="label the other log as production's margin cascade learned from the artifact's own "
                        "calibration grades would (--judge-cascade margin without --cascade-grades)")
    p.add_argument("--new-cascade-regrades", type=Path, default=None, metavar="JSONL",
                   help="learn that margin from the store's lists graded again with the other artifact's prompt "
                        "(rows of query_id, rank, expected)")
    p.add_argument("--new-cascade-coverage", type=float, default=None, metavar="SHARE",
                   help="the margin's coverage (default: production's --cascade-coverage default)")
    args = p.parse_args(argv)
    print(json.dumps(compare(args.artifact, args.candidates, args.ref, args.new, ref_judge=args.ref_judge,
                             new_judge=args.new_judge, new_artifact=args.new_artifact,
                             new_cascade_grades=args.new_cascade_grades,
                             new_cascade_coverage=args.new_cascade_coverage, new_cascade_own=args.new_cascade_own,
                             new_cascade_regrades=args.new_cascade_regrades),
                     indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
