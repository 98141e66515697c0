"""The comparison as a markdown table, a JSON file and a PNG chart, each naming every artifact version."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from syntra_dspy.errors import DependencyError
from syntra_dspy.outputs import atomic_write_text, shown_path


def _f(value: Any, places: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{places}f}"
    return str(value)


def _calls(cost: dict[str, Any]) -> str:
    cached = int(cost.get("cached", 0))
    return f"{cost.get('calls', 0)} ({cached} cached)" if cached else str(cost.get("calls", 0))


def _ann(metrics: dict[str, Any], scheme: str, key: str) -> Any:
    return ((metrics.get("annotation") or {}).get(scheme) or {}).get(key)


def _kappa_diff(r: Any) -> str:
    diff = r.kappa_vs_reference
    if not diff or diff.get("difference") is None:
        return "—"
    lo, hi = diff["ci95"]
    return f"{diff['difference']:+.3f} [{_f(lo)}, {_f(hi)}]"


def _with_ci(value: Any, ci: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f} [{_f(ci[0])}, {_f(ci[1])}]" if ci and ci[0] is not None else f"{value:.3f}"


def _row_name(r: Any) -> str:
    return f"{r.strategy} ({r.kind})" if getattr(r, "kind", "") else r.strategy


def standing(diff: dict[str, Any] | None, reference: str) -> str:
    """Where a row's binary kappa stands against the reference's, read off the paired 95% interval."""
    if not diff or diff.get("difference") is None or diff["ci95"][0] is None:
        return "not comparable"
    lo, hi = diff["ci95"]
    where = (f"within the noise of {reference}" if lo <= 0 <= hi else f"below {reference}" if hi < 0
             else f"above {reference}")
    return f"{where} ({diff['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}])"


def verdict(result: Any) -> list[str]:
    """The answer in plain words, first lines of every report: each row's held-out binary kappa with its interval,
    where it stands against the reference row (paired bootstrap over queries), and what its compile cost."""
    ranked, reference = result.ranked(), getattr(result, "reference", "self-improve")
    if not any(r.metrics.get("annotation") for r in ranked):
        return ["No held-out judgements were given, so no row's labels could be compared with people's; the rows "
                "are ranked by the verifier's scores."]
    held = result.heldout
    parts = []
    for r in ranked:
        kappa = ((r.metrics.get("annotation") or {}).get("binary") or {}).get("kappa")
        where = "" if r.strategy == reference else f", {standing(r.kappa_vs_reference, reference)}"
        cost = r.compile_cost
        parts.append(f"{_row_name(r)} κ {_with_ci(kappa, getattr(r, 'kappa_ci', None))}{where}; compile "
                     f"{_calls(cost)} LM calls, {_f(cost.get('seconds', 0) / 60, 0)} min")
    same = same_judges(ranked)
    return [f"Binary κ against people's judgments on {held.get('pairs', 0)} held-out pairs over "
            f"{held.get('queries', 0)} queries no compile used (95% bootstrap intervals over queries; each row "
            f"against {reference}, paired):", "", *[f"- {part}" for part in parts], *(["", *same] if same else [])]


def _names(rows: list[Any]) -> str:
    names = [_row_name(r) for r in rows]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def same_judges(ranked: list[Any]) -> list[str]:
    """One sentence naming the rows whose judges are identical (prompt, document clip and calibration): their labels
    agree on every pair by construction, so between them only extraction and query writing can differ."""
    groups: dict[str, list[Any]] = {}
    for r in ranked:
        if (getattr(r, "judge_record", None) or {}).get("id"):
            groups.setdefault(r.judge_record["id"], []).append(r)
    shared = [rows for rows in groups.values() if len(rows) > 1]
    if not shared:
        return []
    return ["Identical judges (same prompt and calibration, so the same label on every pair; only extraction and "
            "query writing differ between them): " + "; ".join(_names(rows) for rows in shared) + "."]


def _loop(record: dict[str, Any]) -> str:
    loop = record.get("loop")
    if not loop:
        return "n/a"
    if loop.get("stop_reason") == "not_evaluated":
        return "not run (drafted instruction kept)"
    score, threshold = loop.get("score"), loop.get("threshold")
    against = f" ({_f(score)} vs {_f(threshold)})" if score is not None and threshold is not None else ""
    return (f"{loop.get('stop_reason')} after {loop.get('attempts')} attempt(s), kept {loop.get('kept')}"
            f"{against}")


def judges_section(ranked: list[Any]) -> list[str]:
    """What decides each row's labels: its judge (an id shared by identical judges), its grading prompt (shared by
    judges that make the same model call), what its calibration was fitted on, and how its annotation loop ended."""
    records = [(r, getattr(r, "judge_record", None) or {}) for r in ranked]
    if not any(rec for _, rec in records):
        return []
    lines = ["", "## The judges", "",
             "| strategy | judge id | prompt | calibrated on | κ there (binary) | annotation loop | grades |",
             "|---|---|---|---|---|---|---|"]
    for r, rec in records:
        cal = rec.get("calibrated_on") or {}
        fitted = (f"{cal['queries']} queries ({cal['people']} judged by people), {cal['candidates']} candidates"
                  if cal else "n/a (written judge)")
        prompt = rec.get("grade_prompt") or rec.get("annotate_prompt")
        shared = ((r.metrics.get("annotation") or {}).get("grades_from"))
        lines.append(f"| {_row_name(r)} | `{rec.get('id', 'n/a')}` | `{prompt or 'n/a'}` | {fitted} | "
                     f"{_f(cal.get('binary_kappa'))} | {_loop(rec)} | "
                     f"{f'calibrated from {shared} (same prompt)' if shared else 'graded'} |")
    lines += ["", "A row whose grading prompt is an earlier row's (the same model call) calibrates that row's grades "
                  "of the held-out pairs instead of asking the model again: the labels are the ones grading again "
                  "would give, and its scoring cost leaves those calls out. κ there: the calibration's agreement on "
                  "what it was fitted on (in sample, not a held-out figure)."]
    return lines


def markdown(result: Any) -> str:
    """The answer (:func:`verdict`), the headline table (one row per strategy, best first), the ranking rule,
    per-class label quality, and the artifacts."""
    ranked = result.ranked()
    reference = getattr(result, "reference", "self-improve")
    with_labels = any(r.metrics.get("annotation") for r in ranked)
    measure = getattr(result, "measure", None)
    with_downstream = bool(measure) and any(r.downstream for r in ranked)
    head = ["rank", "strategy", "artifact", "judge"]
    if with_labels:
        head += ["binary κ [95% CI]", f"κ − {reference} [95% CI]", "recall relevant", "recall not relevant",
                 "3-class κ", "AUC score", "AUC E", "binary acc"]
    if with_downstream:
        head += [measure]
    head += ["identifiers 0-3", "queries 0-3", "LLM calls", "prompt tokens", "generated tokens", "tokens",
             "compile min"]
    lines = [f"# Strategy comparison: {result.task}", "", *verdict(result), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in ranked:
        cost = r.compile_cost
        row = [str(r.rank), _row_name(r), f"`{r.version}`", getattr(r, "judge", "") or "n/a"]
        if with_labels:
            ann = r.metrics.get("annotation") or {}
            per = ann.get("binary", {}).get("per_class", {})
            auc = ann.get("ranking") or {}
            row += [_with_ci(_ann(r.metrics, "binary", "kappa"), getattr(r, "kappa_ci", None)), _kappa_diff(r),
                    _f(per.get("relevant", {}).get("recall"), 2), _f(per.get("non_relevant", {}).get("recall"), 2),
                    _f(_ann(r.metrics, "three_class", "kappa")), _f(auc.get("auc_score")), _f(auc.get("auc_expected")),
                    _f(_ann(r.metrics, "binary", "accuracy"))]
        if with_downstream:
            row += [_f((r.downstream or {}).get(measure), 4)]
        row += [_f(r.metrics.get("idattr_score"), 2), _f(r.metrics.get("query_score"), 2), _calls(cost),
                str(cost.get("prompt_tokens", 0)), str(cost.get("completion_tokens", 0)),
                str(cost.get("total_tokens", 0)), _f(cost.get("seconds", 0) / 60, 1)]
        lines.append("| " + " | ".join(row) + " |")
    if result.ranking is not None:
        lines += ["", f"Ranking rule: {result.ranking.describe()}."]
    if with_labels:
        lines += ["", f"κ − {reference}: each row's binary κ minus {reference}'s on the same held-out pairs, with "
                      "a 95% paired bootstrap interval over queries. AUC: how often a reference positive gets a higher "
                      "judge score than a negative (the calibrated score the labels are cut from, and E alone; n/a "
                      "for a written judge)."]
        ref = (result.heldout or {}).get("reference_ranking") or {}
        if ref:
            lines += ["", "Without an LLM, on the same pairs: " + ", ".join(
                f"{name.removeprefix('auc_')} AUC {_f(value)}" for name, value in ref.items()) + "."]
    if result.baseline and measure:
        lines += ["", (f"Untrained base model `{result.baseline.get('model')}`: {measure} "
                       f"{_f(result.baseline.get(measure), 4)} on {result.baseline.get('dataset')}.")]
    held = result.heldout
    lines += ["", (f"Held-out material `{held.get('fingerprint')}`: {len(held.get('documents', []))} fresh documents "
                   f"(none used by any compile), {held.get('pairs', 0)} labelled pairs over {held.get('queries', 0)} "
                   f"queries ({held.get('judgements', 'no judgements given')}; unjudged retrieved candidates count "
                   f"as {held.get('unjudged_policy')}; none is one of the {held.get('excluded_queries', 0)} few-shot "
                   "or calibration queries of any compile). Scores are the verifier's 0-3 per document (mean). "
                   "Compile tokens count only the calls DSPy's cache did not answer; cached calls are shown.")]
    if with_labels:
        lines += ["", "## Label quality per class (precision / recall)", "",
                  "| strategy | positive | hard negative | easy negative | training-label precision | unlabelled |",
                  "|---|---|---|---|---|---|"]
        for r in ranked:
            ann = r.metrics.get("annotation") or {}
            per = (ann.get("three_class") or {}).get("per_class", {})
            cells = [f"{_f(per.get(c, {}).get('precision'), 2)} / {_f(per.get(c, {}).get('recall'), 2)}"
                     for c in ("positive", "hard_negative", "easy_negative")]
            lines.append(f"| {_row_name(r)} | " + " | ".join(cells) +
                         f" | {_f(ann.get('training_label_precision'), 2)} | "
                         f"{(ann.get('three_class') or {}).get('unlabelled', 0)} |")
    decided = [r for r in ranked if r.human_decisions]
    if decided:
        lines += ["", "## Where human decisions came from", ""]
        for r in decided:
            labels, reviews = r.human_decisions.get("labels"), r.human_decisions.get("reviews")
            if labels:
                where = f" `{labels['path']}`" if labels.get("path") else ""
                count = f", {labels['pairs']} pairs" if labels.get("pairs") else ""
                lines.append(f"- {r.strategy}, calibration labels: {labels['source']}{where}{count}")
            if reviews and reviews.get("file"):
                lines.append(f"- {r.strategy}, reviews: {reviews['source']} `{reviews['file']}`, reviewer "
                             f"{reviews['reviewer']}")
            elif reviews:
                lines.append(f"- {r.strategy}, reviews: {reviews['source']}")
    lines += judges_section(ranked)
    lines += ["", "## Artifacts", "", "| strategy | version | program id | checksum | path |", "|---|---|---|---|---|"]
    lines += [f"| {_row_name(r)} | `{r.version}` | `{r.program_id or r.version}` | `{r.checksum[:16]}` | "
              f"`{r.artifact}` |"
              for r in ranked]
    return "\n".join(lines) + "\n"


def draw_chart(result: Any, path: str | Path) -> Path:
    """Grouped bars of the 0-1 quality metrics per strategy, beside the tokens each compile spent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DependencyError("matplotlib is needed for the comparison chart",
                              hint="pip install 'syntra-dspy[plot]' (or matplotlib>=3.8)") from None
    ranked = result.ranked()
    metrics = list(dict.fromkeys(k for r in ranked for k in r.quality))
    measure = getattr(result, "measure", None)
    downstream = f"{measure} (downstream)" if measure and any(r.downstream for r in ranked) else None
    if downstream:
        metrics.append(downstream)
    labels = [f"{r.strategy}\n{r.version}" for r in ranked]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(1, len(metrics))
    for m, name in enumerate(metrics):
        values = [(r.downstream or {}).get(measure) if name == downstream else r.quality.get(name) for r in ranked]
        xs = [i + (m - (len(metrics) - 1) / 2) * width for i in range(len(ranked))]
        left.bar(xs, [v if v is not None else 0 for v in values], width, label=name)
    left.set_xticks(range(len(ranked)), labels, fontsize=8)
    low = min([0.0, *(v for r in ranked for v in r.quality.values())])
    left.set_ylim(low - 0.05 if low < 0 else 0, 1.25)
    left.set_yticks([t / 5 for t in range(int(low * 5) - (low < 0), 6)])
    left.set_ylabel("score (verifier 0-1, κ -1 to 1)")
    left.set_title(f"{result.task}: held-out quality (best first)")
    left.legend(fontsize=7, loc="upper center", ncol=min(3, max(1, len(metrics))), frameon=False)
    right.bar(range(len(ranked)), [r.compile_cost.get("total_tokens", 0) for r in ranked], color="grey")
    right.set_xticks(range(len(ranked)), [r.strategy for r in ranked], fontsize=8, rotation=30)
    right.set_title("compile tokens")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_reports(result: Any, out: str | Path, *, chart: bool = True) -> dict[str, str]:
    """Write ``comparison.md``, ``comparison.json`` and (optionally) ``comparison.png``; return their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": shown_path(out / "comparison.md"), "json": shown_path(out / "comparison.json")}
    if chart:
        paths["chart"] = shown_path(out / "comparison.png")
    result.outputs = paths
    atomic_write_text(out / "comparison.md", markdown(result))
    atomic_write_text(out / "comparison.json",
                      json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n")
    if chart:
        draw_chart(result, out / "comparison.png")
    return paths
