"""One corpus context per task: compile, compare and produce share it instead of rebuilding it."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import MINI_TASK, scripted_roles
from test_compare_helpers import FastEncoder, write_heldout_beir

from syntra_dspy.comparison import HeldoutOptions, compare_strategies
from syntra_dspy.compiler import compile_task, corpus_context
from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers import CompileSettings
from syntra_dspy.production import produce
from syntra_dspy.retrieval.index import CorpusIndex
from syntra_dspy.task import load_task
from syntra_dspy.testing import SyntraBrain, scripted_lm

SETTINGS = CompileSettings(sample_docs=3, selection_target=20)


@pytest.fixture
def counted(monkeypatch):
    """Counts corpus reads, encoder loads, index loads/builds and diverse selections."""
    import syntra_dspy.compiler as compiler
    import syntra_dspy.retrieval.context as context

    calls: Counter = Counter()

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(compiler, "read_corpus", counting("read_corpus", compiler.read_corpus))
    monkeypatch.setattr(compiler, "load_encoder", counting("load_encoder", lambda *a, **k: FastEncoder()))
    monkeypatch.setattr(context, "select_diverse", counting("select_diverse", context.select_diverse))
    build = CorpusIndex.load_or_build.__func__
    monkeypatch.setattr(CorpusIndex, "load_or_build",
                        classmethod(lambda cls, *a, **k: counting("index", build)(cls, *a, **k)))
    return calls


def test_compare_builds_corpus_encoder_index_and_selection_once(tmp_path, counted):
    roles, _ = scripted_roles()
    qrels = write_heldout_beir(tmp_path / "heldout")
    result = compare_strategies(MINI_TASK, strategies="none,self-improve", out=tmp_path / "out", lms=roles,
                                index_dir=tmp_path / "index", settings=SETTINGS,
                                heldout=HeldoutOptions(docs=3, qrels=qrels), chart=False)
    assert len(result.strategies) == 2
    # two compiles and the held-out material, from one corpus read, encoder, index and selection
    assert counted == {"read_corpus": 1, "load_encoder": 1, "index": 1, "select_diverse": 1}


def test_compile_takes_a_loaded_encoder_and_records_it(tmp_path):
    roles, _ = scripted_roles()
    artifact = compile_task(MINI_TASK, strategy="none", out=tmp_path / "artifacts", lms=roles,
                            index_dir=tmp_path / "index", settings=SETTINGS, encoder=FastEncoder())
    assert artifact.meta.fingerprints.encoder == "bow@tests"
    assert artifact.manifest["encoder"]["model"] == "bow" and artifact.manifest["encoder"]["id"] == "bow@tests"


def test_produce_runs_over_a_given_context_and_refuses_it_twice(tmp_path, counted):
    spec = load_task(MINI_TASK)
    context, _ = corpus_context(spec, index_dir=tmp_path / "index")
    roles, _ = scripted_roles()
    artifact = compile_task(spec, strategy="none", out=tmp_path / "artifacts", lms=roles, settings=SETTINGS,
                            context=context)
    summary = produce(artifact.path, tmp_path / "run.db", context=context, docs=2,
                      generator=scripted_lm(SyntraBrain()), progress=False)
    assert summary.processed == 2
    assert counted["read_corpus"] == 1 and counted["load_encoder"] == 1 and counted["index"] == 1
    with pytest.raises(ConfigError, match="either a corpus context or"):
        produce(artifact.path, tmp_path / "other.db", context=context, encoder="all-MiniLM-L6-v2", progress=False)
    with pytest.raises(ConfigError, match="either a corpus context or"):
        compile_task(spec, strategy="none", out=tmp_path / "artifacts", lms=roles, context=context,
                     index_dir=tmp_path / "index")
