"""One annotation metric for every strategy: known positives must come out positive and random controls negative."""

from __future__ import annotations

import io
import re

import pytest
from helpers import compile_mini

from syntra_dspy.judging.judge import judge_mode
from syntra_dspy.lm import TokenDistribution
from syntra_dspy.optimizers import ReviewSession
from syntra_dspy.optimizers.terminal_review import TerminalReviewer
from syntra_dspy.testing import SyntraBrain


class YesMan(SyntraBrain):
    """An annotator that calls every candidate 3, whether written in a list or graded one by one."""

    @staticmethod
    def annotate(system, inputs):
        ids = re.findall(r"\[doc_id (\d+)\]", inputs.get("candidates", ""))
        return {"judgements": [{"doc_id": int(i), "score": 3} for i in ids]}

    @staticmethod
    def grade(system, user):
        return TokenDistribution({"3": 0.9, "2": 0.1})


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


def _options(strategy: str) -> dict:
    if strategy == "human":  # the person accepts every verifier judgement and gives no labels
        return {"review": ReviewSession(terminal=TerminalReviewer(io.StringIO("\n" * 40), io.StringIO()))}
    if strategy == "gepa":
        return {"gepa": {"max_metric_calls": 8}}
    return {}


@pytest.mark.parametrize("judge", ["written", "graded"])
@pytest.mark.parametrize("strategy", ["self-improve", "none", "human", "gepa"])
def test_a_yes_man_annotator_fails_the_annotation_metric_under_every_strategy(tmp_path, index_dir, strategy, judge,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)  # the human strategy records its session in the working directory
    artifact, _ = compile_mini(tmp_path, strategy=strategy, brain=YesMan(), index_dir=index_dir, max_attempts=2,
                               judge=judge, judge_feature="expected", optimizer_kwargs=_options(strategy))
    loop = artifact.manifest["history"][-1]
    assert loop["name"] == "annotation_instruction"
    assert not loop["passed"]
    if strategy == "none":
        assert loop["stop_reason"] == "not_evaluated"
        return
    limit = 1.0 if judge == "written" else 0.5  # the annotation check's 0-1 score, or the graded judge's kappa
    assert all(a["score"] < limit for a in loop["attempts"])


@pytest.mark.parametrize("strategy", ["none", "gepa", "self-improve", "human"])
def test_every_strategy_compiles_the_graded_judge_and_the_manifest_says_so(tmp_path, index_dir, strategy,
                                                                          monkeypatch):
    """Left at its default, every strategy compiles the graded, calibrated judge (none on its drafted instruction,
    untried; gepa on the grading text its search kept), and the manifest records that judge."""
    monkeypatch.chdir(tmp_path)
    artifact, _ = compile_mini(tmp_path, strategy=strategy, index_dir=index_dir, judge_feature="expected",
                               optimizer_kwargs=_options(strategy))
    assert judge_mode(artifact.program) == "graded" and artifact.program.state.judge.summary is not None
    assert artifact.manifest["settings"]["judge"] == artifact.manifest["optimizer"]["judge"] == "graded"


def test_the_written_judge_is_compiled_when_asked_for(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, strategy="none", index_dir=index_dir, judge="written")
    assert judge_mode(artifact.program) == "written"
    assert artifact.manifest["settings"]["judge"] == artifact.manifest["optimizer"]["judge"] == "written"
