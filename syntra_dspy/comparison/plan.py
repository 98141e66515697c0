"""``syntra compare --dry-run``: the LM work a comparison would do, before any corpus, encoder or LM is loaded.

Per row: its compile (:func:`~syntra_dspy.compiler.plan_compile`: stages x attempts x the calls of an attempt,
plus the candidates of the queries people judged when the row calibrates on their labels, and GEPA's search up to
its budget of metric calls); then the held-out scoring (the fresh documents' extraction, queries and the
verifier's two reviews of each, and one judge call per held-out pair, or per chunk for a written judge); then, with
``--downstream``, production of its training records (training itself calls no LM and is left out). The held-out
pairs are counted from the judgements (read, cheaply), the rest from the settings. Every loop is counted at all
its attempts and GEPA at its whole budget, so the total is an upper bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from syntra_dspy.comparison.settings import CompareConfig
from syntra_dspy.estimate import (
    COMPILE_PER_CALL,
    PRODUCE_CALLS,
    PRODUCE_PER_CALL,
    WRITTEN_JUDGE_PER_CANDIDATE,
    Estimate,
    StageCost,
    produce_estimate,
)

#: Calls of one GEPA metric call (one trial run and its judgement) per stage, besides the graded annotation stage's
#: (which grades the whole calibration set): an extraction and its review; a plan, the writing (with its retries) and
#: the review.
GEPA_TRIAL_CALLS = {"idattr": 2.0, "query_instruction": 4.2}


def _scaled(stage: StageCost, name: str, factor: float = 1.0) -> StageCost:
    return StageCost(name, stage.calls * factor, stage.prompt_tokens * factor, stage.completion_tokens * factor,
                     None if stage.seconds is None else stage.seconds * factor)


def _cost(name: str, calls: float, per_call: tuple[float, float, float | None], embedded: bool) -> StageCost:
    prompt, generated, seconds = per_call
    return StageCost(name, calls, calls * prompt, calls * generated,
                     None if seconds is None or not embedded else calls * seconds)


def heldout_pairs(config: CompareConfig) -> tuple[int, int]:
    """(queries, pairs) the held-out judgements will give: each sampled query's judged documents (at most
    ``max_judged``), ``unjudged_k`` retrieved unjudged ones (unless excluded) and ``random_negatives``."""
    h = config.heldout
    if h.qrels is None:
        return 0, 0
    from syntra_dspy.judging.labels import load_judgements

    queries, labels = load_judgements(h.qrels, queries=h.queries)
    usable = [q for q in labels if q in queries]
    n = min(h.max_queries, len(usable))
    judged = sum(min(h.max_judged, len(labels[q])) for q in usable) / max(1, len(usable))
    per_query = judged + (h.unjudged_k if h.unjudged != "exclude" else 0) + h.random_negatives
    return n, round(n * per_query)


def plan_comparison(task: Any, config: CompareConfig, *, artifacts: str | Path = "artifacts",
                    strategy_options: Mapping[str, Mapping[str, Any]] | None = None) -> Estimate:
    """What :func:`~syntra_dspy.comparison.compare_strategies` would ask of the LMs (see the module docstring)."""
    from syntra_dspy.compiler import CompileConfig, plan_compile
    from syntra_dspy.lm.roles import embedded_name, role_specs
    from syntra_dspy.optimizers import STRATEGIES
    from syntra_dspy.task import TaskSpec, load_task

    spec = task if isinstance(task, TaskSpec) else load_task(task)
    embedded = embedded_name(role_specs(spec.lms, config.lm_overrides)["generator"].model) is not None
    s = config.settings
    queries, pairs = heldout_pairs(config)
    stages: list[StageCost] = []
    notes: list[str] = []
    for label, strategy in config.rows():
        options = dict((strategy_options or {}).get(label) or {})
        plan = plan_compile(spec, CompileConfig(strategy=strategy, settings=s, lm_overrides=config.lm_overrides),
                            out=artifacts)
        stages += [_scaled(stage, f"{label}: {stage.stage}") for stage in plan.stages]
        settings = STRATEGIES[strategy].settings_for(s)
        graded = settings.judge == "graded"
        attempts = settings.max_attempts if STRATEGIES[strategy].refines else 1
        calibration = len(spec.examples) * (s.annotation_candidates + max(1, s.control_negatives))
        if options.get("labels") is not None and graded:  # people's queries join the calibration set
            people = s.calibration_queries * (s.annotation_candidates + max(1, s.control_negatives))
            calibration += people
            stages.append(_cost(f"{label}: people's queries", attempts * people,
                                COMPILE_PER_CALL["annotation_instruction/graded"], embedded))
        if strategy == "gepa":
            stages += _gepa(label, options, calibration if graded else None, embedded)
        per_doc = PRODUCE_CALLS["extract"] + PRODUCE_CALLS["plan"] + PRODUCE_CALLS["write_per_query"] * \
            s.queries_per_doc + 2  # extraction, plan and writing with their retries; the verifier's two reviews
        stages.append(_cost(f"{label}: held-out documents", config.heldout.docs * per_doc, COMPILE_PER_CALL["idattr"],
                            embedded))
        # one call a pair when graded; a written judge's chunk counted as its candidates (an upper bound)
        per_call = PRODUCE_PER_CALL["annotate"] if graded else WRITTEN_JUDGE_PER_CANDIDATE
        stages.append(_cost(f"{label}: held-out judging", pairs, per_call, embedded))
        if config.downstream is not None:
            made = produce_estimate(config.downstream.docs, queries_per_doc=config.downstream.queries_per_doc,
                                    top_k=config.downstream.produce_config().top_k, chunk_size=s.chunk_size,
                                    graded=graded, embedded=embedded, concurrency=1, what="downstream")
            stages += [_scaled(stage, f"{label}: produce {stage.stage}") for stage in made.stages]
    notes.append(f"held-out: {queries} queries, about {pairs} judged pairs a row (one judge call each when graded; "
                 "a row whose compile kept an earlier row's grading instruction reuses that row's grades, so "
                 "fewer are made)")
    if config.downstream is not None:
        notes.append("downstream: production counted; training (no LM call) comes on top, minutes a row on a GPU")
    return Estimate(f"compare {spec.name} ({', '.join(label for label, _ in config.rows())})", stages,
                    "per-call figures of syntra_dspy.estimate (embedded qwen2.5-coder-1.5b on 2 CPU cores)"
                    if embedded else "tokens only: a served model's speed is not known before it runs",
                    notes=notes, upper_bound=True)


def _gepa(label: str, options: Mapping[str, Any], calibration: int | None, embedded: bool) -> list[StageCost]:
    """GEPA's search, its whole budget spent on every stage it tunes: each metric call runs one trial (the whole
    calibration set for the graded judge; repeats of a text already scored are answered by the LM's cache, so this is
    an upper bound), and about every second one is preceded by a reflection call."""
    from syntra_dspy.optimizers.gepa import GEPASettings

    gepa = options.get("gepa")
    g = gepa if isinstance(gepa, GEPASettings) else GEPASettings(**(gepa or {}))
    out = []
    for stage in g.stages:
        if stage == "annotation_instruction":
            trial, per_call = ((calibration, COMPILE_PER_CALL["annotation_instruction/graded"]) if calibration
                               else (5.0, COMPILE_PER_CALL["annotation_instruction"]))
        else:
            trial, per_call = GEPA_TRIAL_CALLS[stage], COMPILE_PER_CALL[stage]
        out.append(_cost(f"{label}: GEPA {stage}", g.max_metric_calls * trial, per_call, embedded))
        out.append(_cost(f"{label}: GEPA reflection", g.max_metric_calls / 2, COMPILE_PER_CALL["idattr"], embedded))
    return out


__all__ = ["heldout_pairs", "plan_comparison"]
