"""Does the graded judge agree with people as well with a shorter grading prompt, and what does it save?

Grading is production's largest step on the embedded model (most of a record's prompt tokens: the candidate's text,
clipped at the compile's ``max_doc_chars``, and the instruction). This probe grades with a shorter prompt instead,
``--clip`` characters of every document, ``--without-guidance`` (the task definition and the fixed 0-3 scale, as
``syntra artifacts recalibrate --without-guidance`` makes it) and/or ``--brief`` (the relevance definition and a
one-line scale, as ``--brief-grading`` makes it), and measures what that costs in agreement and saves in time and
tokens, before any version is made:

1. the artifact's calibration set, built as its compile built it (as ``syntra artifacts recalibrate`` does), is
   graded with the shorter prompt and the judge's score is refitted on those grades (same feature, same cut rule);
2. the held-out candidates of earlier ``syntra agreement`` runs (``candidates.json``; several runs: their claims
   pooled) are graded with the shorter prompt and labelled by the refitted judge; the full side is those runs' own
   judgments (``judgments.jsonl``), settled again by the artifact's judge, so no full-prompt grade is asked again;
3. binary and three-class κ against people's qrels for both, the paired bootstrap over claims of short minus full;
4. time and prompt tokens a grading call, side by side: ``--timing`` held-out candidates, each graded with both
   prompts with a call for another claim between the two (llama.cpp reuses the longest prefix of the previous
   prompt, so the second call for the same candidate would otherwise reuse the first one's text), sides alternating
   first.

DSPy's cache is off; grades are logged under ``--work`` as they are made (``judgments.jsonl``), so an interrupted
probe resumes. Run from the repository root while nothing else uses the CPU:

    python -m benchmarks.judge_prompt_probe --brief \\
        --artifact artifacts/scifact/22e653baa2bb --corpus ../shared/data/scifact/corpus.jsonl \\
        --run benchmarks/results/judge_agreement_hybrid_fresh benchmarks/results/judge_agreement_weighted/seed2 \\
        --work ~/judge-brief --out brief.json

Its log keys the shorter prompt's judgments by the variant (``brief|graded|CLAIM|DOC``); renamed to a version's
(``VERSION|graded|...``), they replay under ``benchmarks/compare_judgments.py`` with that version's cascade
(``experiments/judge_brief_margin/``).
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

import dspy

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.calibration import fit_calibration
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.judging.measure import JudgmentLog, judge_candidates, paired_kappa_difference, score_judge
from syntra_dspy.lm.roles import build_lm, prepare_lm
from syntra_dspy.lm.usage import UsageMeter
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.retrieval.corpus import read_corpus

logger = logging.getLogger("judge_prompt_probe")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clip", type=int, default=None,
                   help="characters of a document the judge is shown (default: the artifact's max_doc_chars)")
    p.add_argument("--without-guidance", action="store_true",
                   help="grade without the compiled annotation guidance (task definition and 0-3 scale only)")
    p.add_argument("--brief", action="store_true",
                   help="grade with the brief prompt (relevance definition and a one-line scale: --brief-grading)")
    p.add_argument("--artifact", default="artifacts/scifact/22e653baa2bb")
    p.add_argument("--corpus", required=True)
    p.add_argument("--run", type=Path, nargs="+", required=True,
                   help="syntra agreement output folders (candidates, judgments); several: their claims pooled")
    p.add_argument("--work", type=Path, required=True, help="where this probe's grades are logged (resumable)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--timing", type=int, default=40, help="held-out candidates graded at both clips for the timing")
    p.add_argument("--generator", default="embedded")
    p.add_argument("--queries", type=int, default=None, help="only the runs' first N claims (a smoke run)")
    args = p.parse_args()
    if args.clip is None and not args.without_guidance and not args.brief:
        p.error("give --clip N, --without-guidance and/or --brief: the prompt to compare with the artifact's")
    return args


def shorter(program: Any, clip: int | None, without_guidance: bool, brief: bool = False) -> Any:
    """``program`` with the shorter grading prompt: documents clipped at ``clip`` characters, the annotation
    guidance left out (as ``syntra artifacts recalibrate --without-guidance`` does), the brief prompt (as
    ``--brief-grading`` does); nothing else changes."""
    out = program.with_components(grade_guidance=False) if without_guidance else program
    out = out.with_components(grade_prompt="brief") if brief else out
    if clip is not None:
        out.max_doc_chars = clip
    return out


def variant_key(clip: int | None, without_guidance: bool, brief: bool = False) -> str:
    """The shorter prompt's name in the judgment log, the report and the output."""
    return "-".join([*([f"clip{clip}"] if clip is not None else []), *(["noguidance"] if without_guidance else []),
                     *(["brief"] if brief else [])])


