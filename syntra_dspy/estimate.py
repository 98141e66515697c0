"""What a compile or a production run will cost before it runs: LM calls, prompt and generated tokens, and time.

``syntra compile --dry-run`` and ``syntra produce --dry-run`` print it and stop before any LM call. The calls follow
from the settings; the figures per call come from measurements, in this order: the run store's own usage (a resumed
run: this machine, this engine, this task), an earlier artifact of the same task made with the same generator (a
compile), else the figures below, measured with the embedded model (qwen2.5-coder-1.5b, GGUF Q4_K_M) on 2 CPU cores
and read off what the project keeps (``tests/test_safe_defaults.py`` recomputes them from those files). Hosts
differ: the SciFact store's documents took ~100 s of LM time each on its fastest host and ~290 s on average, so a
documented time is an estimate, not a promise. Nothing here loads a model or calls one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: (prompt tokens, generated tokens, seconds) of one call.
PerCall = tuple[float, float, float | None]

#: Per-call figures of ``syntra produce`` with the graded judge: each stage's usage totals over its calls (the few
#: answered from the cache included) in the SciFact store, 215 documents processed in 18 sessions on several hosts.
PRODUCE_PER_CALL: dict[str, PerCall] = {
    "extract": (1074, 308, 53.8), "plan": (1365, 132, 35.0), "write": (853, 56, 21.1), "annotate": (618, 1, 7.47)}
#: Calls per document besides the judge's, from the same store: extraction and query writing retry an unusable
#: answer (268 extraction and 213 planning calls for 215 documents; 960 writing calls for 430 queries).
PRODUCE_CALLS = {"extract": 1.25, "plan": 1.0, "write_per_query": 2.2}
PRODUCE_SOURCE = "benchmarks/runs/scifact-hybrid-v2.db.gz (embedded qwen2.5-coder-1.5b, 2 cores, 215 documents)"
#: Per-call figures of the compile's loops: each stage's usage over its calls not answered from the cache, in the
#: manifests of artifacts/scifact-sample/65aeaa735911 (the written judge, one candidate a call) and
#: artifacts/scifact/22e653baa2bb (the graded judge's annotation loop).
COMPILE_PER_CALL: dict[str, PerCall] = {
    "task_definition": (1234, 81, 11.9), "idattr": (1147, 284, 16.4), "query_instruction": (1230, 95, 7.44),
    "annotation_instruction": (895, 36, 4.23), "annotation_instruction/graded": (632, 2.83, 7.19)}
COMPILE_SOURCE = ("the manifests of artifacts/scifact-sample/65aeaa735911 and artifacts/scifact/22e653baa2bb "
                  "(embedded qwen2.5-coder-1.5b, 2 cores)")
#: The written judge's calls in the figures above read one candidate each; no store measured it with several, so a
#: call of ``chunk_size`` candidates counts as that many one-candidate calls (an upper bound: the instruction is
#: read once a call).
WRITTEN_JUDGE_PER_CANDIDATE = COMPILE_PER_CALL["annotation_instruction"]


@dataclass
class StageCost:
    """One stage's planned LM work: calls, tokens and seconds of LM time (None: no speed known)."""

    stage: str
    calls: float
    prompt_tokens: float
    completion_tokens: float
    seconds: float | None


