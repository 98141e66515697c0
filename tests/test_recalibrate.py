"""``syntra artifacts recalibrate``: a new judge calibration on the unchanged grading prompt, as a new version."""

from __future__ import annotations

import shutil

import pytest
from helpers import MINI_TASK
from test_compare_helpers import write_heldout_beir
from test_produce_support import derived_version, mini_artifact

from syntra_dspy.artifacts import load_artifact, render_prompts, save_artifact
from syntra_dspy.cli import main
from syntra_dspy.comparison.judge_agreement import measure_agreement
from syntra_dspy.errors import ConfigError
from syntra_dspy.production.recalibrate import recalibrate_artifact
from syntra_dspy.judging.calibration import JudgeCalibration, describe, fit_calibration
from syntra_dspy.testing import SyntraBrain, scripted_lm


@pytest.fixture(scope="module")
def relative(tmp_path_factory):
    return mini_artifact(tmp_path_factory, judge="graded", feature="relative")


def test_recalibration_changes_the_judge_only_and_records_where_it_came_from(relative, tmp_path):
    art, index = relative
    original = load_artifact(art)
    brain = SyntraBrain()
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(brain),
                                index_dir=index)
    derived = load_artifact(path)  # verified like any artifact
    assert derived.version != original.version and path.parent.name == original.task
    assert derived.program.state.judge.feature == "hybrid" and original.program.state.judge.feature == "relative"
    assert render_prompts(derived.program) == render_prompts(original.program)
    assert derived.program.state.model_copy(update={"judge": None}) == \
        original.program.state.model_copy(update={"judge": None})
    record = derived.manifest["record"]["recalibration"]
    assert record["from_version"] == original.version and record["after"]["feature"] == "hybrid"
    assert record["before"]["feature"] == "relative"
    # the artifact keeps its graded calibration set: nothing is graded again, and the fit is the one those grades give
    saved = original.program.state.judge.samples
    assert record["graded"] == 0 and record["grades_reused"] == record["candidates"] == len(saved) > 0
    assert not brain.calls
    assert derived.program.state.judge == fit_calibration(list(saved), feature="hybrid")
    assert derived.manifest["history"] == original.manifest["history"]  # the compile's record is kept
    assert derived.program.state.judge.summary.auc["lexical"] is not None


def test_the_compiled_calibration_keeps_its_graded_set_in_the_program_not_in_reports(relative):
    art, _ = relative
    judge = load_artifact(art).program.state.judge
    assert len(judge.samples) == judge.summary.candidates > 0
    assert all(s.doc_id for s in judge.samples)  # what a later recalibration matches grades by
    assert {s.query for s in judge.samples} == set(judge.summary.query_texts)
    assert JudgeCalibration.model_validate_json(judge.model_dump_json()) == judge  # program.json round trip
    assert fit_calibration(list(judge.samples), feature=judge.feature) == judge  # the cut points follow from them
    assert "samples" not in describe(judge) and "samples" not in judge.description()


def test_regrade_grades_every_candidate_once_and_the_same_grades_give_the_same_judge(relative, tmp_path):
    art, index = relative
    brain = SyntraBrain()
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(brain),
                                index_dir=index, regrade=True)
    derived = load_artifact(path)
    record = derived.manifest["record"]["recalibration"]
    assert record["graded"] == record["candidates"] > 0 and record["grades_reused"] == 0
    assert brain.calls["grade"] == record["candidates"] and set(brain.calls) == {"grade"}
    assert derived.program.state.judge == fit_calibration(list(load_artifact(art).program.state.judge.samples),
                                                          feature="hybrid")


def test_human_judgments_given_later_are_graded_and_the_kept_grades_reused(relative, tmp_path):
    art, index = relative
    saved = load_artifact(art).program.state.judge.samples
    write_heldout_beir(tmp_path / "eval")
    brain = SyntraBrain()
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(brain),
                                index_dir=index, calibration_labels=f"beir:{tmp_path / 'eval'}:test",
                                calibration_queries=3)
    judge = load_artifact(path).program.state.judge
    record = load_artifact(path).manifest["record"]["recalibration"]
    assert record["grades_reused"] == len(saved) and record["graded"] == record["candidates"] - len(saved) > 0
    assert brain.calls["grade"] == record["graded"]  # only the new candidates
    assert judge.summary.sources.get("human", 0) > 0
    assert judge.samples[:len(saved)] == saved  # the compile's candidates first, with their kept grades