def refit(art: Any, short: Any, lm: Any, work: Path) -> tuple[Any, dict[str, Any]]:
    """The artifact's calibration set, built as its compile built it, graded with the shorter prompt, and the judge
    refitted on those grades (same feature); kept under ``work`` once made."""
    from syntra_dspy.judging.calibration import CalibrationSample
    from syntra_dspy.production.recalibrate import _graded_set

    judge = art.program.state.judge
    done = work / "calibration.json"
    if done.exists():
        samples = [CalibrationSample(**s) for s in json.loads(done.read_text())]
    else:
        settings = art.meta.optimizer
        started = time.perf_counter()
        samples, graded, _ = _graded_set(art, settings.get("calibration_labels"),
                                         int(settings.get("calibration_queries") or 0), (), lm, None, UsageMeter(),
                                         None, program=short)
        logger.info("calibration set: %d candidates graded with the shorter prompt (%.0f s)", graded,
                    time.perf_counter() - started)
        done.write_text(json.dumps([s.__dict__ for s in samples], indent=1) + "\n", encoding="utf-8")
    fitted = fit_calibration(samples, feature=judge.feature)
    return fitted, {"candidates": len(samples), "feature": fitted.feature,
                    "binary_kappa": fitted.summary.binary_kappa, "positive_recall": fitted.summary.positive_recall,
                    "original_candidates": judge.summary.candidates,
                    "original_binary_kappa": judge.summary.binary_kappa,
                    "original_positive_recall": judge.summary.positive_recall}


