"""Human calibration: a person judges every test-mode attempt; every input is recorded and can be replayed.

This is the paper's human-calibration condition as a strategy. The loops run exactly as in self-improvement,
but after each evaluation a person sees the instruction, its trial outputs and the verifier's judgement, and
decides: accept the judgement, pass the attempt, replace or add to the feedback the refiner receives, or edit
the instruction directly. Before the annotation loop they may supply human-confirmed labels as its
calibration set. Each input becomes one JSONL event (loop, attempt, action, text, and the sha256 of what
was shown); ``ReviewSession(feedback=FILE)`` replays such a file with no person present, refusing a file that does
not match the session being replayed. Same file, same task and settings, same LMs: the same artifact. People's
judgments (qrels or a label file, :class:`HumanLabels`) may calibrate the annotation loop instead of, or besides,
labels given at the terminal; with ``ReviewSession(reviewed=False)`` they are the only human input.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from syntra_dspy.jsonl import json_objects
from syntra_dspy.outputs import shown_path
from syntra_dspy.errors import ConfigError, InputError, SyntraError
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.judging.labels import LabelledPair, labels_text, parse_labels_text, with_texts
from syntra_dspy.optimizers.human_inputs import HumanLabels, ReviewSession
from syntra_dspy.optimizers.loop import Review, ReviewRequest
from syntra_dspy.optimizers.drive import refine_until_pass
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.report import CompileReport, Evaluation, LoopReport
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.stages import Stage, TrialMaterial, build_stages, given_labels
from syntra_dspy.optimizers.strategy import Strategy
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.optimizers.terminal_review import TerminalReviewer, labels_prompt_text, render_request
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.task import TaskDefinition

logger = logging.getLogger(__name__)

Action = Literal["accept", "pass", "replace_feedback", "add_feedback", "edit_instruction", "labels"]
ACTIONS: tuple[str, ...] = ("accept", "pass", "replace_feedback", "add_feedback", "edit_instruction", "labels")
_KEYS = ("loop", "attempt", "action", "text", "shown_sha256")


class FeedbackMismatchError(ConfigError):
    """A recorded feedback file does not fit the session being replayed."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FeedbackEvent:
    """One human input. ``attempt`` is 0 for the calibration-set question asked before a loop starts."""

    seq: int
    loop: str
    attempt: int
    action: Action
    text: str
    shown_sha256: str
    time: str = ""
    by: str = ""  # who sat at the terminal (recorded, not part of the decision)

    def decision(self) -> dict[str, Any]:
        """The part that determines the compiled artifact (no sequence number, no clock time)."""
        return {k: getattr(self, k) for k in _KEYS}


