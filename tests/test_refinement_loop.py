"""The generate → evaluate → refine loop: stopping, attempt limit, which attempt is kept, history."""

from __future__ import annotations

from syntra_dspy.optimizers.loop import LoopLimits, LoopSteps, RefinementLoop
from syntra_dspy.optimizers.report import Evaluation


def make_loop(scores, *, keep="last", max_attempts=3, threshold=2):
    seen = []

    def generate(instr):
        seen.append(instr)
        return f"out({instr})"

    def evaluate(instr, outputs):
        score = scores[len(seen) - 1]
        return Evaluation(score, score >= threshold, f"feedback {len(seen)}", {"outputs": outputs})

    def refine(instr, outputs, ev):
        return f"{instr}+{ev.feedback.split()[-1]}"

    loop = RefinementLoop("demo", LoopSteps(generate, evaluate, refine),
                          limits=LoopLimits(max_attempts, keep, threshold))
    return loop, seen


def test_stops_at_threshold_and_keeps_passing_attempt():
    loop, seen = make_loop([1, 2, 3])
    artifact, outputs, report = loop.run("i0")
    assert seen == ["i0", "i0+1"]  # the third attempt never ran
    assert artifact == "i0+1" and outputs == "out(i0+1)"
    assert report.stop_reason == "passed" and report.passed and report.kept == 2
    assert [a.score for a in report.attempts] == [1, 2]


def test_runs_out_at_attempt_limit_and_keeps_last_evaluated():
    loop, seen = make_loop([0, 1, 1, 0, 0], max_attempts=3)
    artifact, _, report = loop.run("i0")
    assert len(seen) == 3 and artifact == "i0+1+2"  # no refinement after the last evaluation
    assert report.stop_reason == "attempt_limit" and not report.passed and report.kept == 3


def test_keep_best_returns_highest_scoring_attempt():
    loop, _ = make_loop([0, 1, 0], keep="best")
    artifact, outputs, report = loop.run("i0")
    assert report.kept == 2 and artifact == "i0+1" and outputs == "out(i0+1)"
    assert report.final_instruction == "i0+1"


def test_history_records_every_attempt_with_feedback():
    loop, _ = make_loop([0, 0, 3])
    _, _, report = loop.run("i0")
    assert [a.number for a in report.attempts] == [1, 2, 3]
    assert [a.instruction for a in report.attempts] == ["i0", "i0+1", "i0+1+2"]
    assert [a.feedback for a in report.attempts] == ["feedback 1", "feedback 2", "feedback 3"]
    assert report.to_dict()["attempts"][0]["details"] == {"outputs": "out(i0)"}


def test_single_attempt_loop_never_refines():
    loop, seen = make_loop([0], max_attempts=1)
    _, _, report = loop.run("i0")
    assert seen == ["i0"] and report.kept == 1 and report.stop_reason == "attempt_limit"


def test_unusable_verdicts_and_refinements_fail_the_attempt_not_the_compile():
    from syntra_dspy.errors import LMOutputError

    calls = {"evaluate": 0, "refine": 0}

    def evaluate(instr, outputs):
        calls["evaluate"] += 1
        if calls["evaluate"] == 1:
            raise LMOutputError("garbled JSON", stage="judge")
        return Evaluation(3, True, "")

    def refine(instr, outputs, ev):
        calls["refine"] += 1
        raise LMOutputError("truncated", stage="refine")

    loop = RefinementLoop("demo", LoopSteps(lambda i: i, evaluate, refine), limits=LoopLimits(3, threshold=2))
    artifact, _, report = loop.run("i0")
    first = report.attempts[0]
    assert first.score is None and not first.passed and "garbled JSON" in first.feedback
    assert artifact == "i0" and report.kept == 2 and report.stop_reason == "passed"
    assert calls == {"evaluate": 2, "refine": 1}
