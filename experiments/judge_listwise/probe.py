"""Probe: one grading call for a query's whole candidate list, instead of one per candidate: as good? (issue 42)

A grading call today holds one candidate: the instruction (task definition and 0-3 scale, ~176 tokens without the
compiled guidance) and the query are sent again with each of a query's 8 candidates. The other ways of sending less
(a shorter candidate: ``../judge_clip/``; fewer calls: the margin cascade) are spent, so this probe asks the one
question left about grading's token floor: one call per query, the instruction and query once, the candidates
numbered, the answer one line per candidate (``1: 2``, ``2: 0``, ...), each candidate's E read from the label tokens'
probabilities at its grade position.

How it asks (embedded 1.5B model, the build the engine chooses): the prompt is the chat template's rendering of the
list prompt; the model's greedy answer is followed position by position: at each grade position the probabilities
of the four label tokens (renormalised, as the pointwise judge reads them) give the grade, the most probable label is
written, and ``"\\n{next}: "`` is fed before the next position, as a grammar would force it. That is the answer a
served model's ``top_logprobs`` per token would give under the same constraint. The instruction is the guidance-free
one (``syntra artifacts recalibrate --without-guidance``) with its first and last sentence said for a list.

1. the artifact's calibration set, built as its compile built it, graded list by list (one list per calibration
   query, in the set's order), and the judge's score refitted on those grades (same feature);
2. the held-out claims of earlier ``syntra agreement`` runs graded list by list (each claim's candidates in the run's
   order) and labelled by the refit; the reference is those runs' own pointwise judgments, settled again by the
   artifact's judge (no pointwise grade asked again);
3. binary and three-class κ against people's qrels, the paired bootstrap over claims of list minus pointwise;
4. prompt tokens per candidate, exactly: the list prompts' token counts against the pointwise prompts rendered for
   the same candidates (with and without the guidance), by the same tokenizer and template.

Grades are logged under ``--work`` list by list (``judgments.jsonl``, ``calibration.json``), so an interrupted probe
resumes. Run from the repository root while nothing else uses the CPU:

    PYTHONPATH=. python experiments/judge_listwise/probe.py --artifact artifacts/scifact/22e653baa2bb \\
        --corpus ../shared/data/scifact/corpus.jsonl \\
        --run benchmarks/results/judge_agreement_hybrid_fresh benchmarks/results/judge_agreement_weighted/seed2 \\
        --work ~/judge-listwise --out experiments/judge_listwise/listwise.json
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging import calibration_set as js
from syntra_dspy.judging.calibration import CalibrationSample, fit_calibration
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.grading import MIN_LABEL_MASS, DigitLabelAdapter, Grade
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.judging.measure import JudgmentLog, log_key, paired_kappa_difference, recalibrated_rows, score_judge
from syntra_dspy.lm.roles import build_lm, prepare_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.programs import context as ctx
from syntra_dspy.retrieval.corpus import read_corpus

logger = logging.getLogger("judge_listwise")

KEY = "listwise"  # the judge part of this probe's log keys
POINT_FIRST = "Judge the one document below for the query on this scale:"
LIST_FIRST = "Judge each numbered document below for the query on this scale, each one on its own:"
POINT_LAST = re.compile(r"Your whole answer is the digit of your\s+label\.")
LIST_LAST = ("Answer with one line per document, in the order shown: the document's number, a colon, and the digit "
             "of its label.")
ASK = "Labels (one line per document, number: digit):"


def list_instruction(program: Any) -> str:
    """The program's grading instruction said for a numbered list (refuses one whose sentences were rewritten)."""
    text = program.grade.signature.instructions
    if POINT_FIRST not in text or not POINT_LAST.search(text):
        raise SystemExit("this artifact's grading instruction is not the fixed scale's wording; the probe would "
                         "not know how to say it for a list")
    return POINT_LAST.sub(LIST_LAST, text.replace(POINT_FIRST, LIST_FIRST))