def read_feedback(path: str | Path) -> list[FeedbackEvent]:
    """Read a feedback file; a malformed line raises ``InputError`` naming the line and the field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("human feedback file not found", path=path,
                         hint="record one with --strategy human (no --human-feedback), then replay it")
    events: list[FeedbackEvent] = []
    for n, obj in json_objects(path.read_text(encoding="utf-8").splitlines(), source=path):
        missing = [k for k in _KEYS if k not in obj]
        if missing:
            raise InputError(f"a feedback event needs {', '.join(missing)}", path=path, line=n)
        if obj["action"] not in ACTIONS:
            raise InputError(f"unknown action {obj['action']!r}; one of {', '.join(ACTIONS)}", path=path, line=n,
                             field="action")
        if not isinstance(obj["attempt"], int) or not isinstance(obj["text"], str):
            raise InputError("attempt must be an integer and text a string", path=path, line=n)
        events.append(FeedbackEvent(n, obj["loop"], obj["attempt"], obj["action"], obj["text"],
                                    obj["shown_sha256"], obj.get("time", ""), obj.get("by", "")))
    return events


def decisions_digest(events: Sequence[FeedbackEvent]) -> str:
    """sha256 of the decisions alone: a recorded session and its replay give the same digest."""
    payload = json.dumps([e.decision() for e in events], sort_keys=True, ensure_ascii=False)
    return sha256_text(payload)


def default_reviewer() -> str:
    """Who sits at the terminal: $SYNTRA_REVIEWER, else the login name."""
    import getpass

    try:
        return os.environ.get("SYNTRA_REVIEWER") or getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        return "unknown"


def default_feedback_path() -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(f"human-feedback-{stamp}.jsonl")


class FeedbackRecorder:
    """Appends events to a new JSONL file, flushed one by one so an interrupted session keeps its record."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._opened = False

    def write(self, event: FeedbackEvent) -> None:
        if not self._opened:
            if self.path.exists():
                raise ConfigError("the human feedback file already exists", path=self.path,
                                  hint="choose a new file to record to, or replay this one with --human-feedback")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._opened = True
        row = {**event.decision(), "time": event.time, **({"by": event.by} if event.by else {})}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def parse_task_definition_text(text: str) -> TaskDefinition:
    """``key: value`` lines (as shown in the terminal) → a TaskDefinition; ValueError says what is wrong."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in TaskDefinition.model_fields:
            values[key.strip()] = value.strip()
    try:
        return TaskDefinition(**values)
    except ValidationError as exc:
        raise ValueError("an edited task definition needs 'query_type:', 'doc_type:' and 'relevance_definition:' "
                         f"lines ({str(exc).splitlines()[0]})") from None


class HumanCalibration(Strategy):
    """Self-improvement's loops with a person (or a replay of one) reviewing every attempt, and people's labels, when
    given, as the annotation loop's calibration set.

    ``review`` (a :class:`ReviewSession`) says who reviews: by default a ``TerminalReviewer`` asks on the terminal
    and every input is recorded (to ``human-feedback-<UTC time>.jsonl`` in the working directory unless told); a
    recorded file can be replayed, or replayed and resumed; or no one reviews and people's ``labels`` (a
    :class:`HumanLabels`, or labelled pairs) alone calibrate the annotation loop.
    """

    strategy = "human"
    live_progress = False  # the terminal is the reviewer's

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: Any = None, review: ReviewSession | None = None,
                 labels: HumanLabels | Sequence[LabelledPair] | None = None,
                 metrics: Mapping[str, StageMetric] | None = None) -> None:
        settings = settings or CompileSettings()
        review = review or ReviewSession()
        given = HumanLabels.of(labels)
        if not review.reviewed and given is None:
            raise ConfigError("with no one reviewing, the human strategy calibrates on people's labels, and none "
                              "were given", field="labels", hint="give --human-labels FILE (qrels or a label file)")
        self.label_source: dict[str, Any] | None = None
        calibration: tuple[LabelledPair, ...] = ()
        if given is not None:
            calibration, self.label_source = given.read(max_queries=settings.calibration_queries, seed=settings.seed)
        super().__init__(settings=settings, lms=lms, meter=meter, author=author, metrics=metrics)
        self.calibration = calibration or None
        self.session = review
        self.events: list[FeedbackEvent] = []
        self.replaying, self.resuming = review.replaying, review.resuming
        self.feedback_path = Path(review.feedback) if review.feedback is not None else \
            Path(review.record or default_feedback_path())
        self._pending = read_feedback(self.feedback_path) if self.replaying else []
        self._terminal = (review.terminal or TerminalReviewer()) if review.asks else None
        self._recorder = FeedbackRecorder(review.record or self.feedback_path) if review.asks else None
        self.reviewer = review.reviewer or (default_reviewer() if review.asks else "")

    # -- the strategy ----------------------------------------------------------------------------------------
    def run(self, student: SynthesisProgram, *, trainset: Sequence[Any], documents: Sequence[tr.TrialDocument],
            candidates: tr.CandidateSource | None) -> tuple[SynthesisProgram, CompileReport]:
        if self._recorder is not None:
            self._terminal.say(f"Human calibration: your decisions are recorded to {self._recorder.path}")
        program, report = super().run(student, trainset=trainset, documents=documents, candidates=candidates)
        if self._pending:
            nxt = self._pending[0]
            raise FeedbackMismatchError(
                f"the session ended but the file has {len(self._pending)} more event(s), the next for "
                f"{nxt.loop} attempt {nxt.attempt}: it was recorded for a different session",
                path=self.feedback_path, line=nxt.seq, hint=_REPLAY_HINT)
        return program, report

    def stages(self, tools: StageTools, material: TrialMaterial, *, infer_definition: bool) -> list[Stage]:
        labels = given_labels(self.calibration) if self.calibration else self._asked_labels
        return build_stages(tools, material, infer_definition=infer_definition, judge=self.settings.judge,
                            metrics=self.metrics, labels=labels)

    def drive(self, stage: Stage, program: SynthesisProgram) -> tuple[SynthesisProgram, LoopReport]:
        return refine_until_pass(stage, program, review=self._review if self.session.reviewed else None)

    def get_params(self) -> dict[str, Any]:
        unreviewed = {} if self.session.reviewed else {"reviewed": False}
        return {**super().get_params(),
                "human_feedback": {"events": len(self.events), "decisions_sha256": decisions_digest(self.events),
                                   **unreviewed},
                "human_decisions": {"labels": self.label_source or {"source": "none (few-shot positive check)"}}}

    def compile_record(self) -> dict[str, Any]:
        return {"reviews": self.review_source()}

    def review_source(self) -> dict[str, str]:
        """Where the review decisions came from: a person at this terminal, or a recording of one (and who), or no
        one."""
        if not self.session.reviewed:
            return {"source": "no review: every verifier judgement stands", "file": "", "reviewer": ""}
        recorded = next((e.by for e in self.events if e.by), "") or self.reviewer or "not recorded"
        if self._recorder is None:
            return {"source": "replayed terminal session", "file": shown_path(self.feedback_path), "reviewer": recorded}
        source = "recorded terminal session" + (f" (resuming {shown_path(self.feedback_path)})" if self.resuming
                                                else "")
        return {"source": source, "file": shown_path(self._recorder.path), "reviewer": recorded}

    # -- asking (or replaying) -----------------------------------------------------------------------------------
    def _replayed(self, loop: str, attempt: int, kind: str, shown: str) -> FeedbackEvent | None:
        """The recorded event for this question (checked against what is shown), or None to ask the person."""
        if not self.replaying or (self.resuming and not self._pending):
            return None
        where = f"{loop} attempt {attempt}" if attempt else f"{loop} (calibration set)"
        if not self._pending:
            raise FeedbackMismatchError(f"the file ends after {len(self.events)} event(s), but the session asks "
                                        f"about {where}", path=self.feedback_path,
                                        hint="if the session was interrupted, resume it: replay this file and "
                                             "record to a new one (--human-feedback FILE --record-feedback NEW)")
        event = self._pending[0]
        if (event.loop, event.attempt, event.action == "labels") != (loop, attempt, kind == "labels"):
            recorded = f"{event.loop} attempt {event.attempt} ({event.action})"
            raise FeedbackMismatchError(f"the event was recorded for {recorded}, but the session asks about {where}",
                                        path=self.feedback_path, line=event.seq, hint=_REPLAY_HINT)
        if event.shown_sha256 != sha256_text(shown):
            raise FeedbackMismatchError(
                f"what the session shows for {where} differs from what the person judged (sha256 "
                f"{sha256_text(shown)[:12]} now, {event.shown_sha256[:12]} recorded): the task, settings, LMs or "
                "code changed since the recording", path=self.feedback_path, line=event.seq, hint=_REPLAY_HINT)
        event = self._pending.pop(0)
        if self._recorder is not None:
            self._recorder.write(event)
        return event

    def _record(self, loop: str, attempt: int, action: str, text: str, shown: str) -> FeedbackEvent:
        event = FeedbackEvent(len(self.events) + 1, loop, attempt, action,  # type: ignore[arg-type]
                              text, sha256_text(shown), datetime.now(UTC).isoformat(timespec="seconds"), self.reviewer)
        self._recorder.write(event)
        return event

    def _review(self, request: ReviewRequest) -> Review:
        shown = render_request(request)
        event = self._replayed(request.loop, request.attempt, "decision", shown)
        if event is not None:
            replacement = self._parse_edit(request.loop, event.text) if event.action == "edit_instruction" else None
        else:
            what = "task definition" if request.loop == "task_definition" else "instruction"
            while True:
                action, text = self._terminal.decide(shown, current=request.text, what=what)
                try:
                    replacement = self._parse_edit(request.loop, text) if action == "edit_instruction" else None
                    break
                except ValueError as exc:
                    self._terminal.say(f"Cannot use that edit: {exc}")
            event = self._record(request.loop, request.attempt, action, text, shown)
        self.events.append(event)
        return _apply(event, request.evaluation, replacement)

    def _parse_edit(self, loop: str, text: str) -> Any:
        if not text.strip():
            raise ValueError("the edited text is empty")
        return parse_task_definition_text(text) if loop == "task_definition" else text.strip()

    def _asked_labels(self, instruction: str, corpus: Any) -> tuple[LabelledPair, ...] | None:
        """The annotation stage's label source when none were given: the person is asked (or the answer replayed)."""
        loop = "annotation_instruction"
        shown = labels_prompt_text(loop, instruction)
        event = self._replayed(loop, 0, "labels", shown)
        if event is not None:
            source = f"{self.feedback_path} line {event.seq}"
            pairs = with_texts(parse_labels_text(event.text, source=source), corpus, source) if event.text else None
        else:
            while True:
                pairs = self._terminal.calibration_labels(shown)
                try:
                    pairs = with_texts(pairs, corpus) if pairs else None
                    break
                except SyntraError as exc:
                    self._terminal.say(f"Cannot use those labels: {exc}")
            event = self._record(loop, 0, "labels", labels_text(pairs) if pairs else "", shown)
        self.events.append(event)
        if pairs:
            self.label_source = {"source": "label file given in the terminal session", "pairs": len(pairs),
                                 "queries": sorted({p.query for p in pairs})}
        return pairs


