"""The repair loop's retries reach the model: none is answered from the cache with an earlier attempt's answer."""

from __future__ import annotations

import dspy
import pytest
from dspy.clients.cache import Cache

from syntra_dspy.errors import LMOutputError
from syntra_dspy.lm.scripted import ScriptedEngine
from syntra_dspy.programs.retry import call_with_repair
from syntra_dspy.programs.validation import OutputRejected


@pytest.fixture
def cached_lm(monkeypatch) -> dspy.LM:
    """A scripted LM behind DSPy's request cache (in memory, this test only), as the embedded and served LMs are."""
    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))
    return dspy.LM("scripted", engine=ScriptedEngine(lambda call: {"answer": "What is it?"}), cache=True)


def _model_calls_of_a_rejected_loop(lm: dspy.LM) -> int:
    """Run a repair loop whose every answer is rejected for the same reason; how many calls reached the model."""
    predict = dspy.Predict("question, retry_note -> answer")
    before = len(lm.engine.calls)

    def call(note: str, config: dict) -> str:
        predict(question="Which queries?", retry_note=note, config=config)
        raise OutputRejected("is a question")

    with dspy.context(lm=lm), pytest.raises(LMOutputError):
        call_with_repair("write", call, max_retries=2)
    return len(lm.engine.calls) - before


def test_a_document_retried_again_gets_fresh_answers_on_every_try(cached_lm):
    """``--retry-failed`` runs a document under ``rollout_id`` n; each try's first answer fails for the same reason
    as last time, so each retry sends the same prompt again; its rollout must differ or the cache answers it."""
    assert _model_calls_of_a_rejected_loop(cached_lm) == 3
    for resample in (1, 2, 3):
        assert _model_calls_of_a_rejected_loop(cached_lm.copy(rollout_id=resample, temperature=0.7)) == 3


def test_a_first_attempt_loop_run_again_replays_from_the_cache(cached_lm):
    """The plain path keeps its rollouts (1, 2), so a rerun replays answers cached by earlier runs for free."""
    assert _model_calls_of_a_rejected_loop(cached_lm) == 3
    assert _model_calls_of_a_rejected_loop(cached_lm) == 0


def test_a_fenced_answer_is_judged_for_a_cut_off_like_a_bare_one():
    """An answer wrapped in a ```json fence is read without the fence (an opening line's newline included)."""
    from syntra_dspy.programs import retry

    capture = retry._AnswerCapture()
    token = retry._CAPTURE.set(capture)
    try:
        capture.text = '```json\n{"queries": [{"blueprint": 0, "query": "Notch has broad supporting eff'
        assert retry.latest_answer().startswith('{"queries"') and retry.answer_cut_off()
        capture.text = '```json\n{"queries": []}\n```'
        assert retry.latest_answer() == '{"queries": []}' and not retry.answer_cut_off()
    finally:
        retry._CAPTURE.reset(token)
