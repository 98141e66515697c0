"""What the human strategy takes from people, as two values: who reviews its attempts (:class:`ReviewSession`) and
which judgments people made calibrate its annotation loop (:class:`HumanLabels`).

Importing this module loads no LM library, so the command line builds them before anything heavy is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syntra_dspy.errors import ConfigError

if TYPE_CHECKING:
    from syntra_dspy.judging.labels import LabelledPair
    from syntra_dspy.optimizers.terminal_review import TerminalReviewer


@dataclass(frozen=True)
class ReviewSession:
    """Who reviews each attempt of the human strategy, and where the decisions are kept.

    * A person at the terminal (``terminal``, default the process's), every decision recorded to ``record``
      (default ``human-feedback-<UTC time>.jsonl`` in the working directory): the default.
    * A recorded session replayed with no person present: ``feedback``.
    * Both ``feedback`` and ``record``: an interrupted session resumed: the file is replayed, the person is asked from
      where it ends, and the whole session is recorded to ``record``.
    * No one (``reviewed=False``): every verifier judgement stands, and the annotation loop is calibrated on people's
      labels alone (:class:`HumanLabels`, then required).

    ``reviewer``: who sits at the terminal, as the manifest names them (default ``$SYNTRA_REVIEWER`` or the login).
    """

    feedback: str | Path | None = None
    record: str | Path | None = None
    terminal: TerminalReviewer | None = None
    reviewer: str | None = None
    reviewed: bool = True

    def __post_init__(self) -> None:
        if not self.reviewed and any(v is not None for v in (self.feedback, self.record, self.terminal,
                                                              self.reviewer)):
            raise ConfigError("a session no one reviews has no feedback file, record file, terminal or reviewer",
                              field="review", hint="drop them, or let a person review (reviewed=True)")

    @property
    def replaying(self) -> bool:
        return self.feedback is not None

    @property
    def resuming(self) -> bool:
        return self.feedback is not None and self.record is not None

    @property
    def asks(self) -> bool:
        """Whether a person is asked at the terminal (a live session, or the rest of a resumed one)."""
        return self.reviewed and (self.resuming or not self.replaying)


@dataclass(frozen=True)
class HumanLabels:
    """Judgments people made, the human annotation loop's calibration set: ``pairs`` given in code, or ``file`` read
    (BEIR/TREC qrels, their query texts from the BEIR layout or ``queries``; a ``beir:PATH:split`` spec; or a
    ``query, doc_id, label`` file), up to the compile's ``calibration_queries`` queries (seeded)."""

    pairs: tuple[LabelledPair, ...] = ()
    file: str | Path | None = None
    queries: str | Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pairs", tuple(self.pairs))
        if self.pairs and self.file is not None:
            raise ConfigError("give human-confirmed labels either as pairs or as a file, not both", field="labels")
        if self.queries is not None and self.file is None:
            raise ConfigError("label queries go with a label file", field="labels",
                              hint="give the qrels file as well (--human-labels)")

    @classmethod
    def of(cls, value: HumanLabels | Sequence[LabelledPair] | str | Path | None) -> HumanLabels | None:
        """Labels from what a caller may give: these labels, pairs, or a file (None: no labels)."""
        if value is None or isinstance(value, HumanLabels):
            return value
        if isinstance(value, (str, Path)):
            return cls(file=value)
        return cls(pairs=tuple(value)) if value else None

    def read(self, *, max_queries: int, seed: int) -> tuple[tuple[LabelledPair, ...], dict[str, Any]]:
        """The labelled pairs and the manifest's note on where they came from (with their queries, so a comparison
        keeps them out of its held-out material)."""
        from syntra_dspy.judging.labels import label_source, read_human_labels

        if self.file is None:
            return self.pairs, {"source": "labels given to the strategy", "pairs": len(self.pairs),
                                "queries": sorted({p.query for p in self.pairs})}
        pairs = read_human_labels(self.file, queries=self.queries, max_queries=max_queries, seed=seed)
        return pairs, label_source(self.file, pairs)


__all__ = ["HumanLabels", "ReviewSession"]