def test_an_artifact_without_kept_grades_is_graded_again(relative, tmp_path):
    art, index = relative
    original = load_artifact(art)
    bare = original.program.with_components(judge=original.program.state.judge.model_copy(update={"samples": ()}))
    manifest = {k: v for k, v in original.manifest.items() if k not in ("version", "program_id", "prompts")}
    old = save_artifact(bare, manifest, tmp_path / "old")
    assert "samples" not in (old / "program.json").read_text()  # as artifacts were before grades were kept
    brain = SyntraBrain()
    path = recalibrate_artifact(old, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(brain),
                                index_dir=index)
    record = load_artifact(path).manifest["record"]["recalibration"]
    assert record["graded"] == record["candidates"] == brain.calls["grade"] > 0 and record["grades_reused"] == 0


def test_an_agreement_comparison_reuses_the_grades_of_an_artifact_with_the_same_grading_prompt(relative, tmp_path):
    art, index = relative
    derived = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(SyntraBrain()),
                                   index_dir=index)
    write_heldout_beir(tmp_path / "eval")
    shutil.copy(MINI_TASK.parent / "corpus.jsonl", tmp_path / "eval" / "corpus.jsonl")
    brain = SyntraBrain()
    report = measure_agreement([art, derived], f"beir:{tmp_path / 'eval'}:test", n_queries=10, top_k=4,
                               random_negatives=1, seed=3, out=tmp_path / "out", generator=scripted_lm(brain),
                               index_dir=index)
    n = report["candidates"]
    assert brain.calls["grade"] == n  # graded once, for the first artifact; the second calibrates the same grades
    first, second = (f"mini/{art.name}:graded", f"mini/{derived.name}:graded")
    assert report["judges"][second]["grades_from"] == [art.name] and report["judges"][first]["grades_from"] == []
    assert report["judges"][second]["judge"]["calibration"]["feature"] == "hybrid"
    assert report["judges"][first]["ranking"]["bm25"]["auc"] is not None  # the no-LLM reference row
    assert report["judges"][second]["cost"] == report["judges"][first]["cost"]  # the grades' own cost, not zero
    assert "Grades shared" in (tmp_path / "out" / "agreement.md").read_text()
    # the same labels come from cutting the first artifact's logged grades with the second's calibration
    import json
    from collections import Counter

    from syntra_dspy.judging.measure import JudgmentLog, recalibrated_rows
    from syntra_dspy.judging.judge import RelevanceJudge
    from syntra_dspy.judging.candidates import JudgedCandidate
    from syntra_dspy.signatures.types import label_class

    candidates = [JudgedCandidate(**c) for c in json.loads((tmp_path / "out" / "candidates.json").read_text())]
    log = JudgmentLog(tmp_path / "out" / "judgments.jsonl")
    logged = [log.done[f"{art.name}|graded|{c.query_id}|{c.doc_id}"] for c in candidates]
    cut = recalibrated_rows(RelevanceJudge(load_artifact(derived).program), candidates, logged)
    assert Counter(label_class(r["judgment"]["label"]) for r in cut) == \
        Counter({k: v for k, v in report["judges"][second]["predicted"].items() if v})
    # the same grading prompt shown less of each document is another model call: graded again, not shared
    manifest = {k: v for k, v in load_artifact(derived).manifest.items()
                if k not in ("version", "program_id", "prompts", "schema_version", "kind")}
    clipped = save_artifact(load_artifact(derived).program,
                            {**manifest, "settings": {**manifest["settings"], "max_doc_chars": 60}}, tmp_path / "clip")
    brain = SyntraBrain()
    report = measure_agreement([art, clipped], f"beir:{tmp_path / 'eval'}:test", n_queries=10, top_k=4,
                               random_negatives=1, seed=3, out=tmp_path / "out", generator=scripted_lm(brain),
                               index_dir=index)
    assert brain.calls["grade"] == n and report["judges"][f"mini/{clipped.name}:graded"]["grades_from"] == []


def test_a_written_judge_cannot_be_recalibrated(tmp_path_factory, tmp_path):
    art, index = mini_artifact(tmp_path_factory, judge="written")
    with pytest.raises(ConfigError, match="no calibration to refit"):
        recalibrate_artifact(art, tmp_path / "artifacts", generator=scripted_lm(SyntraBrain()), index_dir=index)
    assert not (tmp_path / "artifacts").exists()


def test_the_command_line_prints_the_new_version_and_its_judge(relative, tmp_path, capsys, monkeypatch):
    import syntra_dspy.production.recalibrate as recal

    art, index = relative
    real = recal.recalibrate_artifact
    monkeypatch.setattr(recal, "recalibrate_artifact",
                        lambda *a, **k: real(*a, **{**k, "generator": scripted_lm(SyntraBrain())}))
    code = main(["artifacts", "recalibrate", str(art), "--out", str(tmp_path / "artifacts"), "--judge-feature", "fused",
                 "--index-dir", str(index)])
    out = capsys.readouterr().out
    assert code == 0 and "recalibrated:" in out and "judge: fused" in out


