"""How far an artifact's relevance judge agrees with human judgments (``syntra agreement``).

The candidates are the ones production would show the judge: for each sampled query of a judged dataset, the
top-K documents from the artifact's dense index, plus any judged positive retrieval missed (marked
``added_positive``), plus a few random corpus documents (``random``). Reference classes follow the qrels:
a judged positive (gain >= 1) is positive; a retrieved candidate without a positive judgment is a hard negative
(IR evaluation counts it not relevant; retrieval put it in the top-K); a random document is an easy negative.
The task's few-shot queries and the queries a judge was calibrated on are never sampled.

Every judgment is appended to ``judgments.jsonl`` as soon as it is made, keyed by artifact, judge mode, query and
document, so a long run resumes where it stopped and two judges can be compared on exactly the same candidates.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation.exclude import normalize_query
from syntra_dspy.judging.agreement import label_agreement, paired_kappa_bootstrap
from syntra_dspy.judging.calibration import best_cut, roc_auc
from syntra_dspy.judging.candidates import JudgedCandidate, build_candidates, lexical_witness, with_lexical
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate, Judgment, RelevanceJudge
from syntra_dspy.judging.settings import AgreementConfig
from syntra_dspy.signatures.types import label_class


def _key(artifact: str, mode: str, c: JudgedCandidate) -> str:
    return f"{artifact}|{mode}|{c.query_id}|{c.doc_id}"


class JudgmentLog:
    """The append-only record of judgments made (one JSON line each), read back to resume."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.done[row["key"]] = row

    def add(self, row: dict[str, Any]) -> None:
        self.done[row["key"]] = row
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _as_candidate(c: JudgedCandidate, text: str) -> Candidate:
    return Candidate(text, c.cosine, listed=c.rank is not None, lexical=c.lexical)


def judge_candidates(judge: RelevanceJudge, artifact: str, candidates: Sequence[JudgedCandidate], *, corpus: Any,
                     log: JudgmentLog, meter: Any = None, progress: Any = None,
                     same_grades: Sequence[str] = ()) -> list[dict[str, Any] | None]:
    """Judge every candidate not judged yet (in query order, so the query's prompt prefix is reused).

    ``same_grades``: versions of artifacts whose grading prompt is this one's, character for character; a graded
    judgment already logged for one of them is not asked again: its grade is calibrated with this judge (the row
    says ``grade_from``, and keeps the original call's time and tokens)."""
    rows: list[dict[str, Any] | None] = []
    for c in candidates:
        key = _key(artifact, judge.mode, c)
        if key not in log.done:
            shared = next((log.done[k] for k in (_key(v, "graded", c) for v in same_grades) if k in log.done
                           and (log.done[k].get("judgment") or {}).get("grade")), None) \
                if judge.mode == "graded" else None
            if shared is not None:
                judgment = judge.calibrate(Grade.from_dict(shared["judgment"]["grade"]), _as_candidate(c, ""))
                log.add({**shared, "key": key, "artifact": artifact, "grade_from": shared["artifact"],
                         "judgment": judgment.to_dict()})
            else:
                before = meter.snapshot().get("judge", {}) if meter is not None else {}
                started = time.perf_counter()
                with (meter.stage("judge") if meter is not None else _null()):
                    (judgment,) = judge.judge_all(c.query, [_as_candidate(c, corpus[c.doc_id].content)])
                after = meter.snapshot().get("judge", {}) if meter is not None else {}
                log.add({"key": key, "artifact": artifact, "judge": judge.mode, "query_id": c.query_id,
                         "doc_id": c.doc_id, "seconds": round(time.perf_counter() - started, 3),
                         "prompt_tokens": after.get("prompt_tokens", 0) - before.get("prompt_tokens", 0),
                         "completion_tokens": after.get("completion_tokens", 0) - before.get("completion_tokens", 0),
                         "judgment": None if judgment is None else judgment.to_dict()})
        if progress is not None:
            progress()
        rows.append(log.done[key])
    return settle_rows(judge, candidates, rows, corpus)


def settle_rows(judge: RelevanceJudge, candidates: Sequence[JudgedCandidate], rows: Sequence[dict[str, Any] | None],
                corpus: Any) -> list[dict[str, Any] | None]:
    """Rows whose labels are final: a relative judge labels each candidate against the rest of its query's
    retrieved list, so the per-candidate labels logged while judging are provisional and are settled here."""
    if judge.mode != "graded" or not judge.calibration.needs_list:
        return list(rows)
    out = list(rows)
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        groups.setdefault(c.query_id, []).append(i)
    for members in groups.values():
        asked = [_as_candidate(candidates[i], "") for i in members]
        judged = [_judgment_of(rows[i]) for i in members]
        for i, judgment in zip(members, judge.settle(asked, judged)):
            row = rows[i]
            if row is not None and judgment is not None:
                out[i] = {**row, "judgment": judgment.to_dict()}
    return out


