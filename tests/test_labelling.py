"""One labelling loop: a query's candidates in chunks, a chunk whose answer stays unusable gives Nones."""

from __future__ import annotations

import dspy

from syntra_dspy.judging.labels import LabelledPair
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.annotation_check import run_calibration
from syntra_dspy.programs.components import ComponentState, FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.task import TaskDefinition
from syntra_dspy.testing import SyntraBrain, scripted_lm


class BreaksOnMarker(SyntraBrain):
    """Answers every annotation call with labels, except a call showing a candidate marked BROKEN: no labels."""

    def annotate(self, system, inputs):
        if "BROKEN" in inputs.get("candidates", ""):
            return {"judgements": []}
        return SyntraBrain.annotate(system, inputs)


def _program() -> SynthesisProgram:
    definition = TaskDefinition(query_type="claim", doc_type="abstract", relevance_definition="it tests the claim")
    return SynthesisProgram(ComponentState(task_definition=definition), max_retries=0)


TEXTS = ["aspirin lowers fever quickly", "aspirin fever trial results", "BROKEN text", "unrelated gardening note"]


def test_a_failed_chunk_becomes_none_and_the_others_are_kept():
    with dspy.context(lm=scripted_lm(BreaksOnMarker()), adapter=dspy.JSONAdapter()):
        labels = _program().label_all("aspirin lowers fever", TEXTS, chunk_size=2)
    assert labels[2:] == [None, None]
    assert all(isinstance(x, int) for x in labels[:2])


def test_trials_and_calibration_label_through_the_one_helper(monkeypatch):
    seen = []

    def label_all(self, query, candidates, *, chunk_size):
        seen.append((query, tuple(candidates), chunk_size))
        return [None] * len(candidates)

    monkeypatch.setattr(SynthesisProgram, "label_all", label_all)
    program = _program()
    example = FewShotPair(query="aspirin lowers fever", positive_id="d1", positive_text=TEXTS[0])
    case = tr.AnnotationCase(example, ("d1", "d2"), tuple(TEXTS[:2]), 0)
    (trial,) = tr.label_cases(program, [case], chunk_size=3)
    assert trial.scores == [None, None] and trial.positive_score is None
    pairs = [LabelledPair("aspirin lowers fever", "d1", "positive", TEXTS[0])]
    (calibrated,) = run_calibration(program, pairs, chunk_size=3)
    assert calibrated.scores == [None]
    assert seen == [("aspirin lowers fever", tuple(TEXTS[:2]), 3), ("aspirin lowers fever", (TEXTS[0],), 3)]