_REPLAY_HINT = ("replay a feedback file only with the task, settings and LMs it was recorded with, or record a "
                "new session with --strategy human and no --human-feedback")


def _apply(event: FeedbackEvent, ev: Evaluation, replacement: Any) -> Review:
    """Turn one recorded decision into the evaluation the loop acts on (the verifier's is kept in details)."""
    verifier = {"score": ev.score, "passed": ev.passed, "feedback": ev.feedback}
    details = {**ev.details, "review": {"action": event.action, "text": event.text, "verifier": verifier}}
    if event.action == "accept":
        return Review(Evaluation(ev.score, ev.passed, ev.feedback, details))
    if event.action == "pass":
        return Review(Evaluation(ev.score, True, ev.feedback, details))
    if event.action == "replace_feedback":
        return Review(Evaluation(ev.score, False, event.text, details))
    if event.action == "add_feedback":
        feedback = f"{ev.feedback.strip()}\n\nReviewer: {event.text}".strip()
        return Review(Evaluation(ev.score, False, feedback, details))
    if event.action == "edit_instruction":
        return Review(Evaluation(ev.score, False, ev.feedback, details), replacement=replacement)
    raise FeedbackMismatchError(f"a '{event.action}' event cannot answer a review of {event.loop} attempt "
                                f"{event.attempt}", line=event.seq, hint=_REPLAY_HINT)


__all__ = ["ACTIONS", "FeedbackEvent", "FeedbackMismatchError", "FeedbackRecorder", "HumanCalibration", "HumanLabels",
           "ReviewSession", "decisions_digest", "parse_task_definition_text", "read_feedback"]
