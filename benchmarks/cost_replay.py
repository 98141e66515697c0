"""Where a production run's LM time goes, and what the judge cascade would save, replayed from what was stored: no
LM call.

A run store keeps every candidate's grade (p(0..3), E), cosine and BM25 score, and its ``usage`` table the calls,
tokens and seconds of each step. ``syntra agreement`` keeps, for held-out claims people judged, every candidate's
grade from the same artifact. Both are enough to replay any cascade rule (``syntra_dspy.judging.cascade``): which
candidates it would not have asked, which labels would then differ from the full judge's, and, on the held-out
claims, the binary kappa against people's qrels before and after. The LM time saved is the skipped share of the
grading calls at the run's mean seconds per grading call. The script also reads the store for why query writing
takes ~3 calls a query: the queries kept as rewrites of a rejected first answer, and the checks that rejected the
answers that stayed rejected.

    python -m benchmarks.cost_replay          # make bench-cost-replay: the SciFact store and held-out claims

Writes ``benchmarks/results/cost_replay/README.md`` (the generated part; what follows its end marker is kept) and
``cost_replay.json``. Takes a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.agreement import cohen_kappa, paired_kappa_bootstrap, to_binary
from syntra_dspy.judging.calibration import CalibrationSample, JudgeCalibration, fit_calibration
from syntra_dspy.judging.cascade import GradedCandidate, JudgeCascade, sample_lists
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate, RelevanceJudge
from syntra_dspy.production.store import RunStore
from syntra_dspy.programs.validation import QueryForm, query_problem
from syntra_dspy.signatures.types import label_class

try:  # python -m benchmarks.cost_replay (make bench-cost-replay)
    from benchmarks.common import REPO, RESULTS, open_store, write_readme
except ModuleNotFoundError:  # python benchmarks/cost_replay.py: this folder is first on the path
    from common import REPO, RESULTS, open_store, write_readme  # type: ignore

COVERAGES = (0.8, 0.9, 0.95, 0.98, 0.99)


@dataclass
class Listed:
    """One query's candidates with their stored grades: what the judge saw, and the reference where there is one."""

    query_id: str
    candidates: list[Candidate]
    grades: list[Grade]
    keep: list[int] = field(default_factory=list)  # positions always graded (the query's own document)
    gold: list[str | None] = field(default_factory=list)  # people's class per candidate (held-out claims)
    stored: list[int | None] = field(default_factory=list)  # the label the run stored


class Stub:
    """What :class:`RelevanceJudge` needs of a program to calibrate stored grades: the calibration."""

    def __init__(self, calibration: JudgeCalibration) -> None:
        self.state = type("State", (), {"judge": calibration})()


def labels_of(judge: RelevanceJudge, listed: Listed) -> tuple[list[int], int]:
    """The judge's labels of one query's stored grades, with its cascade if it has one, and how many it skipped."""
    judged = judge.label_grades(listed.candidates, listed.grades, keep=listed.keep)
    return [j.label for j in judged], sum(j.skipped is not None for j in judged)  # type: ignore[union-attr]


# -- reading what was stored -------------------------------------------------------------------------------------
def store_lists(run: RunStore) -> list[Listed]:
    rows = run.rows(
        "SELECT c.query_id, c.rank, c.doc_id, c.score, c.label, g.p0, g.p1, g.p2, g.p3, g.written, g.mass, g.lexical, "
        "q.doc_id FROM candidates c JOIN queries q USING (query_id) JOIN grades g USING (query_id, rank) "
        "ORDER BY c.query_id, c.rank")
    out: dict[str, Listed] = {}
    for qid, rank, doc_id, cosine, label, p0, p1, p2, p3, written, mass, lexical, source in rows:
        listed = out.setdefault(qid, Listed(qid, [], []))
        if doc_id == source:
            listed.keep.append(len(listed.candidates))
        listed.candidates.append(Candidate("", cosine, lexical=lexical))
        listed.grades.append(Grade((p0, p1, p2, p3), written, mass))
        listed.stored.append(label)
    return list(out.values())


