"""The judge cascade a production run uses (``syntra produce --judge-cascade``), built once per session from the
setting, the artifact's calibration and the run store (:mod:`syntra_dspy.judging.cascade` says what each rule
skips and why only ``lossless`` keeps every label)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.cascade import MIN_MARGIN_LISTS, JudgeCascade, sample_lists
from syntra_dspy.production.store import RunStore

logger = logging.getLogger(__name__)

#: Below this many production lists a run store's margin is taken with a warning to measure its cost. On SciFact a
#: margin from fewer lists was narrower, skipped more and cost more against people (docs/judge.md, "What a margin
#: costs"), but past 300 lists it still varied with the coverage, so its cost is measured either way.
STEADY_MARGIN_LISTS = 300


def production_cascade(program: Any, mode: str, *, coverage: float, store: Path | None = None,
                       grades: Path | None = None) -> JudgeCascade | None:
    """The cascade for ``mode`` (``off``, ``lossless``, ``margin``) over ``program``'s graded judge, or None.

    A ``margin`` is learned from the lists graded in full in ``grades`` when it is given (another run store, graded
    with the same prompt), else from the calibration set's graded samples when the artifact keeps enough of them
    (:data:`~syntra_dspy.judging.cascade.MIN_MARGIN_LISTS` queries), else from an earlier session of the run store
    at ``store`` (read before the run opens it)."""
    if mode == "off":
        return None
    calibration = program.state.judge
    if calibration is None:
        raise ConfigError("--judge-cascade needs a graded judge with a fitted calibration; this artifact's judge "
                          "writes its labels", field="judge_cascade",
                          hint="compile with --judge-mode graded, or produce with --judge-cascade off")
    if mode == "lossless":
        cascade = JudgeCascade.lossless(calibration)
        if cascade is None:
            logger.warning("judge cascade: this artifact's %s score compares each candidate with the rest of its "
                           "list, so no candidate's label is provably fixed before its grade; every candidate is "
                           "graded (--judge-cascade margin skips some, at a measured cost)", calibration.feature)
        return cascade
    if mode != "margin":
        raise ConfigError(f"unknown judge cascade {mode!r}", field="judge_cascade", hint="off, lossless or margin")
    kept = sample_lists(calibration.samples)
    if grades is None and len(kept) >= MIN_MARGIN_LISTS:
        lists, source = kept, "calibration samples"
    else:
        lists = []
        source = "run store" if grades is None else f"run store {grades.name}"
        if grades is not None or (store is not None and store.is_file()):
            with RunStore.open(grades or store, readonly=True) as run:  # type: ignore[arg-type]
                if grades is not None:  # their spread says nothing of this judge's unless they are its grades
                    run.check_graded_like(program, path=grades, field="cascade_grades", use="--cascade-grades",
                                          hint="give a run store produced with this artifact (or one recalibrated "
                                               "from it)")
                lists = run.graded_lists()
    if source == "calibration samples":
        logger.warning("judge cascade: the margin is learned from the %d queries of the artifact's calibration set, "
                       "whose lists (known positives and random controls beside retrieved candidates) are not "
                       "production's; on SciFact such a margin cost 0.039 binary kappa against people beside the "
                       "same judge without one, two to six times what production lists of its prompt cost "
                       "(docs/judge.md, 'What a margin costs'). --cascade-grades EARLIER_RUN.db teaches it from a "
                       "run store of this artifact", len(lists))
    elif MIN_MARGIN_LISTS <= len(lists) < STEADY_MARGIN_LISTS:
        logger.warning("judge cascade: the margin is learned from %d production lists (%s); on SciFact margins "
                       "from 32 to 324 lists cost 0.006 to 0.018 binary kappa against people beside the same judge "
                       "without one, with intervals down to -0.044, fewer lists costing more (docs/judge.md, 'What "
                       "a margin costs'): measure what this one costs against people before relying on it (syntra "
                       "agreement --cascade-grades)",
                       len(lists), source)
    try:
        cascade = JudgeCascade.margin(calibration, lists, coverage=coverage, learned_from=source)
    except ValueError as exc:
        raise ConfigError(f"--judge-cascade margin: {exc}", field="judge_cascade",
                          hint="produce a first session with --judge-cascade off (its grades teach the margin), or "
                               "give --cascade-grades an earlier run store of this artifact") from None
    # What a coverage buys shows on the lists it came from; a user picks the coverage from this line, then measures.
    logger.info("judge cascade: margin at coverage %.2f from %d lists (%s): the grade's part within [%.2f, %.2f]; "
                "on those lists it would skip %.1f%% of the grading calls", coverage, len(lists), source,
                *cascade.score_range, 100 * cascade.skipped_share(calibration, lists))
    return cascade