def recalibrated_rows(judge: RelevanceJudge, candidates: Sequence[JudgedCandidate],
                      rows: Sequence[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """Logged graded rows labelled by ``judge``'s calibration instead of the one that logged them: the same grades,
    cut again (and settled against each query's list for a list-relative calibration). Rows without a grade stay."""
    out: list[dict[str, Any] | None] = []
    for c, row in zip(candidates, rows):
        logged = _judgment_of(row)
        out.append(row if logged is None or logged.grade is None else
                   {**row, "judgment": judge.calibrate(logged.grade, _as_candidate(c, "")).to_dict()})  # type: ignore[dict-item]
    return settle_rows(judge, candidates, out, corpus=None)


def _judgment_of(row: dict[str, Any] | None) -> Judgment | None:
    if row is None or row.get("judgment") is None or "grade" not in row["judgment"]:
        return None
    return Judgment(row["judgment"]["label"], Grade.from_dict(row["judgment"]["grade"]), row["judgment"].get("score"))


def _null():
    from contextlib import nullcontext

    return nullcontext()


def score_judge(candidates: Sequence[JudgedCandidate], rows: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """Agreement of one judge's labels with the reference, and how well its scores rank positives first."""
    gold = [c.gold for c in candidates]
    labels = [None if r is None or r["judgment"] is None else r["judgment"]["label"] for r in rows]
    pred = [None if label is None else label_class(label) for label in labels]
    result: dict[str, Any] = label_agreement(gold, pred)
    is_pos = [g == "positive" for g in gold]
    expected = [None if r is None or r["judgment"] is None or "grade" not in r["judgment"]
                else r["judgment"]["grade"]["expected"] for r in rows]
    cosines = [c.cosine for c in candidates]
    ranking: dict[str, Any] = {"cosine": {"auc": roc_auc(cosines, is_pos),
                                          "best_binary_kappa": best_cut(cosines, is_pos).kappa}}
    if candidates and all(c.lexical is not None for c in candidates):  # BM25 alone: what no LLM call gives
        lexical = [float(c.lexical) for c in candidates]  # type: ignore[arg-type]
        ranking["bm25"] = {"auc": roc_auc(lexical, is_pos), "best_binary_kappa": best_cut(lexical, is_pos).kappa}
    scored = [(e, c, p) for e, c, p in zip(expected, cosines, is_pos) if e is not None]
    if scored:
        import statistics

        e_vals, c_vals, pos = zip(*scored)

        def z(values: Sequence[float]) -> list[float]:
            mean, sd = statistics.fmean(values), statistics.pstdev(values) or 1.0
            return [(v - mean) / sd for v in values]

        fused = [a + b for a, b in zip(z(e_vals), z(c_vals))]
        ranking["expected"] = {"auc": roc_auc(e_vals, pos), "best_binary_kappa": best_cut(e_vals, pos).kappa}
        ranking["fused"] = {"auc": roc_auc(fused, pos), "best_binary_kappa": best_cut(fused, pos).kappa}
    result["ranking"] = ranking
    done = [r for r in rows if r is not None]
    result["cost"] = {
        "candidates": len(done),
        "seconds_per_candidate": sum(r["seconds"] for r in done) / len(done) if done else None,
        "prompt_tokens_per_candidate": sum(r["prompt_tokens"] for r in done) / len(done) if done else None,
        "completion_tokens_per_candidate": sum(r["completion_tokens"] for r in done) / len(done) if done else None,
    }
    result["predicted"] = {k: pred.count(k) for k in ("positive", "hard_negative", "easy_negative")}
    result["unlabelled"] = pred.count(None)
    return result


def paired_kappa_difference(candidates: Sequence[JudgedCandidate], a: Sequence[dict | None], b: Sequence[dict | None],
                            *, rounds: int = 2000, seed: int = 0) -> dict[str, float | None]:
    """Binary kappa of judge b minus judge a, with a 95% bootstrap interval over queries (paired: same candidates)."""
    def classes(rows: Sequence[dict | None]) -> list[str | None]:
        return [None if r is None or r["judgment"] is None else label_class(r["judgment"]["label"]) for r in rows]

    return paired_kappa_bootstrap([c.gold for c in candidates], [c.query_id for c in candidates], classes(a),
                                  classes(b), rounds=rounds, seed=seed)


def reliability_chart(candidates: Sequence[JudgedCandidate], judged: dict[str, Sequence[dict | None]],
                      path: Path) -> None:
    """Share of reference positives per bin of E (0-3, width 0.5), one line per graded judge, with counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    edges = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0001]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, rows in judged.items():
        xs, ys, ns = [], [], []
        pairs = [(r["judgment"]["grade"]["expected"], c.gold == "positive") for c, r in zip(candidates, rows)
                 if r is not None and r["judgment"] is not None and "grade" in r["judgment"]
                 and r["judgment"]["grade"]["expected"] is not None]
        for lo, hi in zip(edges, edges[1:]):
            inside = [p for e, p in pairs if lo <= e < hi]
            if inside:
                xs.append((lo + min(hi, 3.0)) / 2)
                ys.append(sum(inside) / len(inside))
                ns.append(len(inside))
        if xs:
            ax.plot(xs, ys, marker="o", label=name)
            for x, y, n in zip(xs, ys, ns):
                ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(0, 6), fontsize=7, ha="center")
    ax.set_xlabel("expected label E = sum k p(k)")
    ax.set_ylabel("share judged relevant by people")
    ax.set_xlim(0, 3)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Reliability of graded judgments (bin counts above points)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def candidates_to_json(candidates: Sequence[JudgedCandidate]) -> list[dict[str, Any]]:
    return [asdict(c) for c in candidates]


# ── the whole measurement ───────────────────────────────────────────────────────────────────────────────


def excluded_queries(program: Any) -> list[str]:
    """Queries a judge must not be measured on: the task's few-shot queries and its calibration queries."""
    out = [ex.query for ex in program.state.examples]
    judge = program.state.judge
    if judge is not None and judge.summary is not None:
        out += list(judge.summary.query_texts)
    return out


def measure_agreement(artifacts: Sequence[str | Path], dataset: str, config: AgreementConfig | None = None, *,
                      out: str | Path, generator: Any = None, **settings: Any) -> dict[str, Any]:
    """Judge the same candidates with every (artifact, judge mode) pair and write the report to ``out``.

    ``config`` (an :class:`AgreementConfig`) holds the settings; a caller may pass its fields as keywords instead,
    not both. ``judges`` are the first artifact's modes; ``compare_judges`` the other artifacts' (default: the
    same). ``exclude_queries``: more queries never to sample (a file of query ids, or a task YAML), e.g. those an
    earlier measurement used, so a second measurement is on claims nothing was chosen on. ``generator``: the judge
    LM (a ``MODEL[@API_BASE]`` flag or an LM; default each artifact's)."""
    if config is not None and settings:
        raise ConfigError(f"give either an AgreementConfig or its settings as keywords, not both "
                          f"({', '.join(settings)})", field=next(iter(settings)))
    config = config if config is not None else AgreementConfig(**settings)
    judges, compare_judges, n_queries, top_k = config.judges, config.compare_judges, config.n_queries, config.top_k
    random_negatives, seed, index_dir, exclude_queries = (config.random_negatives, config.seed, config.index_dir,
                                                          config.exclude_queries)
    import logging

    import dspy

    from syntra_dspy.evaluation.datasets import load_dataset
    from syntra_dspy.lm.roles import prepare_lm
    from syntra_dspy.lm.usage import UsageMeter
    # Upward, on purpose: the judge is measured on what production would show it, so the artifact, corpus,
    # index and generator are opened by production's own loader (imported here, where the command runs).
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.setup import load_inputs, resolve_generator

    logger = logging.getLogger(__name__)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(dataset)
    loaded = [load_inputs(path, ProduceConfig(index_dir=index_dir), corpus=ds.corpus) for path in artifacts]
    first = loaded[0]
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
    grading = {inputs.artifact.version: inputs.artifact.meta.prompts["grade"].system_prompt_sha256
               for inputs in loaded if "grade" in inputs.artifact.meta.prompts}
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
            name = f"{art.task}/{art.version}:{mode}"
            meter = UsageMeter()
            count, started = [0], time.perf_counter()

            def tick(total: int = len(candidates), name: str = name) -> None:
                count[0] += 1
                if count[0] % 25 == 0 or count[0] == total:
                    logger.info("%s: %d/%d candidates (%.0f s)", name, count[0], total, time.perf_counter() - started)

            with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None):
                same = [v for v, sha in grading.items() if v != art.version and sha == grading.get(art.version)]
                rows = judge_candidates(judge, art.version, candidates, corpus=inputs.corpus, log=log, meter=meter,
                                        progress=tick, same_grades=same)
            rows_by_judge[name] = rows
            results[name] = {"artifact": str(art.path), "version": art.version, "judge": judge.describe(),
                             "generator": lm_info.get("model"), **score_judge(candidates, rows),
                             "grades_from": sorted({r["grade_from"] for r in rows if r and r.get("grade_from")})}
    names = list(rows_by_judge)
    comparisons = {f"{b} vs {names[0]}": paired_kappa_difference(candidates, rows_by_judge[names[0]], rows_by_judge[b])
                   for b in names[1:]}
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
    shared = {n: r["grades_from"] for n, r in report["judges"].items() if r.get("grades_from")}
    if shared:
        lines += ["Grades shared (identical grading prompt, so the same model call): " + "; ".join(
            f"{n} calibrates the grades logged for {', '.join(v)}" for n, v in shared.items()), ""]
    return "\n".join(lines)
