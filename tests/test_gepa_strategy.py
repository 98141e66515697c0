"""GEPA as a strategy: dspy.GEPA runs end to end on SYNTRA's metrics and yields an ordinary artifact."""

from __future__ import annotations

import inspect

import dspy
import pytest
from helpers import MINI_TASK, scripted_roles
from test_compare_helpers import fast_encoder  # noqa: F401  (fixture)

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.optimizers import STRATEGIES, GEPASettings, GEPAStrategy
from syntra_dspy.optimizers.gepa import FeedbackMetric
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.testing import GUIDANCE_MARK, LENIENT_MARK, STYLE_MARK, SyntraBrain


def compile_gepa(tmp_path, brain=None, *, judge="written", **gepa):
    """The written judge unless asked (its annotate step is what most tests here look at); the graded one on E
    alone (with the fake encoder the cosine already separates the mini task, so a fused judge passes unrefined)."""
    from syntra_dspy.compiler import compile_task
    from syntra_dspy.optimizers import CompileSettings

    roles, brain = scripted_roles(brain)
    settings = CompileSettings(sample_docs=3, selection_target=20, judge=judge, judge_feature="expected")
    artifact = compile_task(MINI_TASK, strategy="gepa", out=tmp_path / "artifacts", lms=roles,
                            index_dir=tmp_path / "index", settings=settings,
                            optimizer_kwargs={"gepa": gepa} if gepa else None)
    return artifact, brain


def test_gepa_is_a_registered_strategy_with_keyword_only_settings():
    assert STRATEGIES["gepa"] is GEPAStrategy
    params = inspect.signature(GEPAStrategy.__init__).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for name, p in params.items() if name != "self")
    with pytest.raises(ValueError):
        GEPASettings(max_metric_calls=0)


def test_gepa_improves_every_stage_and_saves_a_loadable_artifact(tmp_path, fast_encoder):  # noqa: F811
    artifact, brain = compile_gepa(tmp_path)
    assert brain.calls["propose_instruction"] >= 3  # GEPA's reflection LM was asked, in JSON
    loaded = load_artifact(artifact.path)
    program = loaded.program
    assert GUIDANCE_MARK in program.extract.signature.instructions
    assert STYLE_MARK in program.write.signature.instructions
    assert LENIENT_MARK in program.annotate.signature.instructions
    # the drafts GEPA started from stay as they were; GEPA's whole-step texts are components of their own
    assert STYLE_MARK not in program.state.query_instruction
    assert STYLE_MARK in program.state.step_instructions["write"]
    history = {h["name"]: h for h in loaded.manifest["history"]}
    assert history["task_definition"]["stop_reason"] == "not_evaluated"
    for stage in ("idattr", "query_instruction", "annotation_instruction"):
        loop = history[stage]
        assert loop["passed"] and loop["kept"] > 1 and loop["attempts"][0]["score"] < 1.0
        assert loop["attempts"][loop["kept"] - 1]["score"] == 1.0
        assert loaded.manifest["usage"][stage]["calls"] > 0
    assert loaded.manifest["optimizer"]["gepa"]["max_metric_calls"] == 30
    assert loaded.manifest["strategy"] == "gepa"


