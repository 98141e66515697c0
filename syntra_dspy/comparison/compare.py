"""``compare_strategies``: compile one task once per strategy and score every artifact on the same material.

Every strategy compiles with the same settings (so the same seed, the same diversity selection and the same
trial documents, the same judge kind) and the same LM roles, over one corpus context; the held-out material is
drawn once, after all compiles, from what none of them used: no trial document, no few-shot query and no query any
compile calibrated on (people's labels, a judged dataset's calibration claims), checked again before scoring.
Compile cost (LLM calls, tokens, wall time) comes from each artifact's manifest. A row is a strategy, or a second
row of one under its own label (``developer=human``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import Artifact, load_artifact, render_prompts
from syntra_dspy.artifacts.manifest import Manifest
from syntra_dspy.comparison.checkpoints import RowCheckpoints, fingerprint
from syntra_dspy.comparison.heldout import HeldoutMaterial, annotation_items, check_apart, fresh_documents
from syntra_dspy.comparison.ranking import REFERENCE, RankingRule, rank
from syntra_dspy.comparison.report import shown_path
from syntra_dspy.comparison.scoring import (
    HeldoutScorer,
    SharedGrades,
    grading_key,
    normalized_quality,
    reference_ranking,
)
from syntra_dspy.comparison.settings import CompareConfig
from syntra_dspy.evaluation.exclude import normalize_query
from syntra_dspy.judging.candidates import lexical_witness
from syntra_dspy.judging.judge import judge_mode
from syntra_dspy.judging.labels import load_judgements
from syntra_dspy.optimizers import STRATEGIES
from syntra_dspy.retrieval.encoder import Encoder
from syntra_dspy.task import EncoderSpec, TaskSpec, load_task

logger = logging.getLogger(__name__)


@dataclass
class StrategyResult:
    """One strategy's artifact, what compiling it cost, and its held-out scores."""

    strategy: str
    artifact: str
    version: str
    checksum: str
    compile_cost: dict[str, Any]
    metrics: dict[str, Any]
    scoring_cost: dict[str, Any] = field(default_factory=dict)
    downstream: dict[str, Any] | None = None
    quality: dict[str, float] = field(default_factory=dict)
    overall: float | None = None  # the value the ranking rule ordered by
    rank: int = 0
    kappa_vs_reference: dict[str, Any] | None = None  # binary kappa minus the reference row's, paired bootstrap CI
    program_id: str = ""  # shared by compiles that made the same program (the version is this compile's own)
    human_decisions: dict[str, Any] = field(default_factory=dict)  # where labels and reviews came from
    kind: str = ""  # the strategy compiled, when the row's label (``strategy``) is another name
    judge: str = ""  # the judge the artifact holds: graded or written
    judge_record: dict[str, Any] = field(default_factory=dict)  # what decides its labels (:func:`judge_record`)
    kappa_ci: list[float | None] | None = None  # 95% bootstrap interval of the binary kappa, over queries

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ComparisonResult:
    task: str
    strategies: list[StrategyResult]
    heldout: dict[str, Any]
    settings: dict[str, Any]
    baseline: dict[str, Any] | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    ranking: RankingRule | None = None
    measure: str | None = None  # the downstream measure configured (None: no downstream check)
    reference: str = REFERENCE  # the row every other one is compared with

    def ranked(self) -> list[StrategyResult]:
        return sorted(self.strategies, key=lambda r: r.rank)

    def to_dict(self) -> dict[str, Any]:
        ranked = self.ranked()
        return {"task": self.task, "settings": self.settings, "heldout": self.heldout, "baseline": self.baseline,
                "ranking": [r.strategy for r in ranked],
                "rank": {r.strategy: r.rank for r in ranked},
                "ranking_rule": self.ranking.to_dict() if self.ranking else None, "measure": self.measure,
                "reference": self.reference,
                "metrics": {r.strategy: headline(r) for r in ranked},
                "compile_cost": {r.strategy: r.compile_cost for r in ranked},
                "strategies": [r.to_dict() for r in ranked],
                "outputs": self.outputs}