def chatml(system: str, user: str) -> str:
    """The chat template of the embedded Qwen2.5 models, up to the start of the assistant's answer."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


def list_prompt(instruction: str, query: str, documents: Sequence[str]) -> str:
    user = "\n\n".join([f"Query: {query}", *(f"Document {i}: {d}" for i, d in enumerate(documents, 1)), ASK])
    return chatml(instruction, user) + "1: "


def pointwise_prompt(program: Any, query: str, document: str) -> str:
    (system, user) = DigitLabelAdapter().format(program.grade.signature, [], {"query": query, "document": document})
    return chatml(system["content"], user["content"])


class ListGrader:
    """Grades one query's candidates in one pass over the embedded model's context (see the module docstring)."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.digits = [self._one(str(k)) for k in range(4)]

    def _one(self, text: str) -> int:
        (token,) = self.tokens(text)
        return token

    def tokens(self, text: str) -> list[int]:
        return self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _label_logprobs(self) -> np.ndarray:
        import llama_cpp

        n_vocab = self.llama.n_vocab()
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.llama._ctx.ctx, -1), shape=(n_vocab,))
        logits = logits.astype(np.float64)
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        return logprobs[self.digits]

    def grade(self, prompt: str, count: int) -> tuple[list[Grade | None], int, int, float]:
        """The grades of ``count`` numbered candidates, the prompt's and the answer's token counts, and the seconds
        taken."""
        started = time.perf_counter()
        prompt_tokens = self.tokens(prompt)
        self.llama.reset()  # eval drops the context's cache from n_tokens on: nothing carries over
        self.llama.eval(prompt_tokens)
        grades: list[Grade | None] = []
        answer = 0
        for position in range(1, count + 1):
            raw = np.exp(self._label_logprobs())
            mass = float(raw.sum())
            written = int(np.argmax(raw))
            grades.append(Grade(tuple(float(p) for p in raw / mass), written, min(mass, 1.0))
                          if mass >= MIN_LABEL_MASS else Grade(None, written, mass))
            answer += 1
            if position < count:
                fed = [self.digits[written], *self.tokens(f"\n{position + 1}: ")]
                answer += len(fed) - 1
                self.llama.eval(fed)
        return grades, len(prompt_tokens), answer, time.perf_counter() - started


def lists_of(candidates: Sequence[Any], key: Any) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(key(c), []).append(i)
    return groups


def refit(art: Any, short: Any, grader: ListGrader, instruction: str, work: Path, lm: Any
          ) -> tuple[Any, dict[str, Any]]:
    """The calibration set graded list by list and the judge refitted on it; kept under ``work`` once made."""
    from syntra_dspy.production.recalibrate import _graded_set

    judge = art.program.state.judge
    done = work / "calibration.json"
    if done.exists():
        saved = json.loads(done.read_text())
        samples, tokens = [CalibrationSample(**s) for s in saved["samples"]], saved["prompt_tokens"]
    else:
        spent = {"prompt_tokens": 0, "seconds": 0.0}

        def grade_set(program: Any, material: Sequence[JudgedCandidate], corpus: Any, **_: Any) -> list:
            out: list[Grade | None] = [None] * len(material)
            for members in lists_of(material, lambda c: c.query).values():
                texts = [ctx.clip(material[i].text if material[i].text is not None
                                  else corpus[material[i].doc_id].content, short.max_doc_chars) for i in members]
                grades, tokens, _, seconds = grader.grade(
                    list_prompt(instruction, material[members[0]].query, texts), len(members))
                spent["prompt_tokens"] += tokens
                spent["seconds"] += seconds
                for i, g in zip(members, grades):
                    out[i] = g
                logger.info("calibration: a list of %d graded (%d prompt tokens, %.0f s)", len(members), tokens,
                            seconds)
            return out

        original, js.grade_set = js.grade_set, grade_set
        try:
            settings = art.meta.optimizer
            samples, _, _ = _graded_set(art, settings.get("calibration_labels"),
                                             int(settings.get("calibration_queries") or 0), (), lm, None,
                                             _Meter(), None, program=short)
        finally:
            js.grade_set = original
        tokens = spent["prompt_tokens"]
        done.write_text(json.dumps({"samples": [s.__dict__ for s in samples], "prompt_tokens": tokens,
                                    "seconds": spent["seconds"]}, indent=1) + "\n", encoding="utf-8")
    fitted = fit_calibration(samples, feature=judge.feature)
    return fitted, {"candidates": len(samples), "prompt_tokens": tokens, "feature": fitted.feature,
                    "binary_kappa": fitted.summary.binary_kappa, "positive_recall": fitted.summary.positive_recall,
                    "cv_binary_kappa": dict(fitted.summary.cv_binary_kappa),
                    "original_binary_kappa": judge.summary.binary_kappa,
                    "original_cv_binary_kappa": dict(judge.summary.cv_binary_kappa)}


