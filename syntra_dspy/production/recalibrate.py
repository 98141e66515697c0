"""Refit an artifact's judge calibration without recompiling its program (``syntra artifacts recalibrate``).

Grading is the expensive part of a judge; the calibration on top (which score, which cut points) is cheap. When a
team gets human judgments later, or a new score becomes available, a new :class:`JudgeCalibration` is fitted on the
calibration set: the grades the artifact keeps are reused, and only candidates it holds no grade for are graded,
with the artifact's own, unchanged grading prompt. The result is a new artifact
version whose program differs from the original in the ``judge`` component only: every step's instruction and
rendered prompt is the original's (checked before it is written), so grades logged for one are valid for the other
(``syntra agreement ... --compare`` reuses them), and the manifest says what it was derived from.

The one exception is asked for by name: ``--without-guidance`` grades with the task definition and the fixed scale
only, leaving the compiled annotation guidance out of the grading prompt (a shorter prompt, ~130 of ~640 tokens a
call on SciFact; the compile keeps the guidance when it fits its calibration set better, which on 15 queries is a
noisy choice). Then the grading prompt, and only it, differs from the original's; every calibration candidate is
graded again, and grades logged or stored for one are not the other's (run stores refuse them). ``--brief-grading``
is the other: the grading instruction becomes the task's relevance definition and a one-line scale (83 of 170
tokens on SciFact, [experiments/judge_brief]), graded and refused the same way.

It lives in production, beside :mod:`~syntra_dspy.production.relabel` (which labels a run's stored grades with such
an artifact's judge): the calibration set is built over the corpus and index production's loader opens, and graded
with the generator as production resolves it. The judge's own parts (the calibration set, the fit) are in
:mod:`syntra_dspy.judging`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ArtifactError, ConfigError
from syntra_dspy.judging import calibration_set as js
from syntra_dspy.judging.calibration import CalibrationSample, JudgeCalibration, fit_calibration
from syntra_dspy.judging.candidates import lexical_witness, with_lexical
from syntra_dspy.judging.settings import DEFAULT_GRADE_ORDER, GradeOrder

logger = logging.getLogger(__name__)

#: Manifest fields that describe one compile's own work; a recalibration keeps the compile's and adds its own record.
_SEALED = ("version", "program_id", "prompts", "schema_version", "kind")


def recalibrate_artifact(artifact: str | Path, out: str | Path, *, feature: str = "auto",
                         calibration_labels: str | None = None, calibration_queries: int | None = None,
                         generator: Any = None, api_key_env: str | None = None,
                         index_dir: str | Path | None = None, regrade: bool = False,
                         grade_order: GradeOrder | None = None, without_guidance: bool = False,
                         brief_grading: bool = False) -> Path:
    """Fit a new calibration on ``artifact``'s graded calibration set and save a derived artifact under ``out``
    (``<out>/<task>/<version>``); returns its directory.

    The grades the artifact keeps with its calibration (``JudgeCalibration.samples``) are reused: with the compile's
    calibration set unchanged, nothing is graded or loaded, and the fit is the same on any machine. Candidates the
    artifact holds no grade for (human judgments given now, or an artifact made before grades were kept) are graded
    with the artifact's own, unchanged grading prompt; ``regrade`` grades them all (e.g. to measure another build),
    and so does another ``generator`` than the one that graded them. The calibration set is built as compile built
    it (the compile's seed, candidate depth and controls; its human label source and query count unless
    ``calibration_labels``/``calibration_queries`` are given). ``grade_order``: which the grading prompt shows first
    (default: the order of the artifact's calibration); another order than the kept grades' grades every candidate
    again, and the new calibration records it, so production grades in it. ``without_guidance``: the new version's
    grading prompt leaves out the compiled annotation guidance, and every candidate is graded with it;
    ``brief_grading``: the same with the brief grading prompt (the relevance definition and a one-line scale).
    """
    from syntra_dspy.artifacts import check_artifact_root, load_artifact, render_prompts, save_artifact
    from syntra_dspy.lm.roles import with_engine_build
    from syntra_dspy.lm.usage import UsageMeter
    from syntra_dspy.production.setup import calibration_grader, grader, resolve_generator, same_grader

    original = load_artifact(artifact)
    settings = original.meta.optimizer
    if original.program.state.judge is None and settings.get("judge", "graded") != "graded":
        raise ConfigError("this artifact's judge writes its labels (compiled with judge 'written'): there is no "
                          "calibration to refit", path=artifact, hint="compile it with --judge-mode graded")
    check_artifact_root(out, original.task)
    labels = calibration_labels if calibration_labels is not None else settings.get("calibration_labels")
    queries = calibration_queries if calibration_queries is not None else int(settings.get("calibration_queries") or 0)
    program = original.program
    change = {**({"grade_guidance": False} if without_guidance and program.state.grade_guidance else {}),
              **({"grade_prompt": "brief"} if brief_grading and program.state.grade_prompt != "brief" else {})}
    new_prompt = bool(change)  # the grading prompt, and only it, changes: every candidate is graded again
    grading = program.with_components(**change) if new_prompt else program
    if new_prompt and grading.grade.signature.instructions == program.grade.signature.instructions:
        # no annotation instruction, or a whole-step grading instruction (GEPA's) that the components do not compose
        flag, what = (("brief_grading", "is a whole-step instruction, which the brief one cannot replace")
                      if brief_grading else ("without_guidance", "carries no compiled guidance to leave out"))
        raise ConfigError(f"this artifact's grading prompt {what}", path=artifact, field=flag,
                          hint=f"recalibrate without --{flag.replace('_', '-')}")
    saved = program.state.judge.samples if program.state.judge is not None else ()
    kept_order = program.grade_order
    order: GradeOrder = grade_order or kept_order
    same_set = labels == settings.get("calibration_labels") and queries == int(settings.get("calibration_queries") or 0)
    # The artifact's own generator is only built when something must be graded (a served one needs --generator).
    own = original.meta.generator.model_dump()
    lm, lm_info = (None, own) if generator is None else resolve_generator(original.meta, generator, api_key_env)
    reusable = (bool(saved) and not regrade and not new_prompt and order == kept_order
                and same_grader(grader(lm_info), calibration_grader(original.meta)))
    meter = UsageMeter()
    started = time.perf_counter()
    if reusable and same_set:
        samples, graded, reused = list(saved), 0, len(saved)
        logger.info("recalibrating %s/%s: the %d graded calibration candidates the artifact keeps (nothing graded)",
                    original.task, original.version, len(saved))
    else:
        if "pairs" in (original.meta.human_label_source() or {}) and calibration_labels is None:
            raise ConfigError("this artifact was calibrated on human-confirmed label pairs, which recalibration "
                              "does not re-read", path=artifact,
                              hint="give --calibration-labels with the same judged data, or leave the calibration "
                                   "set as the compile made it (its grades are reused)")
        samples, graded, reused = _graded_set(original, labels, queries, saved if reusable else (), lm, api_key_env,
                                              meter, index_dir, order=order, program=grading)
    if not any(s.gold == "positive" for s in samples):
        raise ConfigError("no known positive of the calibration set could be graded: the judge's answers were "
                          "unusable", path=artifact)
    judge = fit_calibration(samples, feature=feature, grade_order=order)  # type: ignore[arg-type]
    derived = grading.with_components(judge=judge)
    before, after = render_prompts(program), render_prompts(derived)
    if {step for step in before if before[step] != after[step]} - ({"grade"} if new_prompt else set()):
        raise ArtifactError("the recalibrated program renders other prompts than the original (only the judge may "
                            "change, and with --without-guidance or --brief-grading the grading prompt)",
                            path=artifact)
    seconds = time.perf_counter() - started
    manifest = {k: v for k, v in original.manifest.items() if k not in _SEALED}
    build = (with_engine_build(lm_info).get("embedded") or {}).get("engine_build")  # None unless it graded embedded
    record = dict(manifest.get("record") or {})
    record["recalibration"] = {
        "from_version": original.version, "from_program_id": original.program_id,
        "at": datetime.now(UTC).isoformat(timespec="seconds"), "seconds": round(seconds, 1),
        "feature_setting": feature, "calibration_labels": labels, "calibration_queries": queries, "grade_order": order,
        "candidates": len(samples), "graded": graded, "grades_reused": reused,
        **({"grade_guidance": "left out: the grading prompt differs from the original's"}
           if "grade_guidance" in change else {}),
        **({"grade_prompt": "brief: the grading prompt differs from the original's"}
           if "grade_prompt" in change else {}),
        "generator": lm_info.get("model") if graded else None,
        **({"engine_build": build} if graded and build else {}),
        "usage": meter.snapshot(), "before": _brief(program.state.judge), "after": _brief(judge),
    }
    manifest["record"] = record
    manifest["created_at"] = record["recalibration"]["at"]
    path = save_artifact(derived, manifest, out)
    logger.info("recalibrated judge (%s, calibration kappa %.3f, recall %.3f) saved as %s", judge.feature,
                judge.summary.binary_kappa or 0.0, judge.summary.positive_recall or 0.0,  # type: ignore[union-attr]
                path)
    return path


def _graded_set(original: Any, labels: str | None, queries: int, saved: Sequence[CalibrationSample], lm: Any,
                api_key_env: str | None, meter: Any, index_dir: str | Path | None, *,
                order: GradeOrder = DEFAULT_GRADE_ORDER, program: Any = None
                ) -> tuple[list[CalibrationSample], int, int]:
    """The calibration set built as the compile built it (with ``labels``/``queries``), each candidate's E taken
    from ``saved`` where it holds the same query and document, graded otherwise (``order``: which the grading prompt
    shows first; ``program``: whose grading prompt, default the original's); returns the samples, how many were
    graded now and how many reused."""
    import dspy

    from syntra_dspy.lm.roles import prepare_lm
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.setup import load_inputs, resolve_generator

    settings, program = original.meta.optimizer, program if program is not None else original.program
    inputs = load_inputs(original.path, ProduceConfig(index_dir=index_dir))
    material = js.calibration_set(program.state.examples, inputs, k=int(settings.get("annotation_candidates", 8)),
                                  controls=max(1, int(settings.get("control_negatives", 1))),
                                  seed=int(settings.get("seed", 42)), labels=labels, label_queries=queries)
    definition = program.state.task_definition
    lexical = lexical_witness(inputs.corpus, definition.query_language, definition.document_language)
    if lexical is not None:
        material = with_lexical(material, lexical)
    if saved and inputs.corpus.fingerprint != original.meta.fingerprints.corpus:
        logger.warning("the corpus is not the one the artifact was compiled on: its kept grades may be of other "
                       "texts under the same document ids, so every calibration candidate is graded again")
        saved = ()
    known = {(s.query, s.doc_id): s.expected for s in saved if s.doc_id is not None}
    expected: list[float | None] = [known.get((c.query, c.doc_id)) for c in material]
    todo = [i for i, e in enumerate(expected) if e is None]
    logger.info("recalibrating %s/%s: %d calibration candidates (%d queries), %d graded by the artifact, %d to grade",
                original.task, original.version, len(material), len({c.query for c in material}),
                len(material) - len(todo), len(todo))
    if todo:
        if lm is None:
            lm, _ = resolve_generator(original.meta, None, api_key_env)
        prepare_lm(lm)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None), meter.stage("annotation_instruction"):
            grades = js.grade_set(program, [material[i] for i in todo], inputs.corpus, order=order)
        for i, grade in zip(todo, grades):
            expected[i] = None if grade is None else grade.expected
    samples = [js.sample_of(c, e) for c, e in zip(material, expected) if e is not None]
    return samples, len(todo), len(material) - len(todo)


def _brief(calibration: JudgeCalibration | None) -> Mapping[str, Any] | None:
    """The fitted score and how it agreed on its calibration set, for the derived artifact's record."""
    if calibration is None:
        return None
    summary = calibration.summary
    return {"feature": calibration.feature, "positive_threshold": calibration.positive_threshold,
            "binary_kappa": summary.binary_kappa if summary else None,
            "positive_recall": summary.positive_recall if summary else None,
            "cv_binary_kappa": dict(summary.cv_binary_kappa) if summary else {}}