def headline(r: StrategyResult) -> dict[str, Any]:
    """One row's held-out figures, as the report's first table shows them."""
    ann = r.metrics.get("annotation") or {}
    binary, three = ann.get("binary") or {}, ann.get("three_class") or {}
    return {"binary_kappa": binary.get("kappa"), "binary_kappa_ci95": r.kappa_ci,
            "three_class_kappa": three.get("kappa"),
            "positive_recall": ((binary.get("per_class") or {}).get("relevant") or {}).get("recall"),
            "auc_score": (ann.get("ranking") or {}).get("auc_score"),
            "auc_expected": (ann.get("ranking") or {}).get("auc_expected"),
            "vs_reference": r.kappa_vs_reference, "idattr_score": r.metrics.get("idattr_score"),
            "query_score": r.metrics.get("query_score"), "judge": r.judge,
            **({"downstream": r.downstream} if r.downstream else {})}


def _row(label: str, strategy: str, artifact: Artifact, metrics: dict[str, Any] | None = None,
         scoring_cost: dict[str, Any] | None = None) -> StrategyResult:
    """One row's result: its artifact and compile cost, and once scored its held-out metrics and their cost."""
    return StrategyResult(label, shown_path(artifact.path), artifact.version, artifact.checksum,
                          compile_cost(artifact.meta), metrics or {}, scoring_cost or {},
                          program_id=artifact.program_id,
                          human_decisions=human_decisions(artifact.meta),
                          kind=strategy if strategy != label else "", judge=judge_mode(artifact.program),
                          judge_record=judge_record(artifact))


def judge_record(artifact: Artifact) -> dict[str, Any]:
    """What decides the labels a row gives, for the report: ``id``, shared by artifacts that label every pair alike
    (the same prompt, document clip and calibration); ``grade_prompt`` (``annotate_prompt`` for a written judge),
    shared by graded judges that make the same model call (their rows differ only in calibration); what the
    calibration was fitted on; and how the compile's annotation loop ended (attempts, stop reason, the last score
    against its threshold)."""
    program = artifact.program
    calibration = program.state.judge
    step = "grade" if judge_mode(program) == "graded" else "annotate"
    prompt = render_prompts(program)[step]["system_prompt_sha256"]
    out: dict[str, Any] = {
        "id": fingerprint(prompt, program.max_doc_chars,
                          calibration.model_dump(mode="json") if calibration is not None else None)[:12],
        f"{step}_prompt": prompt[:12]}
    summary = calibration.summary if calibration is not None else None
    if summary is not None:
        out["calibrated_on"] = {"queries": summary.queries, "candidates": summary.candidates,
                                "people": summary.sources.get("human", 0), "binary_kappa": summary.binary_kappa}
    loop = next((s for s in artifact.meta.history if s.name == "annotation_instruction"), None)
    if loop is not None:
        last = loop.attempts[-1] if loop.attempts else None
        out["loop"] = {"attempts": len(loop.attempts), "kept": loop.kept, "passed": loop.passed,
                       "stop_reason": loop.stop_reason, "score": last.score if last else None,
                       "threshold": getattr(loop, "threshold", None)}
    return out


def compile_cost(meta: Manifest) -> dict[str, Any]:
    """LLM calls, tokens and wall time this compile spent, summed over its stages."""
    total = {k: sum(getattr(stage, k) for stage in meta.usage.values())
             for k in ("calls", "cached", "prompt_tokens", "completion_tokens")}
    total["total_tokens"] = total["prompt_tokens"] + total["completion_tokens"]
    total["seconds"] = float(meta.seconds or 0.0)
    total["minutes"] = round(total["seconds"] / 60, 1)
    return total


def human_decisions(meta: Manifest) -> dict[str, Any]:
    """Where a compile's human decisions came from: the label set and the review session (empty: none)."""
    labels = meta.human_label_source()
    reviews = meta.record.get("reviews")
    out = {"labels": {k: v for k, v in labels.items() if k != "queries"}} if labels else {}
    return {**out, "reviews": reviews} if reviews else out


