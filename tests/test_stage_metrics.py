"""A user's own metric plugged into a stage: checked on the way in, and it decides when the loop stops."""

from __future__ import annotations

import pytest

from helpers import compile_mini, scripted_roles
from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers import STRATEGIES, Evaluation, SelfImprove, StageMetric
from syntra_dspy.optimizers.trials import LabelTrial, QueryTrial


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


def test_a_custom_metric_decides_when_each_loop_stops(tmp_path, index_dir):
    seen: dict[str, list] = {"annotation": [], "query": []}

    def every_positive_found(attempt: str, outputs: list[LabelTrial]) -> Evaluation:
        """Passes every attempt: the built-in check fails the strict first instruction, this one stops there."""
        seen["annotation"].append((attempt, outputs))
        found = sum((t.positive_score or 0) >= 2 for t in outputs)
        return Evaluation(found / len(outputs), True, "", {"found": found})

    def never_good_enough(attempt: str, outputs: list[QueryTrial]) -> Evaluation:
        seen["query"].append(outputs)
        return Evaluation(1, False, "Write shorter queries.")

    default, _ = compile_mini(tmp_path / "default", index_dir=index_dir, judge="written")
    custom, brain = compile_mini(tmp_path / "custom", index_dir=index_dir, judge="written",
                                 optimizer_kwargs={"metrics": {"annotation": every_positive_found,
                                                               "query_instruction": never_good_enough}})
    before = {h["name"]: h for h in default.manifest["history"]}
    after = {h["name"]: h for h in custom.manifest["history"]}
    assert len(before["annotation_instruction"]["attempts"]) == 2  # the built-in check refines once
    annotation = after["annotation_instruction"]
    assert annotation["stop_reason"] == "passed" and len(annotation["attempts"]) == 1
    assert annotation["attempts"][0]["details"] == {"found": 0} and "refine_annotation" not in brain.calls
    ((attempt, trials),) = seen["annotation"]
    assert attempt == annotation["attempts"][0]["instruction"] and all(isinstance(t, LabelTrial) for t in trials)
    query = after["query_instruction"]
    assert query["stop_reason"] == "attempt_limit" and len(query["attempts"]) == 3
    assert [a["feedback"] for a in query["attempts"]] == ["Write shorter queries."] * 3
    assert all(isinstance(t, QueryTrial) for outputs in seen["query"] for t in outputs)
    # the stages without a custom metric run as before; the manifest names the metrics used
    assert [(a["instruction"], a["score"]) for a in after["idattr"]["attempts"]] == \
        [(a["instruction"], a["score"]) for a in before["idattr"]["attempts"]]
    assert custom.manifest["optimizer"]["metrics"] == {
        "annotation_instruction": f"{__name__}.test_a_custom_metric_decides_when_each_loop_stops.<locals>."
                                  "every_positive_found",
        "query_instruction": f"{__name__}.test_a_custom_metric_decides_when_each_loop_stops.<locals>."
                             "never_good_enough"}
    assert "metrics" not in default.manifest["optimizer"]


@pytest.mark.parametrize("judge", ["written", "graded"])
def test_gepa_scores_each_trial_with_the_plugged_in_metric(tmp_path, index_dir, judge):
    calls = []

    def perfect(attempt, outputs):
        calls.append(len(outputs))
        return Evaluation(1.0, True, "")

    artifact, _ = compile_mini(tmp_path, strategy="gepa", index_dir=index_dir, judge=judge,
                               optimizer_kwargs={"gepa": {"stages": ["annotation_instruction"]},
                                                 "metrics": {"annotation": perfect}})
    loop = artifact.manifest["history"][-1]
    assert loop["passed"] and loop["kept"] == 1 and len(loop["attempts"]) == 1  # the seed already scores 1.0
    if judge == "written":
        assert calls and set(calls) == {1}  # one trial at a time
    else:  # the graded judge's one trial is the whole calibration set: the metric sees its grades, as in the loop
        assert calls and set(calls) == {artifact.program.state.judge.summary.candidates}


class NotAMetric:
    pass


@pytest.mark.parametrize(("metrics", "match"), [
    ({"annotation": NotAMetric()}, r"stage 'annotation_instruction' is a NotAMetric, not a callable"),
    ({"query": lambda attempt: None}, r"stage 'query_instruction' cannot be called as metric\(attempt, outputs\)"),
    ({"ranking": lambda a, o: None}, r"no stage is called 'ranking'.*annotation_instruction"),
    ({"annotation": lambda a, o: None, "annotation_instruction": lambda a, o: None}, "two metrics"),
])
def test_a_metric_that_does_not_fit_is_refused_naming_the_stage(metrics, match):
    roles, _ = scripted_roles()
    with pytest.raises(ConfigError, match=match):
        SelfImprove(lms=roles, metrics=metrics)


def test_a_metric_returning_something_else_fails_the_compile_naming_the_stage(tmp_path, index_dir):
    with pytest.raises(ConfigError, match=r"metric for stage 'idattr' returned a float, not an Evaluation"):
        compile_mini(tmp_path, index_dir=index_dir, optimizer_kwargs={"metrics": {"idattr": lambda a, o: 0.5}})


def test_the_none_strategy_refuses_a_metric_it_would_never_call():
    roles, _ = scripted_roles()
    with pytest.raises(ConfigError, match="evaluates nothing"):
        STRATEGIES["none"](lms=roles, metrics={"annotation": lambda a, o: Evaluation(1, True)})


def test_stage_metric_is_a_runtime_checkable_protocol():
    assert isinstance(lambda attempt, outputs: Evaluation(1, True), StageMetric)