class _Meter:
    """A stand-in for the usage meter ``_graded_set`` books the calibration's calls on (the probe counts its own)."""

    def stage(self, name: str) -> Any:
        import contextlib

        return contextlib.nullcontext()


def grade_heldout(candidates: list[JudgedCandidate], corpus: Any, short: Any, grader: ListGrader, instruction: str,
                  log: JudgmentLog, version: str) -> None:
    """Every held-out claim not graded yet, as one list; each candidate's grade logged (the list's prompt tokens and
    seconds shared out evenly)."""
    groups = lists_of(candidates, lambda c: c.query_id)
    started, done = time.perf_counter(), 0
    for members in groups.values():
        if all(log_key(version, KEY, candidates[i]) in log.done for i in members):
            continue
        texts = [ctx.clip(corpus[candidates[i].doc_id].content, short.max_doc_chars) for i in members]
        grades, tokens, answer, seconds = grader.grade(
            list_prompt(instruction, candidates[members[0]].query, texts), len(members))
        for position, (i, g) in enumerate(zip(members, grades), 1):
            c = candidates[i]
            log.add({"key": log_key(version, KEY, c), "artifact": version, "judge": KEY, "query_id": c.query_id,
                     "doc_id": c.doc_id, "position": position, "list": len(members),
                     "list_prompt_tokens": tokens, "list_completion_tokens": answer,
                     "list_seconds": round(seconds, 3),
                     "judgment": None if g is None else {"grade": g.to_dict()}})
        done += 1
        logger.info("held-out: claim %d/%d graded as a list of %d (%d prompt tokens, %.0f s; %.0f s in all)", done,
                    len(groups), len(members), tokens, seconds, time.perf_counter() - started)


def logged_rows(candidates: list[JudgedCandidate], log: JudgmentLog, version: str) -> list[dict | None]:
    """The logged list grades as judgment rows :func:`recalibrated_rows` cuts (label and score from the refit)."""
    rows: list[dict | None] = []
    for c in candidates:
        row = log.done[log_key(version, KEY, c)]
        grade = (row.get("judgment") or {}).get("grade")
        share = {"seconds": row["list_seconds"] / row["list"], "prompt_tokens": row["list_prompt_tokens"] / row["list"],
                 "completion_tokens": row["list_completion_tokens"] / row["list"]}  # the list's cost, shared out
        rows.append(None if grade is None else {**row, **share, "judgment": {"label": None, "grade": grade,
                                                                             "score": None, "class": None}})
    return rows