def calibration_queries(artifacts: Sequence[Artifact]) -> list[str]:
    """Queries a compile calibrated on, or took as few-shot examples: people's labels, the graded judge's
    calibration set (a judged dataset's claims included). Held-out material must not score on them again."""
    from syntra_dspy.judging.measure import excluded_queries

    out: list[str] = []
    for artifact in artifacts:
        out += (artifact.meta.human_label_source() or {}).get("queries", [])
        out += excluded_queries(artifact.program)
    return out


def compare_strategies(task: str | Path | TaskSpec, config: CompareConfig | None = None, *,
                       out: str | Path = "comparison", artifacts: str | Path | None = None, lms: Any = None,
                       encoder: str | EncoderSpec | Encoder | None = None,
                       strategy_options: dict[str, dict[str, Any]] | None = None,
                       **settings: Any) -> ComparisonResult:
    """Compile ``task`` under each strategy, score the artifacts on shared held-out material, write reports.

    ``config`` (a :class:`CompareConfig`) holds the settings: the strategies, the compile settings and LM flags they
    share, the held-out material (``heldout``, a ``HeldoutOptions``), the downstream check (``downstream``, a
    ``DownstreamOptions``: produce → train → eval per strategy) and the chart; a caller may pass its fields as
    keywords instead (``compare_strategies(task, strategies="none,gepa")``), not both. The inputs: ``lms`` (built
    LM roles; default: the task file's, with ``lm_overrides``), ``encoder`` (a name, a setting or a loaded encoder,
    replacing the task file's) and ``strategy_options``, passed to each strategy's optimizer (e.g.
    ``{"human": {"feedback": "f.jsonl"}}``). Writes ``comparison.md``, ``comparison.json`` and ``comparison.png``
    (unless ``chart=False``) into ``out``; the artifacts go to ``artifacts`` (default ``out/artifacts``).
    """
    from syntra_dspy import compiler
    from syntra_dspy.lm.roles import LMRoles
    from syntra_dspy.lm.usage import UsageMeter

    config = CompareConfig.of_call(config, settings)
    rows, settings, heldout, downstream = config.rows(), config.settings, config.heldout, config.downstream
    reference = config.reference_row()
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    for _, strategy in rows:  # a judge one of the strategies cannot compile is refused before anything is compiled
        STRATEGIES[strategy].settings_for(settings)
    out = Path(out)
    artifacts = Path(artifacts) if artifacts is not None else out / "artifacts"
    roles = lms or LMRoles.from_spec(spec.lms, config.lm_overrides, timeout=config.lm_timeout)
    # One corpus context for every compile, the held-out material and the downstream runs.
    context, pairs = compiler.corpus_context(spec, encoder=encoder, index_dir=config.index_dir,
                                             source="<task>" if isinstance(task, TaskSpec) else str(task))
    corpus = context.corpus

    # What decides each row, so a rerun takes the rows an interrupted run finished (OUT/rows/). Not the other rows:
    # a row compiles alone, and its scores are keyed by the held-out material, which all the rows' compiles shape.
    decisive = config.model_dump(mode="json", exclude={"strategies", "reference", "chart", "resume", "downstream",
                                                       "index_dir", "compile_only"})
    common = fingerprint(spec, decisive,
                         roles.describe() if hasattr(roles, "describe") else type(roles).__name__,
                         context.encoder.id, context.corpus.fingerprint)
    marks = {label: RowCheckpoints(out, fingerprint(common, label, strategy, (strategy_options or {}).get(label)),
                                   enabled=config.resume) for label, strategy in rows}
    compiled: list[Artifact] = []
    for label, strategy in rows:
        done = marks[label].artifact(label)
        if done is not None:
            logger.info("compare %s: %s was compiled by an earlier run with the same inputs: %s", spec.name, label,
                        done)
            compiled.append(load_artifact(done))
            continue
        logger.info("compare %s: compiling %s with strategy %s", spec.name, label, strategy)
        compiled.append(compiler.compile_task(spec, strategy=strategy, out=artifacts, settings=settings, lms=roles,
                                              context=context, optimizer_kwargs=(strategy_options or {}).get(label)))
        marks[label].compiled(label, compiled[-1].path)
    if config.compile_only:  # scored later, once every row is compiled: the held-out material depends on them all
        return ComparisonResult(spec.name, [_row(label, strategy, artifact)
                                            for (label, strategy), artifact in zip(rows, compiled)],
                                {}, {"strategies": list(config.strategies), "compile_only": True}, reference=reference)

    seed = heldout.seed if heldout.seed is not None else settings.seed
    used = {d for a in compiled for d in a.meta.sample.documents}
    used |= {p.positive_id for p in pairs if p.positive_id}
    selected = context.select(target=settings.selection_target, tau=settings.selection_tau, seed=settings.seed)
    docs = fresh_documents(selected, corpus.ids, exclude=used, n=heldout.docs, seed=seed + 1)
    items: tuple = ()
    description: dict[str, Any] = {"seed": seed, "excluded_documents": len(used), "unjudged_policy": heldout.unjudged}
    definition = compiled[0].program.state.task_definition
    lexical = lexical_witness(corpus, definition.query_language, definition.document_language)
    if heldout.qrels is not None:
        queries, labels = load_judgements(heldout.qrels, queries=heldout.queries)
        calibrated = [p.query for p in pairs] + calibration_queries(compiled)
        items = annotation_items(queries, labels, corpus=corpus, search=context.candidates.search,
                                 exclude_queries=calibrated, options=heldout, seed=seed + 2)
        check_apart(items, calibrated)
        description["judgements"] = shown_path(heldout.qrels)
        description["excluded_queries"] = len({normalize_query(q) for q in calibrated})
        description["reference_ranking"] = reference_ranking(items, context.similarity, lexical)
    material = HeldoutMaterial(tuple(docs), items, description)
    material_key = fingerprint(material.to_dict())

    results = []
    shared: dict[str, SharedGrades] = {}  # grading key -> the grades the first row with that grading prompt made
    for (label, strategy), artifact in zip(rows, compiled):
        key = grading_key(artifact.program)
        earlier = marks[label].result(label, material_key)
        if earlier is not None:
            logger.info("compare %s: %s was scored by an earlier run on the same held-out material", spec.name, label)
            # the artifact as this run finds it: the earlier run may have named it from another directory
            results.append(StrategyResult(**{**earlier, "artifact": shown_path(artifact.path),
                                             "judge_record": judge_record(artifact)}))
        else:
            meter = UsageMeter()
            started = time.perf_counter()
            grades = shared.get(key) if key is not None else None
            if grades is not None:
                logger.info("compare %s: %s grades with %s's grading prompt; calibrating %s's grades of the held-out "
                            "pairs instead of asking again", spec.name, label, grades.row, grades.row)
            metrics = HeldoutScorer(lms=roles, settings=settings, meter=meter).score(
                artifact, material, corpus, similarity=context.similarity, lexical=lexical, grades=grades)
            cost = meter.total()
            cost["seconds_wall"] = round(time.perf_counter() - started, 3)
            results.append(_row(label, strategy, artifact, metrics, cost))
            marks[label].scored(label, artifact.path, material_key, results[-1].to_dict())
        if key is not None and key not in shared:  # the first row with this grading prompt lends its grades
            made = SharedGrades.of_labels(label, results[-1].metrics.get("labels") or [])
            if made.grades:
                shared[key] = made
    baseline = None
    if downstream is not None:
        from syntra_dspy.comparison.downstream import run_downstream

        baseline = run_downstream(spec, results, options=downstream, context=context, lms=roles,
                                  out=out / "downstream", exclude_queries=calibration_queries(compiled))
    measure = downstream.measure if downstream is not None else None
    rule = rank(results, measure=measure, reference=reference)
    for r in results:
        r.quality = normalized_quality(r.metrics)
    result = ComparisonResult(spec.name, results, material.to_dict(),
                              {"strategies": list(config.strategies), "reference": reference,
                               "compile": settings.model_dump(mode="json"),
                               "heldout": {k: shown_path(v) if isinstance(v, Path) else v
                                           for k, v in heldout.model_dump().items()},
                               "lms": roles.describe() if hasattr(roles, "describe") else {}},
                              baseline, ranking=rule, measure=measure, reference=reference)
    from syntra_dspy.comparison.report import write_reports

    write_reports(result, out, chart=config.chart)
    return result
