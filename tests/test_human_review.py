"""The loop's review hook, label files and the terminal reviewer, without compiling anything."""

from __future__ import annotations

import io

import pytest

from syntra_dspy.errors import InputError
from syntra_dspy.judging.labels import LabelledPair, labels_text, parse_labels_text, read_label_file
from syntra_dspy.optimizers.annotation_check import CalibrationTrial, calibration_check
from syntra_dspy.optimizers.human import parse_task_definition_text
from syntra_dspy.optimizers.loop import LoopLimits, LoopSteps, RefinementLoop, Review
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.terminal_review import TerminalReviewer


def make_loop(review, *, max_attempts=3, scores=(0, 0, 0)):
    seen = []

    def generate(instr):
        seen.append(instr)
        return f"out({instr})"

    def evaluate(instr, outputs):
        score = scores[len(seen) - 1]
        return Evaluation(score, score >= 2, f"verifier {len(seen)}")

    loop = RefinementLoop("demo", LoopSteps(generate, evaluate, lambda i, o, ev: f"{i}+r"),
                          limits=LoopLimits(max_attempts, threshold=2), review=review)
    return loop, seen


def test_no_review_hook_leaves_the_loop_unchanged():
    loop, seen = make_loop(lambda request: None)
    artifact, _, report = loop.run("i0")
    assert seen == ["i0", "i0+r", "i0+r+r"] and artifact == "i0+r+r" and report.stop_reason == "attempt_limit"


def test_an_edit_replaces_the_refinement_and_is_tried_next():
    def review(request):
        if request.attempt == 1:
            return Review(request.evaluation, replacement="edited")
        return None

    loop, seen = make_loop(review, scores=(0, 3, 0))
    artifact, outputs, report = loop.run("i0")
    assert seen == ["i0", "edited"] and artifact == "edited" and outputs == "out(edited)"
    assert report.stop_reason == "passed" and report.kept == 2


def test_an_edit_after_the_last_attempt_is_kept_untried():
    def review(request):
        return Review(request.evaluation, replacement="final edit") if request.last else None

    loop, seen = make_loop(review, max_attempts=2)
    artifact, _, report = loop.run("i0")
    assert seen == ["i0", "i0+r"] and artifact == "final edit"
    assert report.kept == 3 and report.attempts[-1].score is None and report.attempts[-1].instruction == "final edit"
    assert report.stop_reason == "attempt_limit" and not report.passed


def test_a_review_can_pass_a_failing_attempt_or_fail_a_passing_one():
    loop, seen = make_loop(lambda r: Review(Evaluation(r.evaluation.score, True, "person: fine")))
    _, _, report = loop.run("i0")
    assert seen == ["i0"] and report.passed and report.attempts[0].feedback == "person: fine"
    loop, seen = make_loop(lambda r: Review(Evaluation(r.evaluation.score, False, "person: not yet")),
                           scores=(3, 3, 3))
    _, _, report = loop.run("i0")
    assert len(seen) == 3 and not report.passed


def test_a_review_cannot_pass_and_edit_at_once():
    loop, _ = make_loop(lambda r: Review(Evaluation(3, True), replacement="x"))
    with pytest.raises(ValueError, match="cannot pass an attempt and also replace"):
        loop.run("i0")


# -- label files ---------------------------------------------------------------------------------------
def test_label_files_in_every_format_give_the_same_pairs(tmp_path):
    tsv = tmp_path / "l.tsv"
    tsv.write_text("query\tdoc_id\tlabel\nq one\td1\t3\nq one\td2\thard negative\nq two\td3\t0\n")
    csv = tmp_path / "l.csv"
    csv.write_text('"q one",d1,positive\n"q one",d2,1\nq two,d3,easy_negative\n')
    jsonl = tmp_path / "l.jsonl"
    jsonl.write_text('{"query": "q one", "doc_id": "d1", "label": 2}\n{"query": "q one", "doc_id": "d2", '
                     '"label": "hard"}\n{"query": "q two", "doc_id": "d3", "label": "0"}\n')
    expected = (LabelledPair("q one", "d1", "positive"), LabelledPair("q one", "d2", "hard_negative"),
                LabelledPair("q two", "d3", "easy_negative"))
    assert read_label_file(tsv) == read_label_file(csv) == read_label_file(jsonl) == expected
    assert parse_labels_text(labels_text(expected)) == expected


def test_a_bad_label_names_the_line_and_what_is_accepted(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("q\td1\t3\nq\td2\tmaybe\n")
    with pytest.raises(InputError, match=r"bad.tsv:2 field 'label': label 'maybe' is neither a 0-3 score"):
        read_label_file(bad)
    with pytest.raises(InputError, match="label file not found"):
        read_label_file(tmp_path / "missing.tsv")


def test_calibration_check_compares_three_classes_exactly():
    pairs = [LabelledPair("q", "d1", "positive", "t1"), LabelledPair("q", "d2", "hard_negative", "t2"),
             LabelledPair("q", "d3", "easy_negative", "t3")]
    ok = calibration_check([CalibrationTrial("q", pairs, [3, 1, 0])])
    assert ok.passed and ok.score == 1.0
    bad = calibration_check([CalibrationTrial("q", pairs, [2, 0, None])], explain=lambda text: "EXPLAINED\n" + text)
    assert not bad.passed and bad.score == pytest.approx(1 / 3) and bad.details["mismatches"] == 2
    assert "Confirmed label: hard_negative; label given: 0 (easy_negative)" in bad.feedback
    assert "no label (the annotator's answer was unusable)" in bad.feedback


# -- the terminal ------------------------------------------------------------------------------------------
def test_terminal_reviewer_reads_multiline_feedback_and_rejects_empty_edits():
    typed = "e\n.\nr\nfirst line\nsecond line\n.\n"
    out = io.StringIO()
    action, text = TerminalReviewer(io.StringIO(typed), out).decide("SHOWN", current="old")
    assert (action, text) == ("replace_feedback", "first line\nsecond line")
    assert "SHOWN" in out.getvalue() and "Nothing changed; choose again." in out.getvalue()


def test_an_edited_task_definition_is_parsed_and_checked():
    text = "query_type: claim\ndoc_type: abstract\nrelevance_definition: supports or refutes it\n"
    definition = parse_task_definition_text(text)
    assert definition.doc_type == "abstract" and definition.query_language == "en"
    with pytest.raises(ValueError, match="needs 'query_type:'"):
        parse_task_definition_text("doc_type: abstract")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_edit_opens_the_editor_on_a_terminal(tmp_path):
    import shlex
    import sys

    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\nold = open(p).read()\nopen(p, 'w').write(old + ' (edited)')\n")
    reviewer = TerminalReviewer(_Tty("e\n"), _Tty(), editor=f"{shlex.quote(sys.executable)} {shlex.quote(str(editor))}")
    assert reviewer.decide("SHOWN", current="the instruction") == ("edit_instruction", "the instruction (edited)")
