"""Candidates across languages: the query-translation step and production's ``bm25-translated`` candidates.

The cross-language template (English queries, Chinese NeuCLIRTech fixture abstracts) is compiled once with a
scripted brain whose answers depend on the prompt: it extracts English identifiers for the Chinese terms of its
glossary found in a document, writes English queries about them, translates with the glossary, and labels a
candidate relevant when it contains the Chinese term of a query's identifier. A character-hashing encoder
stands in for the multilingual one, so no model is loaded.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.lexical import BM25Retriever
from syntra_dspy.languages import check_language
from syntra_dspy.lm.scripted import ScriptedCall
from syntra_dspy.production import RunStore, export_records, produce
from syntra_dspy.programs.translation import QueryTranslator, check_translation, clean_translation
from syntra_dspy.testing import SyntraBrain, fields_of, scripted_lm
from syntra_dspy.programs.validation import OutputRejected

from helpers import CharEncoder, compile_template

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "templates" / "neuclirtech-clir.yaml"
GLOSSARY = {"soy milk": "豆浆", "soybean": "大豆", "bridge": "桥梁", "earthquake": "地震", "tea": "茶叶",
            "lithium-ion battery": "锂离子电池", "battery": "电池", "neural network": "神经网络", "pesticide": "农药"}
ASPECTS = ["processing methods and product quality", "field trials and measured performance"]


class ClirBrain(SyntraBrain):
    """SyntraBrain for English queries over Chinese documents (see the module docstring)."""

    def __init__(self, **kw) -> None:
        super().__init__(glossary=kw.pop("glossary", GLOSSARY), **kw)
        self.notes: list[str] = []

    def extract(self, system, inputs):
        doc = inputs.get("document", "")
        found = [en for en, zh in GLOSSARY.items() if zh in doc][:3] or ["technical research"]
        return {"identifiers": [{"kind": "entity", "text": en} for en in found],
                "attributes": [{"dimension": "aspect", "options": ASPECTS}]}

    def write(self, system, inputs):
        lines = re.findall(r"^(\d+)\. identifier: ([^;]+);(.*)$", inputs.get("blueprints", ""), re.MULTILINE)
        return {"queries": [{"blueprint": int(n), "query": f"{ident.strip()} {rest.split(' = ')[-1].strip()} in "
                                                           "published research"} for n, ident, rest in lines]}

    def annotate(self, system, inputs):
        terms = [zh for en, zh in GLOSSARY.items() if en in inputs.get("query", "")]
        docs = re.findall(r"\[doc_id (\d+)\] (.*?)(?=\n\n\[doc_id \d+\]|\Z)", inputs.get("candidates", ""), re.DOTALL)
        return {"judgements": [{"doc_id": int(n), "score": 2 if any(t in text for t in terms) else 1}
                               for n, text in docs]}

    def translate(self, inputs):
        self.notes.append(inputs.get("retry_note", ""))
        return super().translate(inputs)


class EnglishFirstBrain(ClirBrain):
    """Answers every first translation try in English (as small models do), then follows the repair note."""

    def translate(self, inputs):
        if not inputs.get("retry_note"):
            self.notes.append("")
            return {"translation": inputs.get("text", "")}
        return super().translate(inputs)


@pytest.fixture(scope="module")
def clir(tmp_path_factory):
    """(artifact path, index dir, corpus) of the cross-language template compiled with the scripted brain."""
    artifact, index, corpus = compile_template(TEMPLATE, tmp_path_factory.mktemp("clir"), ClirBrain())
    return artifact.path, index, corpus


def run(clir, store, brain, **kw):
    art, index, _ = clir
    kw.setdefault("docs", 4)
    return produce(art, store, generator=scripted_lm(brain), encoder=CharEncoder(), index_dir=index,
                   queries_per_doc=2, top_k=5, chunk_size=5, concurrency=2, progress=False, **kw)


def stored_queries(store):
    with RunStore.open(store, readonly=True) as r:
        return list(r.iter_queries()), r.translations(), r.meta(), r.failures()


# -- the translation step -------------------------------------------------------------------------------------


def test_a_translation_is_cleaned_and_checked_in_code():
    assert clean_translation(' Translation: "大豆 豆浆" ') == "大豆 豆浆"
    assert check_translation("soy milk", "「大豆豆浆」", "zh") == "大豆豆浆"
    for answer, why in (("soy milk", "not written in Chinese"), ("", "empty"), ("大豆\n或者豆浆", "one line"),
                        ("大豆" * 60, "much longer")):
        with pytest.raises(OutputRejected, match=why):
            check_translation("soy milk", answer, "zh")
    with pytest.raises(OutputRejected, match="untranslated"):
        check_translation("heat generation in large pouch cells", "heat generation in large pouch cells", "de")


def test_the_translator_asks_in_the_user_message_and_retries_with_the_reason():
    seen: list[ScriptedCall] = []

    def responder(call: ScriptedCall):
        seen.append(call)
        return {"translation": "soybean milk" if len(seen) == 1 else "大豆豆浆"}

    import dspy

    with dspy.context(lm=scripted_lm_from(responder), adapter=dspy.JSONAdapter()):
        assert QueryTranslator("zh")("soybean milk") == "大豆豆浆"
    assert len(seen) == 2
    first, second = (fields_of(c.user) for c in seen)
    assert "Chinese" in first["target_language"] and first["retry_note"] == ""
    assert "not written in Chinese" in second["retry_note"]
    assert QueryTranslator("zh").describe()["instructions_sha256"] == \
        hashlib.sha256(QueryTranslator("zh").instructions.encode()).hexdigest()


def scripted_lm_from(responder):
    from syntra_dspy.lm.scripted import ScriptedLM

    return ScriptedLM(responder)


# -- production ------------------------------------------------------------------------------------------------


def test_translated_bm25_candidates_are_recorded_with_each_translation(clir, tmp_path):
    store = tmp_path / "run.db"
    brain = ClirBrain()
    summary = run(clir, store, brain, candidates="bm25-translated")
    queries, translations, meta, failures = stored_queries(store)
    assert summary.queries == len(queries) >= 6 and not [f for f in failures if f["stage"] == "translate"]
    assert brain.calls["translate"] == len(queries)  # once per query
    assert set(translations) == {q["query_id"] for q in queries}
    bm25 = BM25Retriever(clir[2], language="zh")
    for q in queries:
        zh = translations[q["query_id"]]
        assert check_language(zh, "zh") is None and check_language(q["text"], "en") is None
        expected = sorted(bm25.search({"q": zh}, k=5)["q"].items(), key=lambda kv: (-kv[1], kv[0]))
        assert [doc for _, doc, _ in q["candidates"]] == [doc for doc, _ in expected]
    record = meta["settings"]["candidates"]
    assert record["source"] == "bm25-translated" and record["bm25_language"] == "zh"
    assert record["translation"]["target_language"] == "zh" and len(record["translation"]["instructions_sha256"]) == 64
    assert meta["identity"]["candidates"] == "bm25-translated"
    assert sum(q["source_rank"] is not None for q in queries) >= len(queries) // 2  # the source is usually found
    from syntra_dspy.production.export import compute_stats, format_stats

    report = format_stats(compute_stats(store))
    assert f"candidates BM25 over zh documents; {len(queries)} of {len(queries)} queries translated" in report
    assert "of queries (bm25-translated candidates)" in report
    with pytest.raises(ConfigError, match="candidates='bm25-translated', not 'dense'"):
        run(clir, store, ClirBrain(), candidates="dense")


def test_a_translation_in_the_wrong_language_is_retried_with_the_reason(clir, tmp_path):
    brain = EnglishFirstBrain()
    run(clir, tmp_path / "run.db", brain, candidates="bm25-translated", docs=2)
    queries, translations, _, _ = stored_queries(tmp_path / "run.db")
    assert len(translations) == len(queries) > 0
    assert brain.notes.count("") == len(queries)  # each query: one rejected first answer ...
    assert all("Chinese" in n for n in brain.notes if n)  # ... and a retry that says why


def test_a_translation_that_stays_invalid_is_recorded_and_the_query_kept(clir, tmp_path):
    store = tmp_path / "run.db"
    run(clir, store, ClirBrain(glossary={}), candidates="bm25-translated", docs=2)  # never translates
    queries, translations, _, failures = stored_queries(store)
    failed = [f for f in failures if f["stage"] == "translate"]
    assert translations == {} and len(failed) == len(queries) > 0
    assert {f["query_id"] for f in failed} == {q["query_id"] for q in queries}
    assert all(q["candidates"] == [] for q in queries)
    with RunStore.open(store, readonly=True) as r:
        assert r.document_counts()["partial"] == 2  # --retry-failed redoes them
    assert export_records(store, tmp_path / "train.jsonl", include_partial=True).records == 0
    # a retry with a translator that works translates, retrieves and labels the same queries, writing nothing new
    brain = ClirBrain()
    run(clir, store, brain, candidates="bm25-translated", docs=2, retry_failed=True)
    again, translations, _, failures = stored_queries(store)
    assert [(q["query_id"], q["text"]) for q in again] == [(q["query_id"], q["text"]) for q in queries]
    assert set(translations) == {q["query_id"] for q in queries} and all(q["candidates"] for q in again)
    assert not {"extract", "plan", "write"} & set(brain.calls) and failures == []
    with RunStore.open(store, readonly=True) as r:
        assert r.document_counts()["done"] == 2


def test_dense_candidates_stay_the_default_and_translate_nothing(clir, tmp_path):
    brain = ClirBrain()
    run(clir, tmp_path / "run.db", brain, docs=2)
    queries, translations, meta, _ = stored_queries(tmp_path / "run.db")
    assert meta["settings"]["candidates"] == {"source": "dense"} and translations == {}
    assert "translate" not in brain.calls and all(len(q["candidates"]) == 5 for q in queries)


def test_the_task_files_candidates_setting_is_the_default(clir, tmp_path):
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.setup import load_inputs

    art, index, _ = clir
    assert load_inputs(art, ProduceConfig(index_dir=index), encoder=CharEncoder()).settings.candidates == "dense"
    assert load_inputs(art, ProduceConfig(index_dir=index, candidates="bm25-translated"),
                       encoder=CharEncoder()).settings.candidates == "bm25-translated"
    with pytest.raises(ConfigError, match="candidates.*'dense' or 'bm25-translated', got 'sparse'"):
        ProduceConfig(index_dir=index, candidates="sparse")


def test_produce_takes_the_candidate_source_on_the_command_line():
    from syntra_dspy.cli import build_parser

    args = build_parser().parse_args(["produce", "art", "--store", "r.db", "--candidates", "bm25-translated"])
    assert args.candidates == "bm25-translated"
    assert build_parser().parse_args(["produce", "art", "--store", "r.db"]).candidates is None  # the task file's
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "art", "--store", "r.db", "--candidates", "sparse"])
