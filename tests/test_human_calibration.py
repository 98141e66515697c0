"""Human calibration: every decision changes the loop as promised, is recorded, and replays exactly."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import pytest
from helpers import MINI_TASK, scripted_roles
from test_compare_helpers import TESTS, use_fast_encoder, write_calibration_labels

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.optimizers import CompileSettings, FeedbackMismatchError, ReviewSession, read_feedback
from syntra_dspy.optimizers.terminal_review import ReviewInputEnded, TerminalReviewer
from syntra_dspy.testing import GUIDANCE_MARK, STYLE_MARK

EDITED = "Write each query as a short declarative claim, never a question."
SESSION = [
    "a", "Say that the evidence must support or refute the claim.", ".",  # task_definition 1: add feedback
    "",                                                                   # task_definition 2: accept (passes)
    "x",                                                                  # not a choice: asked again
    "r", "Extract the findings as relationships.", ".",                   # idattr 1: replace feedback
    "",                                                                   # idattr 2: accept (passes)
    "e", EDITED, ".",                                                     # query 1: edit the instruction
    "",                                                                   # query 2: accept (passes)
    "{labels}",                                                           # annotation: calibration labels
    "p",                                                                  # annotation 1: pass it
]


def compile_human(root, monkeypatch, **options):
    """``options``: the review session's fields (feedback, record, terminal, reviewer)."""
    from syntra_dspy.compiler import compile_task

    use_fast_encoder(monkeypatch)
    roles, brain = scripted_roles()
    # the recorded decisions below answer the written judge's annotation loop
    settings = CompileSettings(sample_docs=options.pop("sample_docs", 3), selection_target=20, judge="written")
    artifact = compile_task(MINI_TASK, strategy="human", out=root / "artifacts", lms=roles,
                            index_dir=root / "index", settings=settings,
                            optimizer_kwargs={"review": ReviewSession(**options)})
    return artifact, brain


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One interactive session (scripted terminal input), recorded to a feedback file."""
    root = tmp_path_factory.mktemp("human")
    labels = write_calibration_labels(root / "labels.tsv")
    typed = "\n".join(SESSION).format(labels=labels) + "\n"
    shown = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        artifact, brain = compile_human(root, mp, terminal=TerminalReviewer(io.StringIO(typed), shown),
                                        record=root / "feedback.jsonl")
    labels.unlink()  # a replay must not need the label file: its rows are in the feedback file
    return {"root": root, "artifact": artifact, "brain": brain, "shown": shown.getvalue(),
            "feedback": root / "feedback.jsonl"}


def test_every_decision_is_recorded_with_what_was_shown(recorded):
    events = read_feedback(recorded["feedback"])
    assert [(e.loop, e.attempt, e.action) for e in events] == [
        ("task_definition", 1, "add_feedback"), ("task_definition", 2, "accept"),
        ("idattr", 1, "replace_feedback"), ("idattr", 2, "accept"),
        ("query_instruction", 1, "edit_instruction"), ("query_instruction", 2, "accept"),
        ("annotation_instruction", 0, "labels"), ("annotation_instruction", 1, "pass"),
    ]
    assert all(len(e.shown_sha256) == 64 for e in events)
    assert events[4].text == EDITED
    assert events[6].text.splitlines()[1].endswith("\t18340282\tpositive")
    shown = recorded["shown"]
    assert "task_definition · attempt 1 of 3" in shown and "verdict: FAIL" in shown
    assert "Please answer with Enter, p, r, a or e." in shown
    assert "Read 3 confirmed labels." in shown


def test_decisions_drive_the_loops(recorded):
    artifact = recorded["artifact"]
    history = {h["name"]: h for h in artifact.manifest["history"]}
    td = history["task_definition"]["attempts"]
    assert td[0]["feedback"].startswith("The criterion is too generic.")
    assert "Reviewer: Say that the evidence must support or refute the claim." in td[0]["feedback"]
    assert td[0]["details"]["review"]["verifier"]["feedback"] == "The criterion is too generic."
    idattr = history["idattr"]["attempts"]
    assert idattr[0]["feedback"] == "Extract the findings as relationships."  # the verifier's was replaced
    assert GUIDANCE_MARK in artifact.program.state.idattr_guidance
    query = history["query_instruction"]
    assert query["attempts"][1]["instruction"] == EDITED and query["kept"] == 2  # tried instead of refined
    assert recorded["brain"].calls.get("refine_query", 0) == 0
    assert artifact.program.state.query_instruction == EDITED \
        and STYLE_MARK in artifact.program.write.signature.instructions
    annotation = history["annotation_instruction"]
    assert annotation["stop_reason"] == "passed" and len(annotation["attempts"]) == 1
    first = annotation["attempts"][0]
    assert first["details"]["review"]["action"] == "pass" and first["details"]["review"]["verifier"]["passed"] is False
    assert [row["doc_id"] for row in first["details"]["calibration"]] == ["18340282", "20333864", "30500829"]
    params = artifact.manifest["optimizer"]
    assert params["strategy"] == "human" and params["human_feedback"]["events"] == 8


def test_replay_reproduces_the_artifact_exactly(recorded, tmp_path, monkeypatch):
    replayed, brain = compile_human(tmp_path, monkeypatch, feedback=recorded["feedback"])
    original = recorded["artifact"]
    assert replayed.program_id == original.program_id
    assert (replayed.path / "program.json").read_bytes() == (original.path / "program.json").read_bytes()
    assert load_artifact(replayed.path).program.instructions() == original.program.instructions()
    assert brain.calls == recorded["brain"].calls


def _write_events(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def _events(recorded):
    return [json.loads(line) for line in recorded["feedback"].read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("case, message", [
    ("truncated", r"the file ends after 3 event\(s\), but the session asks about idattr attempt 2"),
    ("extra", r"the session ended but the file has 1 more event"),
    ("reordered", (r"recorded for idattr attempt 1 \(replace_feedback\), but the session asks about "
                   r"task_definition attempt 2")),
    ("tampered", r"differs from what the person judged"),
])
def test_replay_refuses_a_file_that_does_not_match(recorded, tmp_path, monkeypatch, case, message):
    events = _events(recorded)
    if case == "truncated":
        events = events[:3]
    elif case == "extra":
        events.append(dict(events[-1], attempt=2))
    elif case == "reordered":
        events.insert(1, events.pop(2))
    else:
        events[0]["shown_sha256"] = "0" * 64
    bad = _write_events(tmp_path / f"{case}.jsonl", events)
    with pytest.raises(FeedbackMismatchError, match=message) as info:
        compile_human(tmp_path, monkeypatch, feedback=bad)
    fix = "resume it" if case == "truncated" else "replay a feedback file only with the task, settings and LMs"
    assert fix in str(info.value)  # the message says how to fix it


def test_an_interrupted_session_resumes_where_its_file_ends(recorded, tmp_path, monkeypatch):
    partial = _write_events(tmp_path / "partial.jsonl", _events(recorded)[:3])  # stopped after idattr 1
    labels = write_calibration_labels(tmp_path / "labels.tsv")
    typed = "\n".join(["", "e", EDITED, ".", "", str(labels), "p"]) + "\n"
    shown = io.StringIO()
    resumed, _ = compile_human(tmp_path, monkeypatch, feedback=partial, record=tmp_path / "whole.jsonl",
                               terminal=TerminalReviewer(io.StringIO(typed), shown))
    assert resumed.program_id == recorded["artifact"].program_id
    assert "task_definition · attempt" not in shown.getvalue()  # replayed, not asked again
    whole = [e.decision() for e in read_feedback(tmp_path / "whole.jsonl")]
    assert whole == [e.decision() for e in read_feedback(recorded["feedback"])]


def test_replay_with_other_settings_is_refused(recorded, tmp_path, monkeypatch):
    with pytest.raises(FeedbackMismatchError, match="idattr attempt 1 differs from what the person judged"):
        compile_human(tmp_path, monkeypatch, feedback=recorded["feedback"], sample_docs=2)


def test_malformed_feedback_file_names_the_line(tmp_path, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"loop": "idattr", "attempt": 1, "action": "shrug", "text": "", "shown_sha256": "x"}\n')
    with pytest.raises(Exception, match=r"bad.jsonl:1 field 'action': unknown action 'shrug'"):
        compile_human(tmp_path, monkeypatch, feedback=bad)


def test_terminal_input_that_ends_is_an_error_not_a_silent_accept(tmp_path, monkeypatch):
    with pytest.raises(ReviewInputEnded, match="input ended"):
        compile_human(tmp_path, monkeypatch, terminal=TerminalReviewer(io.StringIO(""), io.StringIO()),
                      record=tmp_path / "f.jsonl")


def test_interactive_session_through_the_command_line(tmp_path):
    """A real process: `syntra compare --strategies human` reading decisions from its stdin."""
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        import syntra_dspy.compiler as compiler
        from test_compare_helpers import FastEncoder
        compiler.load_encoder = lambda *a, **k: FastEncoder()
        from helpers import scripted_roles
        from syntra_dspy.lm.roles import LMRoles
        roles, _ = scripted_roles()
        LMRoles.from_spec = classmethod(lambda cls, *a, **k: roles)
        from syntra_dspy.cli import main
        sys.exit(main(["compare", {str(MINI_TASK)!r}, "--strategies", "human", "--out", {str(tmp_path / 'cmp')!r},
                       "--record-feedback", {str(tmp_path / 'fb.jsonl')!r}, "--index-dir", {str(tmp_path / 'idx')!r},
                       "--sample-docs", "3", "--selection-target", "20", "--heldout-docs", "2", "--no-chart"]))
    """), encoding="utf-8")
    typed = "\n\np\n\n\n\np\n"  # accept, accept, pass, accept, accept, no labels, pass
    done = subprocess.run([sys.executable, str(driver)], input=typed, capture_output=True, text=True, timeout=180,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Your decision:" in done.stdout and "| 1 | human |" in done.stdout
    events = read_feedback(tmp_path / "fb.jsonl")
    assert [e.action for e in events] == ["accept", "accept", "pass", "accept", "accept", "labels", "pass"]
    assert events[2].loop == "idattr" and events[5].text == ""