@dataclass
class Estimate:
    """The planned LM work of one command, stage by stage, and what the figures rest on."""

    what: str
    stages: list[StageCost]
    basis: str
    concurrency: int = 1
    notes: list[str] = field(default_factory=list)
    upper_bound: bool = False  # the calls assume every loop uses all its attempts

    @property
    def lm_seconds(self) -> float | None:
        """LM time summed over the calls (None when a stage's speed is unknown)."""
        if any(s.seconds is None for s in self.stages):
            return None
        return sum(s.seconds or 0.0 for s in self.stages)

    @property
    def seconds(self) -> float | None:
        """Expected wall time of the LM work: LM time over the calls in flight."""
        lm = self.lm_seconds
        return None if lm is None else lm / max(self.concurrency, 1)

    def totals(self) -> dict[str, int]:
        return {k: round(sum(getattr(s, k) for s in self.stages)) for k in ("calls", "prompt_tokens",
                                                                           "completion_tokens")}

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "stages": [asdict(s) for s in self.stages], "total": self.totals(),
                "seconds": None if self.seconds is None else round(self.seconds), "concurrency": self.concurrency,
                "upper_bound": self.upper_bound, "basis": self.basis, "notes": self.notes}

    def lines(self) -> list[str]:
        """The plan as a short table, for the terminal."""
        w = max([24, *(len(s.stage) + 2 for s in self.stages)])
        out = [f"dry run: {self.what}; no LM is called and nothing is written", "",
               f"  {'stage':<{w}}{'calls':>8}{'prompt tokens':>15}{'generated':>11}{'LM time':>14}"]
        for s in self.stages:
            out.append(f"  {s.stage:<{w}}{s.calls:>8.0f}{s.prompt_tokens:>15,.0f}{s.completion_tokens:>11,.0f}"
                       f"{duration(s.seconds):>14}")
        total = self.totals()
        out.append(f"  {'total':<{w}}{total['calls']:>8}{total['prompt_tokens']:>15,}"
                   f"{total['completion_tokens']:>11,}{duration(self.lm_seconds):>14}")
        if self.seconds is None:
            expected = ("unknown: no speed measured for this LM yet (run a few documents, then --dry-run again reads "
                        "the run store's figures)")
        else:
            expected = (("at most " if self.upper_bound else "") + f"about {duration(self.seconds)} of LM work"
                        + (f" with {self.concurrency} calls in flight" if self.concurrency > 1 else ""))
        out += ["", f"expected time: {expected}", f"per-call figures: {self.basis}", *self.notes]
        return out


def duration(seconds: float | None) -> str:
    """``42 s``, ``7 min``, ``3 h 05 min``: a time as a person reads it (``?`` when unknown)."""
    if seconds is None:
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def _cost(stage: str, calls: float, per_call: PerCall) -> StageCost:
    prompt, generated, seconds = per_call
    return StageCost(stage, calls, calls * prompt, calls * generated, None if seconds is None else calls * seconds)


def _tokens_only(per_call: Mapping[str, PerCall]) -> dict[str, PerCall]:
    return {k: (p, g, None) for k, (p, g, _) in per_call.items()}


def measured_per_call(usage: Mapping[str, Mapping[str, Any]], *, uncached: bool) -> dict[str, PerCall]:
    """Per-call (prompt tokens, generated tokens, seconds) of each stage a usage record counts. ``uncached``: over
    the calls the cache did not answer (a compile's, whose calls are counted from the settings), else over all of
    them (a run store's, whose calls per document are counted from the same usage)."""
    out: dict[str, PerCall] = {}
    for stage, u in usage.items():
        calls = (u.get("calls") or 0) - ((u.get("cached") or 0) if uncached else 0)
        if calls > 0:
            out[stage] = (u.get("prompt_tokens", 0) / calls, u.get("completion_tokens", 0) / calls,
                          u.get("seconds", 0.0) / calls)
    return out


def _measured_basis(source: str, measured: Mapping[str, Any], stages: Mapping[str, Any], documented: str) -> str:
    """Where the figures come from when a measurement covers some stages (``measured``) of ``stages``."""
    rest = [stage for stage in stages if stage not in measured]
    if not rest:
        return source
    return f"{source} for {', '.join(s for s in stages if s in measured)}; {documented} for {', '.join(rest)}"


