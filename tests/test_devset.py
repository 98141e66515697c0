"""``syntra devset translate-titles``: Chinese titles become English known-item queries, with provenance.

The scripted brain translates with a glossary, so a title without glossary terms comes back in Chinese: the
language check rejects it on every try and the title is left out and listed, as a real small model's failures are.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation import load_dataset
from syntra_dspy.evaluation.devset import translate_titles
from syntra_dspy.languages import check_language
from syntra_dspy.signatures import TranslateSearchText
from syntra_dspy.testing import SyntraBrain, scripted_lm

REPO = Path(__file__).resolve().parent.parent
GLOSSARY = {"soybean": "大豆", "soy milk": "豆浆", "bridge": "桥梁", "earthquake": "地震", "tea": "茶叶",
            "pesticide residues": "农药残留", "lithium-ion battery": "锂离子电池",
            "heat analysis": "热分析",
            "phase change materials": "相变储能材料", "battery thermal management": "电池热管理"}
TITLES = {  # the template's few-shot documents are csl-100737 and csl-000803, among others
    "csl-100737": "大容量软包装锂离子电池放电过程热分析",
    "csl-000803": "相变储能材料在电池热管理系统中的应用研究进展",
    "csl-000330": "大豆不同前处理方式对豆浆品质的影响",
    "csl-000431": "云南地区地震的桥梁震害",
    "csl-100878": "快速检测茶叶中农药残留",
    "csl-000001": "水运工程施工项目全过程管理的有效性探索",  # no glossary term: stays Chinese,
                                                             # refused
    "csl-000002": "桥梁与茶叶",
}
DESCRIPTION = {"role": "generator", "model": "scripted", "temperature": 0.0}


@pytest.fixture
def source(tmp_path):
    root = tmp_path / "titles"
    (root / "qrels").mkdir(parents=True)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q-{d}", "text": t}, ensure_ascii=False) + "\n"
                                                for d, t in TITLES.items()), encoding="utf-8")
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": f"摘要{t}"},
                                                          ensure_ascii=False) + "\n" for d, t in TITLES.items()),
                                       encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"q-{d}\t{d}\t1\n" for d in TITLES))
    return root


def build(source, out, brain=None, **kw):
    brain = brain or SyntraBrain(glossary=GLOSSARY)
    return translate_titles(source, out, lm=scripted_lm(brain), lm_description=DESCRIPTION, **kw), brain


def test_titles_become_checked_english_queries_with_their_qrels(source, tmp_path):
    out = tmp_path / "dev"
    summary, brain = build(source, out, exclude_docs=["csl-100737", "csl-000803"])
    assert summary.excluded == ["q-csl-000803", "q-csl-100737"]
    assert summary.failed.keys() == {"q-csl-000001"} and "not written in English" in summary.failed["q-csl-000001"]
    assert brain.calls["translate"] == 4 + 3  # four titles once, the refused one three times
    ds = load_dataset(f"beir:{out}:test")
    assert sorted(ds.queries) == ["q-csl-000002", "q-csl-000330", "q-csl-000431", "q-csl-100878"]
    assert ds.queries["q-csl-000330"] == "soybean soy milk"
    assert all(check_language(q, "en") is None for q in ds.queries.values())
    assert ds.qrels == {q: {q[2:]: 1} for q in ds.queries}
    assert ds.query_language == "en" and ds.language == "zh" and ds.cross_language
    assert (out / "corpus.jsonl").is_symlink() and len(ds.corpus) == len(TITLES)  # the whole corpus is searched
    rows = [json.loads(line) for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["_id"]: r["source_text"] for r in rows}["q-csl-000431"] == TITLES["csl-000431"]


def test_provenance_records_the_exact_prompt_model_and_what_the_set_is(source, tmp_path):
    build(source, tmp_path / "dev", exclude_docs=["csl-100737"])
    prov = json.loads((tmp_path / "dev" / "provenance.json").read_text(encoding="utf-8"))
    assert "machine-translated, not human" in prov["what"] and prov["can_show"] and prov["cannot_show"]
    assert prov["model"] == DESCRIPTION and prov["created_at"][:2] == "20"
    translation = prov["translation"]
    assert translation["instructions"].startswith(TranslateSearchText.__doc__.split("\n")[0])
    user = next(m["content"] for m in translation["prompt_messages"] if m["role"] == "user")
    assert "{title}" in user and "English (en)" in user
    assert prov["excluded"] == {"documents": ["csl-100737"], "queries": ["q-csl-100737"]}
    assert list(prov["failed"]) == ["q-csl-000001"] and prov["queries"] == 5


def test_a_rerun_resumes_without_translating_again(source, tmp_path):
    out = tmp_path / "dev"
    build(source, out)
    again, brain = build(source, out)
    assert again.translated_now == 0 and brain.calls == {} and again.queries == 6
    with pytest.raises(ConfigError, match="another model, prompt or language"):
        build(source, out, target_language="de")


def test_a_limit_takes_a_seeded_sample(source, tmp_path):
    first, _ = build(source, tmp_path / "a", limit=3, seed=1)
    second, _ = build(source, tmp_path / "b", limit=3, seed=1)
    queries = lambda p: (p / "queries.jsonl").read_text(encoding="utf-8")  # noqa: E731
    assert first.queries + len(first.failed) == 3 and queries(tmp_path / "a") == queries(tmp_path / "b")


def test_a_foreign_output_folder_is_refused(source, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a dev set this command wrote"):
        build(source, tmp_path / "busy")


def test_cli_excludes_the_task_files_few_shot_documents(source, tmp_path, monkeypatch, capsys):
    from syntra_dspy.cli import main

    brain = SyntraBrain(glossary=GLOSSARY)
    monkeypatch.setattr("syntra_dspy.lm.roles.build_lm", lambda spec, role: scripted_lm(brain))
    monkeypatch.setattr("syntra_dspy.lm.roles.prepare_lm", lambda lm: None)
    template = REPO / "templates" / "neuclirtech-clir.yaml"
    assert main(["devset", "translate-titles", str(source), "--out", str(tmp_path / "dev"), "--task", str(template),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1 translated queries (2 asked of the generator this run), 5 excluded (few-shot documents), 1 failed" in out
    prov = json.loads((tmp_path / "dev" / "provenance.json").read_text(encoding="utf-8"))
    assert set(prov["excluded"]["queries"]) == {"q-csl-100737", "q-csl-000803", "q-csl-000330", "q-csl-000431",
                                                "q-csl-100878"}  # all five template documents
    assert prov["queries"] == 1  # csl-000002; csl-000001 failed the language check


SHARED_CSL = REPO.parent / "shared" / "data" / "csl-zh"


@pytest.mark.skipif(not (SHARED_CSL / "corpus.jsonl").exists(),
                    reason="../shared/data/csl-zh is not beside the checkout")
def test_the_committed_csl_dev_set_is_a_known_item_set_without_the_tasks_few_shot_documents():
    from syntra_dspy.task import load_task

    folder = REPO / "benchmarks" / "data" / "csl-en-titles"
    data = load_dataset(f"beir:{folder}:test")
    task = load_task(REPO / "examples" / "csl-zh-clir.yaml")
    few_shot = {ex.positive_id for ex in task.examples}
    assert len(data.queries) == 172 and few_shot and len(few_shot) == 5
    for qid, text in data.queries.items():
        relevant = {d for d, gain in data.qrels[qid].items() if gain > 0}
        assert len(relevant) == 1 and relevant <= set(data.corpus.ids) and not relevant & few_shot
        assert check_language(text, "en") is None, (qid, text)
    provenance = json.loads((folder / "provenance.json").read_text())
    assert provenance["what"].startswith("machine-translated, not human")
    assert provenance["model"]["model"] == "embedded/qwen2.5-coder-1.5b"
    # the same queries translated back into Chinese, for BM25 over the documents' language
    back = load_dataset(f"beir:{REPO / 'benchmarks' / 'data' / 'csl-zh-backtranslated'}:test")
    assert len(back.queries) == 167 and set(back.queries) <= set(data.queries)
    assert all(back.qrels[q] == data.qrels[q] for q in back.queries)
    assert all(check_language(text, "zh") is None for text in back.queries.values())
