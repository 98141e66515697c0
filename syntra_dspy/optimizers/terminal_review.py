"""What a person calibrating instructions sees in the terminal, and how their decision is read.

Rendering is deterministic (no timings, no usage): the text shown is hashed into the feedback file, so a
replay can tell whether it is showing the same trial outputs the person judged.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any, TextIO

from syntra_dspy.errors import SyntraError
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.judging.labels import LabelledPair, read_label_file
from syntra_dspy.optimizers.annotation_check import CalibrationTrial
from syntra_dspy.optimizers.loop import ReviewRequest
from syntra_dspy.programs import context as ctx
from syntra_dspy.judging.grading import Grade
from syntra_dspy.signatures.types import label_class

RULE = "=" * 78
_CHOICES = {
    "": "accept", "y": "accept", "accept": "accept",
    "p": "pass", "pass": "pass",
    "r": "replace_feedback", "replace": "replace_feedback",
    "a": "add_feedback", "add": "add_feedback",
    "e": "edit_instruction", "edit": "edit_instruction",
}
MENU = (
    "  [Enter] accept the verifier's judgement as it stands\n"
    "  p  pass: keep this {what} and end the loop\n"
    "  r  replace the verifier's feedback with yours (the {what} is then revised with it)\n"
    "  a  add your feedback to the verifier's\n"
    "  e  edit the {what} yourself{edit_note}"
)


class ReviewInputEnded(SyntraError):
    """The terminal input ended while a decision was awaited."""


# -- rendering ---------------------------------------------------------------------------------------------
def _render_queries(trials: Sequence[tr.QueryTrial], max_doc_chars: int) -> str:
    blocks = []
    for n, trial in enumerate(trials, 1):
        lines = [f"### Document {n} ({trial.doc.doc_id}): {ctx.clip(trial.doc.content, max_doc_chars)}"]
        lines += [f"  - {q}" for q in trial.queries] or [f"  (no queries: {trial.error or 'nothing written'})"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _render_labels(trials: Sequence[tr.LabelTrial]) -> str:
    blocks = []
    for n, trial in enumerate(trials, 1):
        rows = []
        for i, (doc_id, score) in enumerate(zip(trial.candidate_ids, trial.scores)):
            mark = "  <- the example's known positive" if i == trial.positive_index else ""
            shown = "-" if score is None else f"{score} {label_class(score)}"
            rows.append(f"  {doc_id}: {shown}{mark}")
        blocks.append(f"### Example {n}: {trial.example.query}\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def _render_calibration(trials: Sequence[CalibrationTrial]) -> str:
    blocks = []
    for trial in trials:
        rows = []
        for pair, score in zip(trial.pairs, trial.scores):
            given = "-" if score is None else f"{score} {label_class(score)}"
            ok = "ok" if score is not None and label_class(score) == pair.label else "MISMATCH"
            rows.append(f"  {pair.doc_id}: confirmed {pair.label}; given {given} [{ok}]")
        blocks.append(f"### Query: {trial.query}\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def render_outputs(outputs: Any, max_doc_chars: int = 400) -> str:
    """Trial outputs of any test-mode loop as plain text."""
    if outputs is None:
        return "(the task definition is judged against the few-shot examples directly)"
    items = list(outputs)
    if not items:
        return "(no trial outputs)"
    first = items[0]
    if isinstance(first, tr.FeatureTrial):
        return tr.features_samples(items, with_documents=True, max_doc_chars=max_doc_chars)
    if isinstance(first, tr.QueryTrial):
        return _render_queries(items, max_doc_chars)
    if isinstance(first, tr.LabelTrial):
        return _render_labels(items)
    if isinstance(first, CalibrationTrial):
        return _render_calibration(items)
    if isinstance(first, Grade) or first is None:
        graded = [g for g in items if g is not None]
        bins = [sum(lo <= (g.expected or 0) < lo + 1 for g in graded) for lo in (0, 1, 2)]
        bins[2] += sum((g.expected or 0) >= 3 for g in graded)
        return (f"{len(graded)} of {len(items)} calibration candidates graded; mean label E in [0,1): {bins[0]}, "
                f"[1,2): {bins[1]}, [2,3]: {bins[2]} (agreement with the reference classes is in the judgement below)")
    return "\n".join(str(item) for item in items)


def render_request(request: ReviewRequest) -> str:
    """Everything a reviewer sees for one attempt: the instruction, its trial outputs and the judgement."""
    ev = request.evaluation
    score = "-" if ev.score is None else f"{ev.score:g}"
    return "\n".join([
        RULE,
        f"{request.loop} · attempt {request.attempt} of {request.max_attempts}",
        RULE,
        "--- Current " + ("task definition" if request.loop == "task_definition" else "instruction") + " ---",
        request.text.strip() or "(empty)",
        "--- Trial outputs ---",
        render_outputs(request.outputs),
        "--- Verifier ---",
        f"score: {score}   verdict: {'PASS' if ev.passed else 'FAIL'}",
        "feedback: " + (ev.feedback.strip() or "(none)"),
    ])


# -- reading decisions ----------------------------------------------------------------------------------------
class TerminalReviewer:
    """Asks a person for each decision on ``stdin``/``stdout`` (any text streams, so tests can script it).

    Multi-line answers end with a line holding only ``.`` (or end of input). ``edit`` opens ``$EDITOR`` when
    both streams are terminals and ``EDITOR`` (or ``VISUAL``) is set; otherwise the new text is typed in.
    """

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 editor: str | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.editor = editor if editor is not None else (os.environ.get("VISUAL") or os.environ.get("EDITOR"))

    def say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def _line(self, prompt: str) -> str:
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if line == "":
            raise ReviewInputEnded("the terminal input ended while a review decision was awaited",
                                   hint="answer every prompt, or replay a recorded session with --human-feedback")
        return line.rstrip("\r\n")

    def _text(self, prompt: str) -> str:
        self.say(prompt + " (finish with a line holding only '.')")
        lines = []
        while True:
            line = self.stdin.readline()
            if line == "" or line.rstrip("\r\n") == ".":
                break
            lines.append(line.rstrip("\r\n"))
        return "\n".join(lines).strip()

    def _edit(self, current: str) -> str:
        interactive = self.editor and self.stdin.isatty() and self.stdout.isatty()
        if not interactive:
            return self._text("Type the new text (the current one is shown above).")
        with tempfile.NamedTemporaryFile("w+", suffix=".txt", delete=False, encoding="utf-8") as fh:
            fh.write(current)
            path = fh.name
        try:
            subprocess.run([*shlex.split(self.editor), path], check=False)
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip()
        finally:
            os.unlink(path)

    def decide(self, shown: str, *, current: str, what: str = "instruction") -> tuple[str, str]:
        """Show an attempt and return ``(action, text)``; re-asks until the answer is usable."""
        self.say(shown)
        note = " (after the last attempt an edit is kept untried)"
        self.say("Your decision:\n" + MENU.format(what=what, edit_note=note))
        while True:
            action = _CHOICES.get(self._line("> ").strip().lower())
            if action is None:
                self.say("Please answer with Enter, p, r, a or e.")
                continue
            if action in ("accept", "pass"):
                return action, ""
            text = self._edit(current) if action == "edit_instruction" else self._text("Your feedback:")
            if not text or (action == "edit_instruction" and text == current.strip()):
                self.say("Nothing changed; choose again.")
                continue
            return action, text

    def calibration_labels(self, shown: str) -> tuple[LabelledPair, ...] | None:
        """Ask for a file of human-confirmed labels; Enter keeps the few-shot positive check."""
        self.say(shown)
        while True:
            answer = self._line("Label file (query, doc_id, label) to calibrate against, or Enter to skip: ").strip()
            if not answer:
                return None
            try:
                pairs = read_label_file(answer)
            except SyntraError as exc:
                self.say(f"Cannot use that file: {exc}")
                continue
            self.say(f"Read {len(pairs)} confirmed labels.")
            return pairs


def labels_prompt_text(loop: str, instruction: str) -> str:
    """What is shown before the labels question (hashed like any other review)."""
    return "\n".join([
        RULE, f"{loop} · calibration set", RULE,
        "--- Current instruction ---", instruction.strip() or "(empty)",
        "You may supply human-confirmed labels; the annotation instruction is then checked against them",
        "(exact three-class comparison) instead of the few-shot positive check.",
    ])


__all__ = ["ReviewInputEnded", "TerminalReviewer", "labels_prompt_text", "render_outputs", "render_request"]