def test_gepa_optimises_the_grading_instruction_against_the_graded_metric(tmp_path, fast_encoder):  # noqa: F811
    """Graded judge: GEPA rewrites the grading step's instruction, scored by the annotation loop's own metric (kappa
    and recall of the calibration fitted on the whole calibration set, one GEPA example), and the artifact's
    calibration is fitted on the grades of the text GEPA kept."""
    from syntra_dspy.judging.judge import judge_mode

    artifact, brain = compile_gepa(tmp_path, judge="graded", stages=["annotation_instruction"])
    program = artifact.program
    assert LENIENT_MARK in program.state.step_instructions["grade"] \
        and LENIENT_MARK in program.grade.signature.instructions
    assert LENIENT_MARK not in program.state.annotation_instruction  # the draft GEPA started from stays as it was
    loop = {h["name"]: h for h in artifact.manifest["history"]}["annotation_instruction"]
    first, kept = loop["attempts"][0], loop["attempts"][loop["kept"] - 1]
    assert first["score"] < 0.5 <= kept["score"] and loop["passed"] and loop["threshold"] == 0.5
    assert judge_mode(program) == "graded" and artifact.manifest["settings"]["judge"] == "graded"
    summary = program.state.judge.summary  # fitted on the kept text's grades: it separates the set
    assert summary.binary_kappa >= 0.5 and summary.positive_recall >= 0.6
    assert "annotate" not in program.state.step_instructions and "judge_idattr" not in brain.calls


def test_gepa_keeps_the_seed_when_nothing_improves(tmp_path, fast_encoder):  # noqa: F811
    artifact, _ = compile_gepa(tmp_path, SyntraBrain(stubborn=True), max_metric_calls=12)
    for loop in artifact.manifest["history"][1:]:
        assert loop["kept"] == 1 and not loop["passed"] and len(loop["attempts"]) == 1
    assert STYLE_MARK not in artifact.program.write.signature.instructions


def test_gepa_can_be_limited_to_some_stages(tmp_path, fast_encoder):  # noqa: F811
    artifact, brain = compile_gepa(tmp_path, stages=["annotation_instruction"])
    history = {h["name"]: h for h in artifact.manifest["history"]}
    assert history["idattr"]["stop_reason"] == "not_evaluated"
    assert history["query_instruction"]["stop_reason"] == "not_evaluated"
    assert LENIENT_MARK in artifact.program.annotate.signature.instructions
    assert GUIDANCE_MARK not in artifact.program.extract.signature.instructions
    assert "judge_idattr" not in brain.calls


def test_metric_follows_gepas_five_argument_contract_and_memoises():
    judged = []

    class OneStage:  # what FeedbackMetric reads of a stage
        scale = 3.0

        def example_key(self, trial):
            return trial

        def example_metric(self, attempt, outputs):
            judged.append((attempt, outputs))
            return Evaluation(2, False, "needs claims")

    metric = FeedbackMetric(OneStage())
    inspect.signature(metric).bind(None, None, None, None, None)  # what dspy.GEPA checks
    pred = dspy.Prediction(trial="a", instruction="write claims")
    first = metric(dspy.Example(), pred, None, "write", None)
    again = metric(dspy.Example(), pred)
    assert first.score == again.score == pytest.approx(2 / 3) and first.feedback == "needs claims"
    assert judged == [("write claims", ["a"])]


def test_gepa_instructions_live_in_the_components_that_diff_and_prompts_read(tmp_path, fast_encoder):  # noqa: F811
    from syntra_dspy.artifacts import diff_artifacts, render_prompts
    from syntra_dspy.cli import main

    from helpers import compile_mini

    gepa, _ = compile_gepa(tmp_path / "g")
    none, _ = compile_mini(tmp_path / "n", strategy="none", index_dir=tmp_path / "g" / "index")
    # the components hold GEPA's text, and recomposing them gives exactly the prompts production sends
    steps = gepa.program.state.step_instructions
    assert LENIENT_MARK in steps["annotate"] and STYLE_MARK in steps["write"] and GUIDANCE_MARK in steps["extract"]
    rebuilt = gepa.program.with_components(query_instruction=gepa.program.state.query_instruction)
    assert render_prompts(rebuilt) == gepa.manifest["prompts"]
    # and the diff of a `none` and a `gepa` artifact shows the prompts GEPA changed
    text = diff_artifacts(none.path, gepa.path)
    added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    for mark in (LENIENT_MARK, STYLE_MARK, GUIDANCE_MARK):
        assert any(mark in line for line in added), mark
    assert main(["artifacts", "diff", str(none.path), str(gepa.path)]) == 0