def token_counts(candidates: list[JudgedCandidate], corpus: Any, art: Any, short: Any, grader: ListGrader,
                 instruction: str) -> dict[str, Any]:
    """Prompt tokens per candidate, exactly, for the same candidates: one list per claim against one call each."""
    lists = point_with = point_without = 0
    for members in lists_of(candidates, lambda c: c.query_id).values():
        query = candidates[members[0]].query
        texts = [ctx.clip(corpus[candidates[i].doc_id].content, short.max_doc_chars) for i in members]
        lists += len(grader.tokens(list_prompt(instruction, query, texts)))
        for text in texts:
            point_with += len(grader.tokens(pointwise_prompt(art.program, query, text)))
            point_without += len(grader.tokens(pointwise_prompt(short, query, text)))
    n = len(candidates)
    return {"candidates": n, "list_per_candidate": lists / n, "pointwise_with_guidance_per_candidate": point_with / n,
            "pointwise_without_guidance_per_candidate": point_without / n,
            "list_over_pointwise_with_guidance": lists / point_with,
            "list_over_pointwise_without_guidance": lists / point_without}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--artifact", default="artifacts/scifact/22e653baa2bb")
    p.add_argument("--corpus", required=True)
    p.add_argument("--run", type=Path, nargs="+", required=True,
                   help="syntra agreement output folders (candidates, judgments); several: their claims pooled")
    p.add_argument("--compare", type=Path, nargs="*", default=[], metavar="JUDGMENTS.jsonl",
                   help="another pointwise log of the same claims, reported beside (e.g. the guidance-free judge's)")
    p.add_argument("--compare-artifact", type=Path, default=None, help="the version that keyed and cuts --compare")
    p.add_argument("--work", type=Path, required=True, help="where this probe's grades are logged (resumable)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--generator", default="embedded")
    p.add_argument("--queries", type=int, default=None, help="only the runs' first N claims (a smoke run)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.work.mkdir(parents=True, exist_ok=True)
    art = load_artifact(args.artifact)
    short = load_artifact(args.artifact).program.with_components(grade_guidance=False)
    instruction = list_instruction(short)
    logger.info("the list instruction:\n%s", instruction)
    corpus = read_corpus(args.corpus)
    lm = build_lm(resolve_generator_spec(art.meta, args.generator), role="generator", cache=False)
    prepare_lm(lm)
    if not hasattr(getattr(lm, "engine", None), "load"):
        raise SystemExit("the probe follows the answer in the embedded engine's own context: give --generator "
                         "embedded[:NAME] (a served model would need per-token top_logprobs read instead)")
    loaded = lm.engine.load()
    grader = ListGrader(loaded.llama)
    candidates = [JudgedCandidate(**c) for run in args.run for c in json.loads((run / "candidates.json").read_text())]
    if len({(c.query_id, c.doc_id) for c in candidates}) != len(candidates):
        raise SystemExit("the runs share candidates: give runs of different claims")
    if args.queries is not None:
        kept = list(dict.fromkeys(c.query_id for c in candidates))[: args.queries]
        candidates = [c for c in candidates if c.query_id in kept]
    full_path = args.work / "full.jsonl"
    if not full_path.exists():  # the earlier runs' pointwise judgments, read as they are
        with full_path.open("wb") as out:
            for run in args.run:
                with (run / "judgments.jsonl").open("rb") as src:
                    shutil.copyfileobj(src, out)
    full_log = JudgmentLog(full_path)
    full_raw = [full_log.done.get(log_key(art.version, "graded", c)) for c in candidates]
    if any(r is None for r in full_raw):
        raise SystemExit(f"{sum(r is None for r in full_raw)} held-out candidates have no pointwise judgment of "
                         f"{art.version} in the runs")

    with loaded.lock:
        fitted, calibration = refit(art, short, grader, instruction, args.work, lm)
        log = JudgmentLog(args.work / "judgments.jsonl")
        grade_heldout(candidates, corpus, short, grader, instruction, log, art.version)
        tokens = token_counts(candidates, corpus, art, short, grader, instruction)
    full_rows = recalibrated_rows(RelevanceJudge(art.program), candidates, full_raw)
    list_rows = recalibrated_rows(RelevanceJudge(short.with_components(judge=fitted)), candidates,
                                  logged_rows(candidates, log, art.version))
    spent = [log.done[log_key(art.version, KEY, c)] for c in candidates]
    lists = {(r["query_id"], r["list_seconds"], r["list_prompt_tokens"]) for r in spent}
    report: dict[str, Any] = {
        "artifact": art.version, "runs": [str(r) for r in args.run], "instruction": instruction,
        "calibration": calibration,
        "heldout": {"candidates": len(candidates), "queries": len({c.query_id for c in candidates}),
                    "pointwise": score_judge(candidates, full_rows), "listwise": score_judge(candidates, list_rows),
                    "list_minus_pointwise": paired_kappa_difference(candidates, full_rows, list_rows),
                    "seconds_per_candidate": sum(s for _, s, _ in lists) / len(candidates)},
        "prompt_tokens": tokens,
    }
    if args.compare:
        other = load_artifact(args.compare_artifact) if args.compare_artifact else art
        done = {k: r for path in args.compare for k, r in JudgmentLog(path).done.items()}
        raw = [done.get(log_key(other.version, "graded", c)) for c in candidates]
        if all(r is not None for r in raw):
            rows = recalibrated_rows(RelevanceJudge(other.program), candidates, raw)
            report["heldout"]["compared"] = {"artifact": other.version, "score": score_judge(candidates, rows),
                                             "seconds_per_candidate": sum(r.get("seconds") or 0.0 for r in raw)
                                             / len(candidates),
                                             "list_minus_compared": paired_kappa_difference(candidates, rows,
                                                                                            list_rows)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    h = report["heldout"]
    print(f"listwise: binary κ {h['pointwise']['binary']['kappa']:.3f} -> {h['listwise']['binary']['kappa']:.3f} "
          f"(difference {h['list_minus_pointwise']['difference']:+.3f} {h['list_minus_pointwise']['ci95']}); "
          f"prompt tokens per candidate x{tokens['list_over_pointwise_with_guidance']:.2f} of the issue-day "
          f"judge's, x{tokens['list_over_pointwise_without_guidance']:.2f} of the guidance-free one's")


if __name__ == "__main__":
    main()