def test_kept_grades_need_no_judge_model_and_new_candidates_do(relative, tmp_path):
    art, index = relative
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="fused", index_dir=index)  # no LM named or built
    record = load_artifact(path).manifest["record"]["recalibration"]
    assert record["graded"] == 0 and record["generator"] is None
    write_heldout_beir(tmp_path / "eval")
    with pytest.raises(ConfigError, match="scripted test LM"):  # the scripted compile's LM cannot be reached
        recalibrate_artifact(art, tmp_path / "artifacts", index_dir=index, calibration_queries=2,
                             calibration_labels=f"beir:{tmp_path / 'eval'}:test")


def test_kept_grades_are_not_reused_over_another_corpus(relative, tmp_path, monkeypatch):
    from syntra_dspy.retrieval.corpus import Corpus

    art, index = relative
    write_heldout_beir(tmp_path / "eval")
    monkeypatch.setattr(Corpus, "fingerprint", property(lambda self: "another-corpus"))
    brain = SyntraBrain()
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(brain),
                                index_dir=tmp_path / "index", calibration_queries=2,
                                calibration_labels=f"beir:{tmp_path / 'eval'}:test")
    record = load_artifact(path).manifest["record"]["recalibration"]
    assert record["grades_reused"] == 0 and record["graded"] == record["candidates"] == brain.calls["grade"]


def test_another_grade_order_grades_every_candidate_in_it_and_the_calibration_records_it(relative, tmp_path):
    art, index = relative
    brain = SyntraBrain()
    graded_users: list[str] = []
    grade = brain.grade
    brain.grade = lambda system, user: (graded_users.append(user), grade(system, user))[1]  # type: ignore
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(brain),
                                index_dir=index, grade_order="document-first")
    derived = load_artifact(path)
    record = derived.manifest["record"]["recalibration"]
    assert record["grade_order"] == "document-first" and record["graded"] == record["candidates"] > 0
    # the kept grades are of the other order: every candidate is graded again, document first
    assert graded_users and all(user.startswith("Document: ") for user in graded_users)
    assert derived.program.state.judge.grade_order == "document-first"
    assert render_prompts(derived.program) == render_prompts(load_artifact(art).program)  # the words are the same
    # refitted again, its own (document-first) grades are reused and the order kept
    again = recalibrate_artifact(path, tmp_path / "artifacts", feature="hybrid", generator=scripted_lm(SyntraBrain()),
                                 index_dir=index)
    assert load_artifact(again).manifest["record"]["recalibration"]["graded"] == 0
    assert load_artifact(again).program.state.judge.grade_order == "document-first"


def recalibrated_with_another_grading_prompt(relative, tmp_path, guidance: str, **flag):
    """A guided version of the fixture artifact, recalibrated with ``flag`` (one that changes the grading prompt),
    checked for what every such flag keeps: only the grading prompt differs, every calibration candidate is graded
    again and each is sent that prompt, and grades are keyed apart from the original's. Returns the guided
    artifact's path, it loaded, the new version's path, it loaded."""
    from syntra_dspy.artifacts import grading_identity

    art, index = relative
    art = derived_version(load_artifact(art), tmp_path / "guided", annotation_instruction=guidance)
    original = load_artifact(art)
    brain = SyntraBrain()
    lm = scripted_lm(brain)
    path = recalibrate_artifact(art, tmp_path / "artifacts", feature="hybrid", generator=lm, index_dir=index, **flag)
    derived = load_artifact(path)
    before, after = render_prompts(original.program), render_prompts(derived.program)
    assert {step for step in before if before[step] != after[step]} == {"grade"}
    # every calibration candidate was graded with the new prompt: the kept grades were the other prompt's
    record = derived.manifest["record"]["recalibration"]
    assert record["graded"] == record["candidates"] == brain.calls["grade"] > 0 and record["grades_reused"] == 0
    sent = [m["content"] for h in lm.history for m in h["messages"] if m["role"] == "system"]
    grade = derived.program.grade.signature.instructions
    assert len(sent) == brain.calls["grade"] and all(s == grade for s in sent)
    # run stores and agreement logs key grades by the grading prompt, so the original's are not taken for these
    assert grading_identity(derived.program)["prompt_sha256"] != grading_identity(original.program)["prompt_sha256"]
    return art, original, path, derived


