"""Monolingual Chinese (issue 13): Chinese search requests over Chinese CSL abstracts, through the same pieces as
the cross-language task.

templates/neuclirtech-zho.yaml (query and document language zh) is compiled once (self-improve, so the trials
extract, write and label too) with a scripted brain whose answers depend on the prompt: it extracts the Chinese
glossary terms found in a document, writes Chinese queries "<term>的<aspect>" from the blueprints, and labels a
candidate relevant when it contains the query's term (for an example query, any glossary term in it). The
character-hashing encoder stands in for the multilingual one, so no model is loaded. Variants of the brain write
English where Chinese is asked for, to show what the language check does with such a query in a zh task.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import CharEncoder, compile_template

from syntra_dspy.compiler import check_task_encoder
from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.lexical import BM25Retriever
from syntra_dspy.languages import check_language
from syntra_dspy.production import RunStore, export_records, produce
from syntra_dspy.task import EncoderSpec, load_task
from syntra_dspy.testing import GUIDANCE_MARK, SyntraBrain, scripted_lm

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "templates" / "neuclirtech-zho.yaml"
# Chinese terms of the fixture's abstracts, with the English a writer that ignores the language rule would use.
TERMS = {"锂离子电池": "lithium-ion battery", "神经网络": "neural network", "豆浆": "soy milk", "大豆": "soybean",
         "桥梁": "bridge", "地震": "earthquake", "茶叶": "tea", "农药": "pesticide", "电池": "battery"}
# Two aspects with no character in common, so a document's two queries are never near-duplicates.
ASPECTS = {"加工工艺与产品品质": "processing and product quality", "试验数据和性能评价": "test data and performance"}
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]{4}")


class ZhBrain(SyntraBrain):
    """SyntraBrain for Chinese queries over Chinese documents (see the module docstring).

    ``english_writes``: how many write calls (first tries and retries alike) are answered in English (-1: all);
    ``rewrites_into_chinese``: whether a rewrite asked to translate a query into Chinese does so (else it hands the
    English query back). Every write's retry note and every rewrite's problem are kept."""

    def __init__(self, *, english_writes: int = 0, rewrites_into_chinese: bool = True, **kw) -> None:
        super().__init__(**kw)
        self.english_writes = english_writes
        self.rewrites_into_chinese = rewrites_into_chinese
        self.retry_notes: list[str] = []
        self.problems: list[str] = []
        self.english: dict[str, str] = {}  # English query written -> the Chinese one it stands for

    def extract(self, system, inputs):
        doc = inputs.get("document", "")
        found = [zh for zh in TERMS if zh in doc][:3]
        if not found:  # a document without glossary terms: its first run of four characters
            found = [m.group(0) for m in _HAN_RUN.finditer(doc)][:1] or ["工程技术"]
        kind = "relationship" if GUIDANCE_MARK in system else "entity"  # what the scripted verifier wants
        return {"identifiers": [{"kind": kind, "text": t} for t in found],
                "attributes": [{"dimension": "方面", "options": list(ASPECTS)}]}

    def write(self, system, inputs):
        self.retry_notes.append(inputs.get("retry_note", ""))
        lines = re.findall(r"^(\d+)\. identifier: ([^;]+);(.*)$", inputs.get("blueprints", ""), re.MULTILINE)
        english = self.english_writes != 0 and all(ident.strip() in TERMS for _, ident, _ in lines)
        if english and self.english_writes > 0:
            self.english_writes -= 1
        queries = []
        for n, ident, rest in lines:
            term, aspect = ident.strip(), rest.split(" = ")[-1].strip()
            zh = f"{term}的{aspect}"
            if english:
                en = f"{TERMS[term]} {ASPECTS[aspect]}"
                self.english[en] = zh
                queries.append({"blueprint": int(n), "query": en})
            else:
                queries.append({"blueprint": int(n), "query": zh})
        return {"queries": queries}

    def rewrite(self, inputs):
        self.problems.append(inputs.get("problem", ""))
        query = inputs.get("query", "").strip()
        if self.rewrites_into_chinese and "translate it into Chinese" in inputs.get("problem", ""):
            return {"rewritten": self.english.get(query, query)}
        return {"rewritten": query}

    def annotate(self, system, inputs):
        query = inputs.get("query", "")
        term, _, aspect = query.rpartition("的")  # a query of this brain: its blueprint's identifier
        terms = [term] if aspect in ASPECTS else [zh for zh in TERMS if zh in query]  # else an example query
        docs = re.findall(r"\[doc_id (\d+)\] (.*?)(?=\n\n\[doc_id \d+\]|\Z)", inputs.get("candidates", ""), re.DOTALL)
        return {"judgements": [{"doc_id": int(n), "score": 2 if any(t in text for t in terms) else 1}
                               for n, text in docs]}


@pytest.fixture(scope="module")
def zho(tmp_path_factory):
    """(artifact, index dir, corpus, the brain that compiled it) for the monolingual Chinese template."""
    brain = ZhBrain()
    artifact, index, corpus = compile_template(TEMPLATE, tmp_path_factory.mktemp("zho"), brain, strategy="self-improve")
    return artifact, index, corpus, brain


def run(zho, store, brain, **kw):
    art, index, _, _ = zho
    kw.setdefault("docs", 4)
    return produce(art.path, store, generator=scripted_lm(brain), encoder=CharEncoder(), index_dir=index,
                   queries_per_doc=2, top_k=5, chunk_size=5, concurrency=2, progress=False, **kw)


def stored(store):
    """(queries, translations, meta, failures, restated_from by query id) of a run store."""
    with RunStore.open(store, readonly=True) as r:
        restated = dict(r.rows("SELECT query_id, restated_from FROM queries"))
        return list(r.iter_queries()), r.translations(), r.meta(), r.failures(), restated


def test_the_template_compiles_a_monolingual_chinese_task(zho):
    artifact, _, _, brain = zho
    definition = artifact.program.state.task_definition
    assert (definition.query_language, definition.document_language) == ("zh", "zh")
    assert not definition.cross_language
    recorded = artifact.manifest["task_definition"]
    assert (recorded["query_language"], recorded["document_language"]) == ("zh", "zh")
    assert artifact.manifest["task_definition_source"] == "given"
    assert artifact.manifest["encoder"]["model"] == "embeddinggemma-300m"
    # the writer is told Chinese, and the examples' form is counted in characters
    assert artifact.program.query_rule().startswith("Write every query in Chinese (Simplified), as a few search terms")
    form = artifact.program.query_form()
    assert form.unit == "characters" and form.kind == "plain"
    assert "(written in Chinese (Simplified))" in artifact.program.instructions()["write"]
    # the trials wrote Chinese queries that passed the code checks; nothing was translated
    loops = {loop["name"]: loop for loop in artifact.manifest["history"]}
    assert all(loop["passed"] for loop in loops.values()), {n: loop["stop_reason"] for n, loop in loops.items()}
    trial = loops["query_instruction"]["attempts"][-1]["details"]
    assert trial["queries"] and all(check_language(q, "zh") is None for q in trial["queries"])
    assert trial["measures"]["rejections"] == [] and trial["measures"]["form_fidelity"] == 1.0
    assert trial["form"]["unit"] == "characters"
    assert brain.calls.get("extract") and brain.calls.get("write") and brain.calls.get("annotate")
    assert "translate" not in brain.calls and "rewrite" not in brain.calls


def test_an_english_only_encoder_is_refused_for_chinese_documents_in_either_task():
    """What the template's encoder comment says: compile refuses the English-only default for the monolingual zh
    task as for the cross-language one, before anything is loaded, naming the setting to change."""
    minilm = EncoderSpec(model="all-MiniLM-L6-v2")
    with pytest.raises(ConfigError, match="queries and documents are in zh") as err:
        check_task_encoder(load_task(TEMPLATE), minilm, (), source="zho")
    assert err.value.field == "encoder"
    with pytest.raises(ConfigError, match="cross-language"):
        check_task_encoder(load_task(REPO / "templates" / "neuclirtech-clir.yaml"), minilm, (), source="clir")
    check_task_encoder(load_task(TEMPLATE), EncoderSpec(model="embeddinggemma-300m"), (), source="zho")


def test_production_writes_chinese_queries_and_exports_chinese_records(zho, tmp_path):
    store = tmp_path / "run.db"
    brain = ZhBrain()
    summary = run(zho, store, brain)
    queries, translations, meta, failures, restated = stored(store)
    assert summary.queries == len(queries) == 8 and failures == []
    for q in queries:
        assert check_language(q["text"], "zh") is None, q["text"]
        assert re.fullmatch(r"[\u4e00-\u9fff]+的(加工工艺与产品品质|试验数据和性能评价)", q["text"])
        assert len(q["candidates"]) == 5 and all(label is not None for _, _, label in q["candidates"])
    # nothing is translated: no translation call, no translation table rows, no restated queries
    assert "translate" not in brain.calls and translations == {}
    assert not any(restated.values()) and "rewrite" not in brain.calls
    assert meta["settings"]["candidates"] == {"source": "dense"}
    assert meta["task_definition"]["query_language"] == meta["task_definition"]["document_language"] == "zh"
    out = tmp_path / "train.jsonl"
    exported = export_records(store, out)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert exported.records == len(records) > 0
    for rec in records:
        assert check_language(rec["query"], "zh") is None
        term = rec["query"].rsplit("的", 1)[0]
        assert rec["pos"] and all(check_language(p, "zh") is None and term in p for p in rec["pos"])
        assert rec["neg"] and all(term not in n for n in rec["neg"])
        assert "written in" not in rec["instruction"]  # a same-language task names no document language


def test_bm25_candidates_read_the_chinese_query_as_written(zho, tmp_path):
    """``bm25-translated`` on a same-language task: BM25 over jieba-segmented abstracts, queries not translated."""
    store = tmp_path / "run.db"
    brain = ZhBrain()
    run(zho, store, brain, candidates="bm25-translated", docs=2)
    queries, translations, meta, failures, _ = stored(store)
    assert queries and failures == [] and translations == {} and "translate" not in brain.calls
    bm25 = BM25Retriever(zho[2], language="zh")
    for q in queries:
        expected = sorted(bm25.search({"q": q["text"]}, k=5)["q"].items(), key=lambda kv: (-kv[1], kv[0]))
        assert [doc for _, doc, _ in q["candidates"]] == [doc for doc, _ in expected]
    assert meta["settings"]["candidates"] == {"source": "bm25-translated", "bm25_language": "zh", "translation": None}
    from syntra_dspy.production.export import compute_stats, format_stats

    report = format_stats(compute_stats(store))
    assert "candidates BM25 over zh documents\n" in report  # no "N of N queries translated"
    assert "translated into the documents' language" not in report  # BM25 ranks the queries as written


def test_an_english_query_is_rejected_and_rewritten_into_chinese(zho, tmp_path):
    store = tmp_path / "run.db"
    brain = ZhBrain(english_writes=1)  # one document's write answered in English
    run(zho, store, brain, docs=2)
    queries, translations, _, failures, restated = stored(store)
    assert len(brain.english) == 2 and brain.calls["rewrite"] == 2
    assert all("not written in Chinese" in p and "translate it into Chinese" in p for p in brain.problems)
    assert len(queries) == 4 and failures == [] and translations == {}
    assert all(check_language(q["text"], "zh") is None for q in queries)
    # the two rewritten queries are stored in Chinese, each with the English query it replaces
    rewritten = {q["text"]: restated[q["query_id"]] for q in queries if restated[q["query_id"]]}
    assert rewritten == {zh: en for en, zh in brain.english.items()}
    assert all(check_language(en, "zh") == "is not written in Chinese (Simplified)" for en in rewritten.values())


def test_an_english_query_left_english_by_the_rewrite_is_written_again(zho, tmp_path):
    store = tmp_path / "run.db"
    brain = ZhBrain(english_writes=1, rewrites_into_chinese=False)
    run(zho, store, brain, docs=2)
    queries, _, _, failures, restated = stored(store)
    assert len(queries) == 4 and failures == [] and not any(restated.values())
    assert all(check_language(q["text"], "zh") is None for q in queries)
    retries = [n for n in brain.retry_notes if n]  # the rewrite failed, so the write call is retried with why
    assert len(retries) == 1
    assert "is not written in Chinese (Simplified); write it in the requested language" in retries[0]
    assert brain.calls["rewrite"] == 2 and len(brain.english) == 2


def test_a_writer_that_stays_english_fails_the_document_at_the_write_stage(zho, tmp_path):
    store = tmp_path / "run.db"
    brain = ZhBrain(english_writes=-1, rewrites_into_chinese=False)
    summary = run(zho, store, brain, docs=2)
    queries, _, _, failures, _ = stored(store)
    assert summary.queries == 0 and queries == []
    assert len(failures) == 2 and {f["stage"] for f in failures} == {"write"}
    assert all("not written in Chinese" in f["error"] for f in failures)
    assert brain.calls["write"] == 2 * 3  # each document: the first try and two retries
    assert export_records(store, tmp_path / "train.jsonl").records == 0