def timing(full: Any, short: Any, candidates: list[JudgedCandidate], corpus: Any, lm: Any, n: int) -> dict[str, Any]:
    """Seconds and prompt tokens a grading call with each prompt, each candidate graded with both, another claim's
    call in between (no shared prefix beyond the instruction), the side asked first alternating."""
    by_query: dict[str, list[JudgedCandidate]] = {}
    for c in candidates:
        by_query.setdefault(c.query_id, []).append(c)
    rng = random.Random(0)
    queries = sorted(by_query)
    rng.shuffle(queries)
    picks = [rng.choice(by_query[q]) for q in queries]
    picks = picks[: 2 * (min(n, len(picks)) // 2)]
    calls: dict[str, list[tuple[float, int, int]]] = {"full": [], "short": []}

    def grade(side: str, c: JudgedCandidate) -> None:
        program = full if side == "full" else short
        before = len(lm.history)
        started = time.perf_counter()
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None):
            program.grade_candidate(c.query, corpus[c.doc_id].content)
        usage = (lm.history[-1].get("usage") or {}) if len(lm.history) > before else {}
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        calls[side].append((time.perf_counter() - started, int(usage.get("prompt_tokens", 0)), int(cached)))

    for i in range(0, len(picks), 2):  # a b a b: candidate a with one prompt, b with the other, then swapped
        a, b = picks[i], picks[i + 1]
        first, second = ("full", "short") if (i // 2) % 2 == 0 else ("short", "full")
        grade(first, a), grade(second, b), grade(second, a), grade(first, b)
    out: dict[str, Any] = {"candidates": len(picks)}
    for side, rows in calls.items():
        out[side] = {"seconds_per_call": sum(r[0] for r in rows) / len(rows),
                     "prompt_tokens_per_call": sum(r[1] for r in rows) / len(rows),
                     "cached_prompt_tokens_per_call": sum(r[2] for r in rows) / len(rows), "calls": len(rows)}
    out["seconds_ratio"] = out["short"]["seconds_per_call"] / out["full"]["seconds_per_call"]
    out["prompt_tokens_ratio"] = out["short"]["prompt_tokens_per_call"] / max(1e-9,
                                                                              out["full"]["prompt_tokens_per_call"])
    return out


def progress(total: int) -> Any:
    count, started = [0], time.perf_counter()

    def tick() -> None:
        count[0] += 1
        if count[0] % 25 == 0 or count[0] == total:
            logger.info("held-out with the shorter prompt: %d/%d candidates (%.0f s)", count[0], total,
                        time.perf_counter() - started)

    return tick


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)
    art = load_artifact(args.artifact)
    short = shorter(load_artifact(args.artifact).program, args.clip, args.without_guidance, args.brief)
    key = variant_key(args.clip, args.without_guidance, args.brief)
    logger.info("the shorter grading instruction (%s):\n%s", key, short.grade.signature.instructions)
    corpus = read_corpus(args.corpus)
    lm = build_lm(resolve_generator_spec(art.meta, args.generator), role="generator", cache=False)
    prepare_lm(lm)
    candidates = [JudgedCandidate(**c) for run in args.run for c in json.loads((run / "candidates.json").read_text())]
    if len({(c.query_id, c.doc_id) for c in candidates}) != len(candidates):
        raise SystemExit("the runs share candidates: give runs of different claims")
    if args.queries is not None:
        kept = list(dict.fromkeys(c.query_id for c in candidates))[: args.queries]
        candidates = [c for c in candidates if c.query_id in kept]
    log = JudgmentLog(args.work / "judgments.jsonl")
    if not (args.work / "full.jsonl").exists():  # the earlier runs' full-prompt judgments, read as they are
        with (args.work / "full.jsonl").open("wb") as out:
            for run in args.run:
                with (run / "judgments.jsonl").open("rb") as src:
                    shutil.copyfileobj(src, out)
    full_log = JudgmentLog(args.work / "full.jsonl")
    missing = sum(f"{art.version}|graded|{c.query_id}|{c.doc_id}" not in full_log.done for c in candidates)
    if missing:
        raise SystemExit(f"{missing} held-out candidates have no full-prompt judgment of {art.version} in the runs")

    fitted, calibration = refit(art, short, lm, args.work)
    short_program = short.with_components(judge=fitted)  # a copy keeps the clip
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None):
        full_rows = judge_candidates(RelevanceJudge(art.program), art.version, candidates, corpus=corpus,
                                     log=full_log)
        meter = UsageMeter()
        started = time.perf_counter()
        short_rows = judge_candidates(RelevanceJudge(short_program), key, candidates, corpus=corpus, log=log,
                                      meter=meter, progress=progress(len(candidates)))
    logger.info("held-out: %d candidates with %s (%.0f s)", len(candidates), key,
                time.perf_counter() - started)
    report = {
        "variant": key, "clip": short.max_doc_chars, "full_clip": art.program.max_doc_chars,
        "without_guidance": args.without_guidance, "brief": args.brief, "artifact": art.version,
        "runs": [str(r) for r in args.run],
        "calibration": calibration,
        "heldout": {"candidates": len(candidates), "queries": len({c.query_id for c in candidates}),
                    "full": score_judge(candidates, full_rows), "short": score_judge(candidates, short_rows),
                    "short_minus_full": paired_kappa_difference(candidates, full_rows, short_rows)},
        "timing": timing(art.program, short_program, candidates, corpus, lm, args.timing),
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    h = report["heldout"]
    print(f"{key}: binary κ {h['full']['binary']['kappa']:.3f} -> {h['short']['binary']['kappa']:.3f} "
          f"(difference {h['short_minus_full']['difference']:+.3f} {h['short_minus_full']['ci95']}); "
          f"seconds a call x{report['timing']['seconds_ratio']:.2f}, prompt tokens x"
          f"{report['timing']['prompt_tokens_ratio']:.2f}")


if __name__ == "__main__":
    main()