def agreement_lists(folder: Path, version: str) -> list[Listed]:
    """A ``syntra agreement`` folder's candidates of ``version``'s graded judge, one list per claim."""
    grades = {}
    for line in (folder / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["artifact"] == version and row["judge"] == "graded":
            grades[(row["query_id"], row["doc_id"])] = Grade.from_dict(row["judgment"]["grade"])
    out: dict[str, Listed] = {}
    for c in json.loads((folder / "candidates.json").read_text(encoding="utf-8")):
        listed = out.setdefault(c["query_id"], Listed(f"{folder.name}:{c['query_id']}", [], []))
        listed.candidates.append(Candidate("", c["cosine"], listed=c["rank"] is not None, lexical=c["lexical"]))
        listed.grades.append(grades[(c["query_id"], c["doc_id"])])
        listed.gold.append(c["gold"])
    return list(out.values())


def calibration_samples(lists: Sequence[Listed]) -> list[CalibrationSample]:
    return [CalibrationSample(l.query_id, g.expected, c.cosine, gold,  # type: ignore[arg-type]
                              "retrieved" if c.listed else "control", listed=c.listed, lexical=c.lexical)
            for l in lists for c, g, gold in zip(l.candidates, l.grades, l.gold)]


def graded_lists(lists: Sequence[Listed]) -> list[list[GradedCandidate]]:
    return [[GradedCandidate(expected=g.expected, cosine=c.cosine, lexical=c.lexical,  # type: ignore[arg-type]
                             listed=c.listed)
             for c, g in zip(l.candidates, l.grades)] for l in lists]


# -- replaying a rule ---------------------------------------------------------------------------------------------
def replay(calibration: JudgeCalibration, cascade: JudgeCascade | None, lists: Sequence[Listed]) -> dict[str, Any]:
    """Labels of the full judge and of the cascade on ``lists``: calls skipped, labels changed and, where people
    judged the candidates, binary kappa of each with a paired bootstrap over queries."""
    full_judge = RelevanceJudge(Stub(calibration), mode="graded")
    cascade_judge = RelevanceJudge(Stub(calibration), mode="graded", cascade=cascade)
    full: list[int] = []
    after: list[int] = []
    groups: list[str] = []
    skipped = records = records_after = 0
    for listed in lists:
        a, _ = labels_of(full_judge, listed)
        b, n = labels_of(cascade_judge, listed)
        full += a
        after += b
        skipped += n
        groups += [listed.query_id] * len(a)
        records += is_record(a)
        records_after += is_record(b)
    out: dict[str, Any] = {"candidates": len(full), "skipped": skipped, "skipped_share": skipped / len(full),
                           "labels_changed": sum(x != y for x, y in zip(full, after)),
                           "records": records, "records_after": records_after}
    gold = [g for listed in lists for g in listed.gold]
    if gold and None not in gold:
        binary = ("relevant", "non_relevant")
        before_k = cohen_kappa([to_binary(g) for g in gold], [to_binary(label_class(x)) for x in full], binary)
        after_k = cohen_kappa([to_binary(g) for g in gold], [to_binary(label_class(x)) for x in after], binary)
        paired = paired_kappa_bootstrap(gold, groups, [label_class(x) for x in full],
                                        [label_class(x) for x in after], rounds=2000, seed=0)
        out.update(kappa=before_k, kappa_after=after_k, kappa_ci95=paired.get("ci95"))
    return out


def is_record(labels: Sequence[int]) -> bool:
    """A query the default export keeps (before removing duplicates): a positive and a hard negative."""
    classes = {label_class(x) for x in labels}
    return "positive" in classes and "hard_negative" in classes


def own_class_fixed(calibration: JudgeCalibration, lists: Sequence[Listed]) -> dict[str, int]:
    """An upper bound on any lossless rule for a list score: candidates whose own class is the same at E = 0 and
    E = 3 with every other candidate's grade known (the score rises with the candidate's own E, so the two ends bound
    it; a rule must also not move the others, and knows their grades only after asking them)."""
    from syntra_dspy.judging.calibration import list_contexts

    fixed = total = 0
    for listed in lists:
        expected = [g.expected for g in listed.grades]
        cosine = [c.cosine for c in listed.candidates]
        lexical = [c.lexical for c in listed.candidates]
        flags = [c.listed for c in listed.candidates]
        for i in range(len(expected)):
            classes = set()
            for e in (0.0, 3.0):
                trial = [*expected[:i], e, *expected[i + 1:]]
                context = list_contexts(trial, cosine, flags, lexical)[i]
                classes.add(calibration.classify(e, cosine[i], context, lexical[i]))
            fixed += len(classes) == 1
            total += 1
    return {"candidates": total, "own_class_fixed": fixed}


# -- where the time goes, and why writing is retried ---------------------------------------------------------------
def lm_time(run: RunStore) -> dict[str, Any]:
    usage = run.usage()
    total = sum(u["seconds"] for u in usage.values())
    steps = {stage: {"calls": u["calls"], "seconds": u["seconds"], "share": u["seconds"] / total,
                     "seconds_per_call": u["latency_s"], "prompt_tokens": u["prompt_tokens"],
                     "completion_tokens": u["completion_tokens"], "cached_prompt_share": u["cached_prompt_share"]}
             for stage, u in usage.items()}
    return {"seconds": total, "steps": steps, "queries": run.scalar("SELECT count(*) FROM queries"),
            "records": run.count_records()}


def write_rejections(run: RunStore, artifact: Any) -> dict[str, Any]:
    """What the store says of query writing: the documents that reached it, the queries kept as rewrites of a rejected
    answer (by the check the rejected answer fails today), and the checks behind the blueprints left without a
    query (the rejection the last try got)."""
    program = artifact.program
    form = QueryForm.from_examples([ex.query for ex in program.state.examples])
    rewritten: Counter[str] = Counter()
    for restated, text in run.rows("SELECT q.restated_from, t.content FROM queries q JOIN texts t "
                                   "ON t.doc_id = q.doc_id WHERE q.restated_from IS NOT NULL"):
        problem = query_problem(restated, language=program.query_language(), document=text, form=form)
        rewritten[problem.kind if problem is not None else "passes today's checks"] += 1
    failed: Counter[str] = Counter()
    for (error,) in run.rows("SELECT error FROM failures WHERE stage = 'write' AND superseded = 0"):
        for part in re.findall(r"query for blueprint \d+ ([^;]*)", error) or [error]:
            failed[_check_name(part)] += 1
    reached = run.scalar("SELECT count(*) FROM documents WHERE status IN ('done', 'partial') "
                         "OR (status = 'failed' AND stage = 'write')")
    return {"documents_reaching_write": reached, "queries": run.scalar("SELECT count(*) FROM queries"),
            "blueprints": run.scalar("SELECT coalesce(sum(n_blueprints), 0) FROM documents"),
            "kept_as_rewrites": dict(rewritten.most_common()), "left_without_query": dict(failed.most_common())}


_CHECKS = (("copies a sentence", "copy"), ("is a question", "question"), ("names no subject", "subject"),
           ("nearly duplicates", "duplicate"), ("duplicates another", "duplicate"), (" words", "form"),
           ("write exactly", "count"))


def _check_name(message: str) -> str:
    return next((name for text, name in _CHECKS if text in message), "other")


# -- the report ---------------------------------------------------------------------------------------------------
def measure(args: argparse.Namespace) -> dict[str, Any]:
    artifact = load_artifact(args.artifact)
    calibration = artifact.program.state.judge
    held = {folder.name: agreement_lists(folder, artifact.version) for folder in args.heldout}
    learn = agreement_lists(args.learn_on, artifact.version)
    with tempfile.TemporaryDirectory() as tmp, open_store(args.store, Path(tmp)) as run:
        lists = store_lists(run)
        time = lm_time(run)
        writing = write_rejections(run, artifact)
    tested = [x for group in held.values() for x in group]
    full = RelevanceJudge(Stub(calibration), mode="graded")
    mismatched = sum(label != stored for listed in lists
                     for label, stored in zip(labels_of(full, listed)[0], listed.stored))
    rules: dict[str, tuple[JudgeCalibration, JudgeCascade | None]] = {}
    rules[f"lossless, {calibration.feature}"] = (calibration, JudgeCascade.lossless(calibration))
    fused = fit_calibration(calibration_samples(learn), feature="fused")
    rules["lossless, fused fitted on the margin claims"] = (fused, JudgeCascade.lossless(fused))
    sources: dict[str, Callable[[], list[list[GradedCandidate]]]] = {
        "held-out claims": lambda: graded_lists(learn), "run store": lambda: graded_lists(lists)}
    for source, found in sources.items():
        for coverage in args.coverage:
            rules[f"margin {coverage}, learned on the {source}"] = (calibration, JudgeCascade.margin(
                calibration, found(), coverage=coverage, learned_from=source))
    results = {}
    for name, (cal, cascade) in rules.items():
        results[name] = {"cascade": cascade.describe() if cascade is not None else None,
                         "store": replay(cal, cascade, lists), "heldout": replay(cal, cascade, tested),
                         **{f"heldout {k}": replay(cal, cascade, v) for k, v in held.items()}}
    return {"artifact": f"{artifact.task}/{artifact.version}", "feature": calibration.feature,
            "store": _shown(args.store), "heldout": [_shown(f) for f in args.heldout],
            "learn_on": _shown(args.learn_on),
            "relabel_mismatches": mismatched, "lm_time": time, "write": writing, "rules": results,
            "lossless_bound": {"store": own_class_fixed(calibration, lists),
                               "heldout": own_class_fixed(calibration, tested)},
            "sample_lists": len(sample_lists(calibration.samples))}


def _shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def _f(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def report(result: dict[str, Any]) -> list[str]:
    time, write = result["lm_time"], result["write"]
    hours = time["seconds"] / 3600
    annotate = time["steps"]["annotate"]
    lines = [
        "# Records per LM-hour: where the time goes and what the judge cascade saves (replayed, no LM call)", "",
        (f"Generated by `python -m benchmarks.cost_replay` (`make bench-cost-replay`) from the run store "
        f"`{Path(result['store']).name}` (artifact `{result['artifact']}`, {result['feature']} judge) and the "
        f"held-out claims of {', '.join(f'`{Path(h).parent.name}/{Path(h).name}`' for h in result['heldout'])} "
        f"(margins learned, without labels, on `{Path(result['learn_on']).parent.name}/"
        f"{Path(result['learn_on']).name}` or on the store's own grades). Replaying the full judge on the stored "
        f"grades gives the stored labels ({result['relabel_mismatches']} mismatches)."), "",
        "## Where the LM time goes", "",
        (f"{time['queries']} queries, {time['records']} records (complete, a positive and a hard negative; before "
        f"removing duplicates), {hours:.1f} h of LM time: **{time['records'] / hours:.1f} records per LM-hour**."), "",
        "| step | calls | hours | share | s/call | prompt tokens/call | generated tokens/call | prompt reused |",
        "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for stage, s in sorted(time["steps"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| {stage} | {s['calls']} | {s['seconds'] / 3600:.1f} | {100 * s['share']:.0f}% | "
                     f"{s['seconds_per_call']:.1f} | {s['prompt_tokens'] / s['calls']:.0f} | "
                     f"{s['completion_tokens'] / s['calls']:.0f} | "
                     f"{_pct(s['cached_prompt_share'])} |")
    lines += ["", "## The judge cascade, replayed", "",
              (f"A rule's LM time saved is its skipped share of the {annotate['calls']} grading calls at "
              f"{annotate['seconds_per_call']:.2f} s each; records per LM-hour after it count the records its labels "
              "leave. Kappa: binary, against people's qrels on the held-out claims (all candidates: the top 8, any "
              "positive retrieval missed, one random document), with the paired 95% interval of after minus before "
              "over claims."), "",
              ("| rule | grade's part of the score | store: calls skipped | labels changed | records | "
              "records/LM-hour | held-out: skipped | changed | κ before | κ after | κ after − before [95% CI] |"),
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in result["rules"].items():
        s, h, cascade = r["store"], r["heldout"], r["cascade"]
        saved = s["skipped_share"] * annotate["seconds"]
        rate = s["records_after"] / ((time["seconds"] - saved) / 3600)
        span = "—" if cascade is None else f"[{cascade['score_range'][0]:.2f}, {cascade['score_range'][1]:.2f}]"
        ci = h.get("kappa_ci95") or [None, None]
        lines.append(
            f"| {name} | {span} | {s['skipped']} ({100 * s['skipped_share']:.0f}%) | {s['labels_changed']} | "
            f"{s['records']} → {s['records_after']} | {s['records'] / hours:.1f} → {rate:.1f} | "
            f"{100 * h['skipped_share']:.0f}% | {h['labels_changed']} | {_f(h.get('kappa'))} | "
            f"{_f(h.get('kappa_after'))} | {_f((h.get('kappa_after') or 0) - (h.get('kappa') or 0), 3)} "
            f"[{_f(ci[0])}, {_f(ci[1])}] |")
    per = [(name, {k: v for k, v in r.items() if k.startswith("heldout ")}) for name, r in result["rules"].items()]
    lines += ["", "Per held-out sample (κ before → after; labels changed):", "",
              "| rule | " + " | ".join(k.removeprefix("heldout ") for k in per[0][1]) + " |",
              "|---|" + "---|" * len(per[0][1])]
    for name, samples in per:
        lines.append(f"| {name} | " + " | ".join(
            f"{_f(v.get('kappa'))} → {_f(v.get('kappa_after'))}; {v['labels_changed']}" for v in samples.values())
            + " |")
    bound = result["lossless_bound"]
    lines += ["", (f"Upper bound of any lossless rule for the {result['feature']} score: with every other candidate's "
              f"grade known, a candidate's own class is the same at E = 0 and E = 3 for "
              f"{bound['store']['own_class_fixed']} of {bound['store']['candidates']} stored candidates and "
              f"{bound['heldout']['own_class_fixed']} of {bound['heldout']['candidates']} held-out ones."), "",
              "## Why query writing takes ~3 calls a query", "",
              (f"{write['documents_reaching_write']} documents reached the write step; {write['blueprints']} "
              f"blueprints, {write['queries']} queries kept, {time['steps']['write']['calls']} write-step calls "
              f"(writes, retries and rewrites together: the store counts them as one step)."), "",
              "| | " + " | ".join(sorted(set(write["kept_as_rewrites"]) | set(write["left_without_query"]))) + " |"]
    kinds = sorted(set(write["kept_as_rewrites"]) | set(write["left_without_query"]))
    lines += ["|---|" + "---:|" * len(kinds),
              "| queries kept as a rewrite of a rejected answer (the check it fails today) | "
              + " | ".join(str(write["kept_as_rewrites"].get(k, 0)) for k in kinds) + " |",
              "| blueprints left without a query (the check the last try failed) | "
              + " | ".join(str(write["left_without_query"].get(k, 0)) for k in kinds) + " |"]
    return lines


def main() -> None:
    agreement = RESULTS / "judge_agreement_weighted"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=REPO / "benchmarks" / "runs" / "scifact-hybrid-v2.db.gz",
                    help="run store (.db, or .db.gz: read from a copy)")
    ap.add_argument("--artifact", type=Path, default=REPO / "artifacts" / "scifact" / "22e653baa2bb")
    ap.add_argument("--heldout", type=Path, nargs="+", default=[agreement / "seed1", agreement / "seed2"],
                    help="syntra agreement folders whose claims test each rule")
    ap.add_argument("--learn-on", type=Path, default=agreement / "seed0",
                    help="a syntra agreement folder whose grades a margin (and the fused score) is learned on")
    ap.add_argument("--coverage", type=float, nargs="+", default=list(COVERAGES))
    ap.add_argument("--out", type=Path, default=RESULTS / "cost_replay")
    args = ap.parse_args()
    result = measure(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cost_replay.json").write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    lines = report(result)
    write_readme(args.out, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
