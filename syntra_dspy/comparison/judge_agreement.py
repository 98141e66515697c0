"""``syntra agreement``: how far artifacts' relevance judges agree with human judgments, on the same candidates.

The candidates are the ones production would show the judge: for each sampled query of a judged dataset, the
top-K documents from the artifact's dense index, plus any judged positive retrieval missed (marked
``added_positive``), plus a few random corpus documents (``random``). Reference classes follow the qrels:
a judged positive (gain >= 1) is positive; a retrieved candidate without a positive judgment is a hard negative
(IR evaluation counts it not relevant; retrieval put it in the top-K); a random document is an easy negative.
The task's few-shot queries and the queries a judge was calibrated on are never sampled.

The measurement opens each artifact, its corpus, index and generator with production's own loader, so it sits
above production; what it measures with (the judgment log, the scores, the paired bootstrap) is the judge's own,
in :mod:`syntra_dspy.judging.measure`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import grading_identity
from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation.exclude import normalize_query
from syntra_dspy.judging.candidates import build_candidates, lexical_witness, with_lexical
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.judging.measure import (
    JudgmentLog,
    candidates_to_json,
    excluded_queries,
    judge_candidates,
    judge_key,
    paired_kappa_difference,
    reliability_chart,
    score_judge,
)
from syntra_dspy.judging.settings import AgreementConfig

logger = logging.getLogger(__name__)


def measure_agreement(artifacts: Sequence[str | Path], dataset: str, config: AgreementConfig | None = None, *,
                      out: str | Path, generator: Any = None, **settings: Any) -> dict[str, Any]:
    """Judge the same candidates with every (artifact, judge mode) pair and write the report to ``out``.

    ``config`` (an :class:`AgreementConfig`) holds the settings; a caller may pass its fields as keywords instead,
    not both. ``judges`` are the first artifact's modes; ``compare_judges`` the other artifacts' (default: the
    same). ``exclude_queries``: more queries never to sample (a file of query ids, or a task YAML), e.g. those an
    earlier measurement used, so a second measurement is on claims nothing was chosen on. ``generator``: the judge
    LM (a ``MODEL[@API_BASE]`` flag or an LM; default each artifact's). ``cascade_grades``: a run store graded with
    the first artifact's prompt; its graded judge is also reported as production's margin cascade learned from it
    would label (``+margin``), from the same grades, paired against the judges without it."""
    config = AgreementConfig.of_call(config, settings)
    judges, compare_judges, n_queries, top_k = config.judges, config.compare_judges, config.n_queries, config.top_k
    random_negatives, seed, index_dir, exclude_queries = (config.random_negatives, config.seed, config.index_dir,
                                                          config.exclude_queries)
    if config.cascade_grades is not None and "graded" not in judges:
        raise ConfigError("--cascade-grades measures the graded judge's margin cascade; the first artifact is "
                          f"measured with {', '.join(judges)} only", field="cascade_grades",
                          hint="add graded to --judge-mode, or leave --cascade-grades out")
    if config.cascade_grades is not None and not config.cascade_grades.is_file():
        raise ConfigError(f"{config.cascade_grades}: no such run store", field="cascade_grades",
                          hint="give a run store (.db) produced with this artifact, unpacked")
    import dspy

    from syntra_dspy.evaluation.datasets import load_dataset
    from syntra_dspy.lm.roles import prepare_lm, with_engine_build
    from syntra_dspy.lm.usage import UsageMeter
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.setup import load_inputs, resolve_generator

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(dataset)
    loaded = [load_inputs(path, ProduceConfig(index_dir=index_dir), corpus=ds.corpus) for path in artifacts]
    first = loaded[0]
    margin = learned_margin(first.artifact.program, config) if config.cascade_grades is not None else None
    exclude = [q for inputs in loaded for q in excluded_queries(inputs.artifact.program)]
    if exclude_queries is not None:
        from syntra_dspy.evaluation.exclude import load_exclusions

        exclude += [ds.queries[q] for q in sorted(load_exclusions(exclude_queries, ds.queries)) if q in ds.queries]
    candidates = build_candidates(ds.queries, ds.qrels, corpus=first.corpus, encoder=first.encoder, index=first.index,
                                  n_queries=n_queries, top_k=top_k, random_negatives=random_negatives, seed=seed,
                                  exclude=exclude)
    lexical = lexical_witness(first.corpus, ds.query_language, ds.language)
    if lexical is not None:
        candidates = with_lexical(candidates, lexical)
    elif any(inputs.artifact.program.state.judge is not None and inputs.artifact.program.state.judge.needs_lexical
             for inputs in loaded):
        raise ConfigError("a hybrid judge needs BM25 scores, which this dataset's languages do not allow",
                          hint="measure it on a same-language dataset in English or Chinese")
    grading = {inputs.artifact.version: grading_identity(inputs.artifact.program) for inputs in loaded}
    (out / "candidates.json").write_text(json.dumps(candidates_to_json(candidates), indent=1, ensure_ascii=False)
                                         + "\n", encoding="utf-8")
    log = JudgmentLog(out / "judgments.jsonl")
    results: dict[str, Any] = {}
    rows_by_judge: dict[str, list[dict | None]] = {}
    for n, inputs in enumerate(loaded):
        art = inputs.artifact
        lm, lm_info = resolve_generator(art.meta, generator, config.api_key_env)
        prepare_lm(lm)
        for mode in (judges if n == 0 or compare_judges is None else compare_judges):
            judge = RelevanceJudge(art.program, mode=mode)  # type: ignore[arg-type]
            name = f"{art.task}/{art.version}:{judge_key(judge)}"
            meter = UsageMeter()
            count, started = [0], time.perf_counter()

            def tick(total: int = len(candidates), name: str = name) -> None:
                count[0] += 1
                if count[0] % 25 == 0 or count[0] == total:
                    logger.info("%s: %d/%d candidates (%.0f s)", name, count[0], total, time.perf_counter() - started)

            with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None):
                same = [v for v, ident in grading.items() if v != art.version and ident == grading[art.version]]
                rows = judge_candidates(judge, art.version, candidates, corpus=inputs.corpus, log=log, meter=meter,
                                        progress=tick, same_grades=same)
            rows_by_judge[name] = rows
            # the embedded engine's build: two builds can grade a candidate at the cut differently (docs/lms.md)
            build = (with_engine_build(lm_info).get("embedded") or {}).get("engine_build")
            results[name] = {"artifact": str(art.path), "version": art.version, "judge": judge.describe(),
                             "generator": lm_info.get("model"), **({"engine_build": build} if build else {}),
                             **score_judge(candidates, rows),
                             "grades_from": sorted({r["grade_from"] for r in rows if r and r.get("grade_from")})}
            if n == 0 and mode == "graded" and margin is not None:
                margin_rows = with_margin(margin, art.program, candidates, rows)
                rows_by_judge[f"{name}+margin"] = margin_rows
                results[f"{name}+margin"] = {**results[name], "cascade": margin.describe(),
                                             "skipped": sum(skipped(r) for r in margin_rows),
                                             **score_judge(candidates, margin_rows),
                                             "ranking": results[name]["ranking"]}  # the same grades rank alike
    names = list(rows_by_judge)
    # each judge against the first; a margin also against the other artifacts' (e.g. the version it came from)
    pairs = [(b, names[0]) for b in names[1:]] + [(m, a) for m in names[1:] if m.endswith("+margin")
                                                   for a in names[1:] if a != m]
    comparisons = {f"{b} vs {a}": paired_kappa_difference(candidates, rows_by_judge[a], rows_by_judge[b])
                   for b, a in pairs}
    graded = {n: r for n, r in rows_by_judge.items() if n.endswith(":graded")}
    if graded:
        reliability_chart(candidates, graded, out / "reliability.png")
    report = {
        "dataset": dataset, "seed": seed, "top_k": top_k, "random_negatives": random_negatives,
        "queries": len({c.query_id for c in candidates}), "candidates": len(candidates),
        "reference": {"positive": sum(c.gold == "positive" for c in candidates),
                      "hard_negative": sum(c.gold == "hard_negative" for c in candidates),
                      "easy_negative": sum(c.gold == "easy_negative" for c in candidates),
                      "added_positives": sum(c.source == "added_positive" for c in candidates),
                      "source": "the dataset's qrels (human relevance judgments); unjudged retrieved candidates "
                                "count as not relevant"},
        "excluded_queries": len(set(map(normalize_query, exclude))),
        "judges": results, "comparisons": comparisons,
    }
    (out / "agreement.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "agreement.md").write_text(render_report(report), encoding="utf-8")
    return report


def skipped(row: dict[str, Any] | None) -> bool:
    return row is not None and "skipped" in (row.get("judgment") or {})


def learned_margin(program: Any, config: AgreementConfig) -> Any:
    """Production's margin cascade for ``program``, learned from ``config.cascade_grades`` as ``syntra produce
    --judge-cascade margin --cascade-grades`` learns it (refused, before any LM call, for a store another prompt
    graded)."""
    from syntra_dspy.production.cascade import production_cascade
    from syntra_dspy.production.config import ProduceConfig

    coverage = config.cascade_coverage or ProduceConfig.model_fields["cascade_coverage"].default
    return production_cascade(program, "margin", coverage=coverage, grades=config.cascade_grades)


def with_margin(cascade: Any, program: Any, candidates: Sequence[Any],
                rows: Sequence[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """The graded judge's logged ``rows`` labelled as production with ``cascade`` would have labelled them: no LM
    call. A skipped candidate costs no call, so its row carries no seconds or tokens."""
    from syntra_dspy.judging.measure import recalibrated_rows

    labelled = recalibrated_rows(RelevanceJudge(program, mode="graded", cascade=cascade), candidates, rows)
    return [{**r, "seconds": 0.0, "prompt_tokens": 0, "completion_tokens": 0} if skipped(r) else r
            for r in labelled]


def _f(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render_report(report: dict[str, Any]) -> str:
    ref = report["reference"]
    lines = [
        "# Judge agreement with human judgments", "",
        f"Dataset `{report['dataset']}`: {report['queries']} queries (seed {report['seed']}), {report['candidates']} "
        f"candidates: dense top-{report['top_k']}, judged positives retrieval missed ({ref['added_positives']}), "
        f"{report['random_negatives']} random document(s) per query. Reference: {ref['positive']} positive, "
        f"{ref['hard_negative']} hard negative, {ref['easy_negative']} easy negative; {ref['source']}. The task's "
        f"few-shot and calibration queries ({report['excluded_queries']}) are excluded.", "",
        "| judge | binary κ | pos. precision | pos. recall | 3-class κ | predicted pos/hard/easy | AUC E | "
        "AUC cosine | AUC fused | AUC BM25 | s / cand. | prompt tok / cand. |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["judges"].items():
        b, rank, cost, pred = r["binary"], r["ranking"], r["cost"], r["predicted"]
        pos = b["per_class"]["relevant"]
        lines.append(
            f"| {name} | {_f(b['kappa'])} | {_f(pos['precision'])} | {_f(pos['recall'])} | "
            f"{_f(r['three_class']['kappa'])} | {pred['positive']}/{pred['hard_negative']}/{pred['easy_negative']} | "
            f"{_f(rank.get('expected', {}).get('auc'))} | {_f(rank['cosine']['auc'])} | "
            f"{_f(rank.get('fused', {}).get('auc'))} | {_f(rank.get('bm25', {}).get('auc'))} | "
            f"{_f(cost['seconds_per_candidate'], 1)} | "
            f"{_f(cost['prompt_tokens_per_candidate'], 0)} |")
    if report["comparisons"]:
        lines += ["", "Paired bootstrap over queries (same candidates), binary κ:", "",
                  "| comparison | κ difference | 95% CI | P(not better) |", "|---|---|---|---|"]
        for name, c in report["comparisons"].items():
            lines.append(f"| {name} | {_f(c['difference'])} | [{_f(c['ci95'][0])}, {_f(c['ci95'][1])}] | "
                         f"{_f(c['p_b_not_better'])} |")
    lines += ["", "Best possible binary κ for a threshold chosen on these very candidates (an upper bound, not a "
              "result): " + "; ".join(
                  f"{n}: E {_f(r['ranking'].get('expected', {}).get('best_binary_kappa'))}, fused "
                  f"{_f(r['ranking'].get('fused', {}).get('best_binary_kappa'))}, cosine "
                  f"{_f(r['ranking']['cosine']['best_binary_kappa'])}"
                  + (f", BM25 alone (no LLM) {_f(r['ranking']['bm25']['best_binary_kappa'])}"
                     if "bm25" in r["ranking"] else "") for n, r in report["judges"].items()), ""]
    for n, r in report["judges"].items():
        if "cascade" in r:
            c = r["cascade"]
            lines += [f"{n}: the graded judgments labelled as production's margin cascade would (coverage "
                      f"{c.get('coverage')}, learned from {c.get('lists')} lists of {c.get('learned_from')}): "
                      f"{r['skipped']} of {r['cost']['candidates']} grading calls skipped; no extra LM call.", ""]
    shared = {n: r["grades_from"] for n, r in report["judges"].items() if r.get("grades_from")}
    if shared:
        lines += ["Grades shared (identical grading prompt and document clip, so the same model call): " + "; ".join(
            f"{n} calibrates the grades logged for {', '.join(v)}" for n, v in shared.items()), ""]
    return "\n".join(lines)
