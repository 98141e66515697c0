"""The judge's settings that commands take as flags, without the judge itself: importing them loads no LM library,
so ``syntra compile --help`` and ``syntra agreement --help`` stay fast."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from syntra_dspy.settings_model import SettingsModel

#: The judge a program labels with; one type from ``syntra compile --judge-mode`` (``CompileSettings.judge``) through
#: the strategies and the manifest to production and ``syntra agreement --judge-mode``.
JudgeMode = Literal["graded", "written"]
JUDGE_MODES: tuple[JudgeMode, ...] = ("graded", "written")
#: Which candidates a graded judge may leave unasked (``syntra produce --judge-cascade``;
#: :mod:`syntra_dspy.judging.cascade` says what each skips).
CascadeMode = Literal["off", "lossless", "margin"]
CASCADE_MODES: tuple[CascadeMode, ...] = ("off", "lossless", "margin")
#: Which of the two a graded judge's prompt shows first: the query, so a query's candidates share the evaluated prefix,
#: or the document, so the queries one candidate is graded for share it (the document is most of the prompt). The
#: words are the same, but the model grades otherwise, so an artifact's calibration holds for one order, which it
#: records (``JudgeCalibration.grade_order``; ``syntra artifacts recalibrate --grade-order`` fits one for the other).
GradeOrder = Literal["query-first", "document-first"]
GRADE_ORDERS: tuple[GradeOrder, ...] = ("query-first", "document-first")
#: The order a compile grades in, and so the order of every calibration, artifact and run store that records none
#: (all made before the order could be chosen).
DEFAULT_GRADE_ORDER: GradeOrder = "query-first"


def parse_judge_modes(text: str | None) -> tuple[JudgeMode, ...]:
    """Judge modes from a comma-separated flag value (``graded,written``); empty for None or an empty value."""
    from syntra_dspy.errors import ConfigError

    modes = tuple(m.strip() for m in (text or "").split(",") if m.strip())
    bad = [m for m in modes if m not in JUDGE_MODES]
    if bad:
        raise ConfigError(f"unknown judge mode {bad[0]!r}", field="judge-mode", hint=f"use {' or '.join(JUDGE_MODES)}")
    return modes  # type: ignore[return-value]


class AgreementConfig(SettingsModel):
    """How ``syntra agreement`` samples candidates and which judges label them; every field has its flag."""

    what: ClassVar[str] = "agreement"
    command: ClassVar[str] = "syntra agreement"

    judges: tuple[JudgeMode, ...] = Field(("graded",), min_length=1, description=(
        "judge mode(s) of the first artifact, comma-separated (the command's default: the artifact's own judge)"))
    compare_judges: tuple[JudgeMode, ...] | None = Field(None, min_length=1, description=(
        "judge mode(s) of the other artifacts (default: the same as the first's)"))
    n_queries: int = Field(50, ge=1, strict=True, description="queries to sample")
    top_k: int = Field(10, ge=1, strict=True, description="retrieved candidates per query")
    random_negatives: int = Field(1, ge=0, strict=True, description="random documents per query")
    seed: int = Field(0, strict=True, description="query sampling seed")
    exclude_queries: Path | None = Field(None, description=(
        "queries never to sample besides the task's: a file of query ids (one per line) or a task YAML, e.g. the "
        "queries an earlier measurement used"))
    cascade_grades: Path | None = Field(None, description=(
        "a run store graded with the first artifact's grading prompt (e.g. a first session produced without the "
        "cascade): also label its graded judgments as production's margin cascade learned from that store would "
        "(no extra LM call), reported beside the judge without it, paired"))
    cascade_coverage: float | None = Field(None, gt=0, le=1, allow_inf_nan=False, description=(
        "with --cascade-grades: the margin's coverage, as syntra produce --cascade-coverage (default: produce's)"))
    api_key_env: str | None = Field(None, description="environment variable holding the judge server's key")
    index_dir: Path | None = Field(None, description="where the corpus index is cached")
