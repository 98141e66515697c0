"""A comparison's settings, defined and validated here: :class:`CompareConfig`, with the held-out material it draws
(:class:`HeldoutOptions`) and the optional downstream check (:class:`DownstreamOptions`).

``syntra compare`` builds them from its flags, whose defaults and help come from these fields; Python callers build
them, or pass :class:`CompareConfig`'s fields to :func:`~syntra_dspy.comparison.compare_strategies` as keywords.
Importing this module loads no LM library, so ``syntra compare --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.settings_model import SettingsModel

UnjudgedPolicy = Literal["hard_negative", "easy_negative", "exclude"]


def parse_strategies(text: str | Sequence[str]) -> list[str]:
    """Rows from ``none,self-improve`` or a sequence: a strategy name, or ``LABEL=STRATEGY`` for a second row of one
    strategy under its own label (e.g. ``developer=human``: a recorded terminal session beside the ``human`` row). An
    unknown strategy, a repeated label or a label that names another strategy is refused."""
    from syntra_dspy.optimizers import STRATEGIES

    names = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    rows = [row_of(name) for name in names]
    unknown = [strategy for _, strategy in rows if strategy not in STRATEGIES]
    if unknown or not names:
        raise ConfigError(f"unknown strategy {', '.join(unknown) or '(none given)'}", field="strategies",
                          hint=f"choose from {', '.join(sorted(STRATEGIES))}, comma-separated (LABEL=STRATEGY for a "
                               "second row of one strategy)")
    labels = [label for label, _ in rows]
    if len(set(labels)) != len(labels):
        raise ConfigError("a strategy is listed twice", field="strategies",
                          hint="give the second row a label of its own: LABEL=STRATEGY")
    misnamed = [label for label, strategy in rows if label in STRATEGIES and label != strategy]
    if misnamed:
        raise ConfigError(f"the label {misnamed[0]!r} names another strategy", field="strategies")
    return names


def row_of(entry: str) -> tuple[str, str]:
    """``(label, strategy)`` of one ``--strategies`` entry (``none`` or ``developer=human``)."""
    label, sep, strategy = entry.partition("=")
    return (label.strip(), strategy.strip()) if sep else (entry.strip(), entry.strip())


class HeldoutOptions(SettingsModel):
    """How much held-out material to draw. ``seed=None`` uses the compile seed."""

    what: ClassVar[str] = "held-out"
    command: ClassVar[str] = "syntra compare"

    docs: int = Field(5, ge=1, strict=True, description="fresh documents to score extraction and queries on")
    qrels: str | Path | None = Field(None, description=(
        "reference labels: BEIR/TREC qrels (queries from the BEIR layout or --heldout-queries), a beir:PATH:split "
        "spec, or a 'query, doc_id, label' file"))
    queries: str | Path | None = Field(None, description="queries for --heldout-qrels (queries.jsonl or topics TSV)")
    max_queries: int = Field(20, ge=1, strict=True, description="held-out queries whose pairs are labelled")
    unjudged_k: int = Field(5, ge=0, strict=True, description="retrieved unjudged candidates per held-out query")
    random_negatives: int = Field(2, ge=0, strict=True, description="random documents per held-out query")
    max_judged: int = Field(5, ge=0, strict=True, description="judged documents per held-out query")
    unjudged: UnjudgedPolicy = Field("hard_negative", description=(
        "reference class of retrieved unjudged candidates (default hard_negative; binary: always not relevant)"))
    seed: int | None = Field(None, strict=True, description="seed of the held-out draw (default: the compile seed)")


class DownstreamOptions(SettingsModel):
    """What the downstream check uses. ``train`` is a ``TrainConfig`` (None: the paper's recipe)."""

    what: ClassVar[str] = "downstream"
    command: ClassVar[str] = "syntra compare"

    dataset: str = Field(description="evaluation dataset: beir:PATH[:split] or neuclirtech:PATH[:eng|zho]")
    base: str = Field("all-MiniLM-L6-v2", description=(
        "the embedding model --downstream fine-tunes (default all-MiniLM-L6-v2; --encoder is the one that retrieves "
        "while compiling)"))
    docs: int = Field(50, ge=1, strict=True, description="documents each strategy produces from")
    queries_per_doc: int = Field(2, ge=1, strict=True, description="queries per document")
    concurrency: int | None = Field(None, ge=1, strict=True, description=(
        "LM calls in flight while producing (default: what the generator's engine serves, as in syntra produce)"))
    measure: str = Field("nDCG@10", description=(
        "ir_measures measure that ranks the strategies when --downstream runs (default nDCG@10; e.g. nDCG@20)"))
    train: Any = Field(None, description="training settings, a TrainConfig (None: the paper's recipe)")
    records: int | None = Field(None, ge=1, strict=True, description=(
        "training records per strategy: each trains on the first N of its export, and when one yields fewer every "
        "one is cut to that count, so all train on as many (None: all each produced)"))
    baseline: bool = Field(True, description="also evaluate the untrained base model")

    def produce_config(self) -> Any:
        """The production settings of every strategy's run (a ``ProduceConfig``)."""
        from syntra_dspy.production import ProduceConfig

        return ProduceConfig(docs=self.docs, queries_per_doc=self.queries_per_doc, concurrency=self.concurrency,
                             progress=False)


class CompareConfig(SettingsModel):
    """How a comparison compiles and scores: the strategies, the compile settings and LM flags they share, the
    held-out material, the downstream check and the chart."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    what: ClassVar[str] = "comparison"
    command: ClassVar[str] = "syntra compare"

    strategies: tuple[str, ...] = Field(("none", "self-improve"), description=(
        "comma-separated strategies: none, self-improve, human, gepa; LABEL=STRATEGY adds a row of its own, e.g. "
        "developer=human (default: none,self-improve)"))
    reference: str | None = Field(None, description=(
        "the row every other one is compared with (paired bootstrap over claims; default: human when compared, else "
        "self-improve, else the first)"))
    settings: CompileSettings = Field(default_factory=CompileSettings, description=(
        "the test-mode settings every strategy compiles with"))
    lm_overrides: dict[str, str | list[str]] | None = Field(None, description=(
        "LM roles replacing the task file's, by role (generator, verifier, refiner)"))
    lm_timeout: float | None = Field(None, description="total seconds one request to a served LM may take")
    index_dir: str | Path | None = Field(None, description="where to cache the corpus index")
    heldout: HeldoutOptions = Field(default_factory=HeldoutOptions, description="the held-out material to draw")
    downstream: DownstreamOptions | None = Field(None, description=(
        "produce → train → eval per strategy (None: no downstream check)"))
    chart: bool = Field(True, description="draw comparison.png")
    resume: bool = Field(True, strict=True, description=(
        "take the rows an earlier run with the same inputs compiled or scored (recorded under OUT/rows/) instead "
        "of redoing them; False: make every row again"))
    compile_only: bool = Field(False, strict=True, description=(
        "compile the rows (recorded under OUT/rows/) and stop before the held-out material is drawn: a long "
        "comparison made in parts, its scoring run once every row is compiled"))

    @field_validator("strategies", mode="before")
    @classmethod
    def _strategies(cls, value: Any) -> tuple[str, ...]:
        return tuple(parse_strategies(value))

    def rows(self) -> list[tuple[str, str]]:
        """``(label, strategy)`` of every row, in the order given."""
        return [row_of(entry) for entry in self.strategies]

    def reference_row(self) -> str:
        """The label every other row is compared with."""
        labels = [label for label, _ in self.rows()]
        if self.reference is not None:
            if self.reference not in labels:
                raise ConfigError(f"the reference {self.reference!r} is not one of the rows ({', '.join(labels)})",
                                  field="reference")
            return self.reference
        return next((name for name in ("human", "self-improve") if name in labels), labels[0])

    @field_validator("settings", "heldout", mode="before")
    @classmethod
    def _default_when_none(cls, value: Any, info: Any) -> Any:
        """None means the defaults, as it always has for these two."""
        if value is None:
            return CompileSettings() if info.field_name == "settings" else HeldoutOptions()
        return value