def test_without_guidance_changes_the_grading_prompt_only_and_grades_every_candidate_with_it(relative, tmp_path):
    from syntra_dspy.artifacts import diff_artifacts

    art, original, path, derived = recalibrated_with_another_grading_prompt(relative, tmp_path, (
        "A document is relevant when it states the fact the query asks for; label 1 when it names the same "
        "entity without stating it."), without_guidance=True)
    guidance = original.program.state.annotation_instruction.strip()
    assert guidance and guidance in original.program.grade.signature.instructions  # the compile wrote some
    grade = derived.program.grade.signature.instructions
    assert guidance not in grade and "## Guidance for this task" not in grade
    assert grade.startswith("## Task\n") and "0 = " in grade and "3 = " in grade  # definition and scale stay
    # the compiled text is kept in the components (the listwise prompt still uses it), only the grading call drops it
    assert derived.program.state.annotation_instruction == original.program.state.annotation_instruction
    assert derived.program.state.grade_guidance is False and original.program.state.grade_guidance is True
    assert "grade_guidance" in derived.manifest["record"]["recalibration"]
    # saved as a component only where it is not the default: earlier programs save byte for byte as before
    assert '"grade_guidance": false' in (path / "program.json").read_text()
    assert "grade_guidance" not in (art / "program.json").read_text()
    assert "+left out of the grading prompt" in diff_artifacts(art, path)  # artifacts diff says why it differs
    # a later recalibration of the new version keeps its prompt and reuses its grades
    again = load_artifact(recalibrate_artifact(path, tmp_path / "again", feature="hybrid", index_dir=relative[1]))
    assert render_prompts(again.program) == render_prompts(derived.program)
    assert again.manifest["record"]["recalibration"]["graded"] == 0


def test_brief_grading_sends_the_relevance_definition_and_one_line_scale_and_grades_every_candidate(relative,
                                                                                                     tmp_path):
    from syntra_dspy.artifacts import diff_artifacts

    art, original, path, derived = recalibrated_with_another_grading_prompt(
        relative, tmp_path, "A document is relevant when it states the fact the query asks for.", brief_grading=True)
    grade, full = derived.program.grade.signature.instructions, original.program.grade.signature.instructions
    definition = original.program.state.task_definition
    assert grade.startswith(f"Relevance: {definition.relevance_definition}\n")
    assert "## " not in grade and "states the fact" not in grade  # no headings, no guidance
    assert all(f"{k} = " in grade for k in range(4)) and len(grade) < len(full) / 2
    assert derived.program.state.grade_prompt == "brief" and original.program.state.grade_prompt == "full"
    record = derived.manifest["record"]["recalibration"]
    assert "grade_prompt" in record and "grade_guidance" not in record
    assert '"grade_prompt": "brief"' in (path / "program.json").read_text()
    assert "grade_prompt" not in (art / "program.json").read_text()  # the default saves byte for byte as before
    assert "+brief (syntra artifacts recalibrate --brief-grading)" in diff_artifacts(art, path)
    again = load_artifact(recalibrate_artifact(path, tmp_path / "again", feature="hybrid", index_dir=relative[1],
                                               brief_grading=True))  # already brief: its grades are reused
    assert render_prompts(again.program) == render_prompts(derived.program)
    assert again.manifest["record"]["recalibration"]["graded"] == 0
    whole = derived_version(original, tmp_path / "whole",
                            step_instructions={"grade": "Answer with one digit, 0-3, for the document's relevance."})
    with pytest.raises(ConfigError, match="whole-step instruction"):
        recalibrate_artifact(whole, tmp_path / "refused", generator=scripted_lm(SyntraBrain()), index_dir=relative[1],
                             brief_grading=True)
    assert not list((tmp_path / "refused").rglob("manifest.json"))


def test_without_guidance_is_refused_where_the_grading_prompt_has_none(relative, tmp_path):
    art, index = relative
    plain = derived_version(load_artifact(art), tmp_path / "plain", annotation_instruction="")
    with pytest.raises(ConfigError, match="no compiled guidance to leave out"):
        recalibrate_artifact(plain, tmp_path / "artifacts", generator=scripted_lm(SyntraBrain()), index_dir=index,
                             without_guidance=True)
    assert not list((tmp_path / "artifacts").rglob("manifest.json"))  # nothing saved
    # a grading instruction written whole (GEPA's) is not composed from the guidance: nothing to leave out either
    whole = derived_version(load_artifact(art), tmp_path / "whole",
                            annotation_instruction="Label 2 or 3 only for stated facts.",
                            step_instructions={"grade": "Answer with one digit, 0-3, for the document's relevance."})
    with pytest.raises(ConfigError, match="no compiled guidance to leave out"):
        recalibrate_artifact(whole, tmp_path / "artifacts", generator=scripted_lm(SyntraBrain()), index_dir=index,
                             without_guidance=True)


def test_the_cli_asks_for_the_grading_prompt_without_guidance_by_name():
    from syntra_dspy.cli import build_parser

    assert build_parser().parse_args(["artifacts", "recalibrate", "art", "--without-guidance"]).without_guidance
    assert not build_parser().parse_args(["artifacts", "recalibrate", "art"]).without_guidance
