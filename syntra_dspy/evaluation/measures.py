"""Measures through ir_measures: safe parsing of measure strings, per-query and aggregate scores.

Nothing is reimplemented: every value comes from ir_measures (pytrec_eval for nDCG/R, its own
provider for Judged). What this module fixes is the query set, with ``missing``:

``missing="zero"`` (default)
    Every judged query counts; one the run has no ranking for gets the measure's ``DEFAULT``, which is 0
    for every standard measure. This is what ``ir_measures`` does (library and command line: its
    ``Evaluator.iter_calc`` fills each judged query the run lacks with ``measure.DEFAULT``), and what
    ``trec_eval -c`` does. Scores therefore equal ``ir_measures QRELS RUN MEASURES``.
``missing="skip"``
    Only queries the run ranks are scored: plain ``trec_eval`` without ``-c`` (and BEIR's averaging).

Queries the run ranks but the qrels do not judge are never scored; an empty ranking counts as missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from syntra_dspy.errors import ConfigError, DependencyError

DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "nDCG@20", "R@100", "Judged@20")
MissingPolicy = Literal["zero", "skip"]
MISSING_POLICIES: tuple[str, ...] = ("zero", "skip")


def _ir_measures():
    try:
        import ir_measures
    except ImportError:
        raise DependencyError("ir_measures is not installed",
                              hint="pip install 'ir-measures>=0.4.3'") from None
    return ir_measures


def parse_measures(measures: str | Iterable[object] | None = None) -> list:
    """ir_measures ``Measure`` objects from strings (``"nDCG@10 R@100"``, a list, or measures).

    Parsing goes through ``ir_measures.parse_measure`` (a grammar, not ``eval``); an unknown or malformed
    name raises :class:`ConfigError` naming it. ``None`` gives :data:`DEFAULT_MEASURES`.
    """
    ir_measures = _ir_measures()
    if measures is None:
        items: list[object] = list(DEFAULT_MEASURES)
    elif isinstance(measures, str):
        items = list(_split_measure_string(measures))
    else:
        items = list(measures)
    parsed = []
    for item in items:
        if not isinstance(item, str):
            parsed.append(item)
            continue
        try:
            measure = ir_measures.parse_measure(item)
            measure.validate_params()
            parsed.append(measure)
        except Exception as exc:  # noqa: BLE001 - ir_measures raises ValueError/NameError/KeyError/AssertionError
            why = "it needs a cutoff, e.g. P@10" if "invalid param cutoff" in str(exc) else str(exc)
            raise ConfigError(f"unknown or malformed measure {item!r} ({why})", field="measures",
                              hint="use ir_measures names such as nDCG@10, R@100, Judged@20, P(rel=2)@10, "
                                   "RR, AP") from None
    if not parsed:
        raise ConfigError("no measures given", field="measures", hint=f"e.g. {' '.join(DEFAULT_MEASURES)}")
    seen: dict[str, object] = {}
    for m in parsed:
        seen.setdefault(str(m), m)
    return list(seen.values())


def _split_measure_string(text: str) -> Iterable[str]:
    """Split on whitespace or commas outside parentheses (``P(rel=2,judged_only=True)@5`` stays whole)."""
    depth, buf = 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (ch.isspace() or ch == ","):
            if buf:
                yield "".join(buf)
                buf = []
            continue
        buf.append(ch)
    if buf:
        yield "".join(buf)


def score_run(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    measures: str | Iterable[object] | None = None,
    *,
    queries: Iterable[str] | None = None,
    missing: MissingPolicy = "zero",
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Score ``run`` against ``qrels``: ``(aggregate, per_query)``, keyed by the measures' strings.

    ``queries`` restricts scoring to those ids (default: every judged query); ids without judgments
    are ignored. ``missing`` says what a query the run does not rank is worth (see the module doc).
    Aggregates are ir_measures' own (each measure's aggregator: the mean for all the defaults).
    """
    if missing not in MISSING_POLICIES:
        raise ConfigError(f"unknown missing-query policy {missing!r}", field="missing",
                          hint="use 'zero' (ir_measures, trec_eval -c) or 'skip' (plain trec_eval)")
    ir_measures = _ir_measures()
    parsed = parse_measures(measures)
    wanted = [q for q in (qrels if queries is None else dict.fromkeys(queries)) if q in qrels]
    sub_run = {q: dict(run[q]) for q in wanted if run.get(q)}
    if missing == "skip":
        wanted = [q for q in wanted if q in sub_run]
    names = [str(m) for m in parsed]
    if not wanted:
        return {n: float("nan") for n in names}, {}
    sub_qrels = {q: dict(qrels[q]) for q in wanted}
    try:
        result = ir_measures.calc(parsed, sub_qrels, sub_run)
    except (KeyError, AssertionError, ValueError, TypeError) as exc:
        raise ConfigError(f"cannot compute {', '.join(names)}: {type(exc).__name__} {exc}",
                          field="measures", hint="check the measure parameters") from None
    per_query: dict[str, dict[str, float]] = {q: {} for q in wanted}
    for metric in result.per_query:
        if metric.query_id in per_query:
            per_query[metric.query_id][str(metric.measure)] = float(metric.value)
    aggregate = {str(m): float(v) for m, v in result.aggregated.items()}
    ordered = {q: {n: values[n] for n in names if n in values} for q, values in per_query.items()}
    return {n: aggregate[n] for n in names}, ordered