def produce_estimate(documents: int, *, queries_per_doc: int, top_k: int, chunk_size: int, graded: bool,
                     embedded: bool, concurrency: int, what: str, usage: Mapping[str, Mapping[str, Any]] | None = None,
                     processed: int = 0) -> Estimate:
    """The LM work of producing ``documents`` documents. ``usage`` and ``processed``: a resumed run store's usage
    by stage and the documents it has processed, whose calls per document and per-call figures then replace the
    documented ones. The embedded engine answers one call at a time, so its calls add up whatever the concurrency."""
    judge_calls = queries_per_doc * (top_k if graded else math.ceil(top_k / chunk_size))
    calls = {"extract": PRODUCE_CALLS["extract"], "plan": PRODUCE_CALLS["plan"],
             "write": PRODUCE_CALLS["write_per_query"] * queries_per_doc, "annotate": judge_calls}
    per_call = dict(PRODUCE_PER_CALL)
    basis = PRODUCE_SOURCE
    if not graded:
        p, g, s = WRITTEN_JUDGE_PER_CANDIDATE
        per_call["annotate"] = (p * chunk_size, g * chunk_size, None if s is None else s * chunk_size)
        basis += f"; the written judge's calls: {COMPILE_SOURCE}, one candidate a call, times {chunk_size}"
    if not embedded:
        per_call = _tokens_only(per_call)
        basis += "; tokens only: a served model's speed is not known before it runs"
    measured = measured_per_call(usage, uncached=False) if usage and processed else {}
    if usage and measured:
        per_call.update(measured)
        calls.update({stage: usage[stage]["calls"] / processed for stage in measured if stage in calls})
        basis = _measured_basis(f"this run store's own usage ({processed} documents processed)", measured, calls,
                                basis)
    stages = [_cost(stage, documents * n, per_call[stage]) for stage, n in calls.items()]
    return Estimate(what, stages, basis, concurrency=1 if embedded else concurrency)


def compile_calls(*, sample_docs: int, queries_per_doc: int, examples: int, annotation_candidates: int,
                  control_negatives: int, chunk_size: int, graded: bool, graded_queries: bool,
                  calibration_queries: int, infer_definition: bool) -> dict[str, float]:
    """LM calls of one attempt of each loop, its refinement included (what the committed compiles' histories
    show: 8 idattr calls and 16 query calls an attempt on 5 documents, 41 written-judge calls on 5 queries of 8
    candidates, 139 graded ones on 15 queries of 8 candidates and a control)."""
    per_attempt = {
        "task_definition": 2.0,  # the definition drafted or refined, and its review
        "idattr": sample_docs + 3.0,  # one extraction a document (retries), the review, the refinement
        # a plan and a writing call a document, their retries, the review, the refinement; the graded verifier
        # rates each query in a call of its own
        "query_instruction": 2.0 * sample_docs + 6 + (sample_docs * queries_per_doc if graded_queries else 0),
        # the written judge: each few-shot query's list (controls take the place of candidates) in chunks, the
        # mismatches explained, the refinement; the graded one: every candidate and control of each calibration
        # query alone, the explanation and the refinement
        "annotation_instruction": 2.0 + (
            (examples + calibration_queries) * (annotation_candidates + max(1, control_negatives)) if graded
            else examples * math.ceil(annotation_candidates / chunk_size)),
    }
    if not infer_definition:
        del per_attempt["task_definition"]
    return per_attempt


def compile_estimate(*, attempts: int, calls: Mapping[str, float], graded: bool, embedded: bool, what: str,
                     usage: Mapping[str, Mapping[str, Any]] | None = None, usage_source: str | None = None
                     ) -> Estimate:
    """The LM work of a compile: stages x attempts x the calls of one attempt (:func:`compile_calls`). With more
    than one attempt the figure is an upper bound (a loop stops at the first attempt that passes). ``usage``: an
    earlier compile's usage by stage, whose per-call figures then replace the documented ones."""
    per_call = {stage: COMPILE_PER_CALL[f"{stage}/graded" if graded and stage == "annotation_instruction" else stage]
                for stage in calls}
    basis = COMPILE_SOURCE
    if not embedded:
        per_call = _tokens_only(per_call)
        basis += "; tokens only: a served model's speed is not known before it runs"
    measured = {k: v for k, v in measured_per_call(usage or {}, uncached=True).items() if k in per_call}
    if measured:
        per_call.update(measured)
        basis = _measured_basis(usage_source or "an earlier compile's usage", measured, per_call, basis)
    stages = [_cost(stage, attempts * n, per_call[stage]) for stage, n in calls.items()]
    notes = [f"attempts: at most {attempts} a stage (a loop stops at the first attempt that passes)" if attempts > 1
             else "attempts: one a stage, not refined"]
    return Estimate(what, stages, basis, notes=notes, upper_bound=attempts > 1)
