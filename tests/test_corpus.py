from __future__ import annotations

import json
from pathlib import Path

import pytest

from syntra_dspy.retrieval.corpus import Corpus, Document, corpus_from_documents, read_corpus
from syntra_dspy.errors import InputError


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_document_content_joins_title_and_text() -> None:
    assert Document("1", "Title", "Body").content == "Title\nBody"
    assert Document("1", "", "Body").content == "Body"
    assert Document("1", "   ", "Body").content == "Body"


def test_read_beir(fixtures: Path) -> None:
    corpus = read_corpus(fixtures / "corpus" / "scifact_head.jsonl")
    assert len(corpus) == 8
    assert corpus.ids[:3] == ["4983", "5836", "7912"]
    doc = corpus["4983"]
    assert doc.title.startswith("Microstructural development")
    assert doc.content.startswith(doc.title + "\n")
    assert "4983" in corpus and "nope" not in corpus
    assert corpus.get("nope") is None
    assert [d.doc_id for d in corpus] == corpus.ids
    with pytest.raises(KeyError, match="nope"):
        corpus["nope"]


def test_read_beir_directory(fixtures: Path, shared_data: Path) -> None:
    corpus = read_corpus(shared_data / "scifact")
    assert len(corpus) == 5183


def test_read_neuclir(fixtures: Path) -> None:
    corpus = read_corpus(fixtures / "corpus" / "csl_neuclir.jsonl", "neuclir")
    assert corpus.ids == ["cslb-dev-0000", "cslb-dev-0001", "cslb-dev-0002", "cslb-dev-0003"]
    doc = corpus["cslb-dev-0001"]
    assert doc.title == "水运工程施工项目全过程管理的有效性探索"
    assert doc.content.startswith(doc.title + "\n水运工程项目")


def test_read_tsv_two_and_three_columns(fixtures: Path) -> None:
    three = read_corpus(fixtures / "corpus" / "scifact_3col.tsv", "tsv")
    two = read_corpus(fixtures / "corpus" / "scifact_2col.tsv", "tsv")
    assert three.ids == two.ids == ["4983", "5836", "7912", "18670", "19238"]
    assert three["5836"].title == "Induction of myelodysplasia by myeloid-derived suppressor cells."
    assert two["5836"].title == "" and two["5836"].text == three["5836"].text


def test_bad_json_names_line(tmp_path: Path) -> None:
    good = json.dumps({"_id": "a", "title": "", "text": "x"})
    path = _write(tmp_path, "c.jsonl", [good, json.dumps({"_id": "b", "text": "y"}), '{"_id": "c", "text": '])
    with pytest.raises(InputError, match=r"c\.jsonl:3: not valid JSON") as info:
        read_corpus(path)
    assert info.value.line == 3 and info.value.path == str(path)


def test_missing_id_names_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.jsonl", [json.dumps({"_id": "a", "text": "x"}), json.dumps({"text": "y"})])
    with pytest.raises(InputError, match=r"c\.jsonl:2 field '_id': missing document id") as info:
        read_corpus(path)
    assert (info.value.line, info.value.field) == (2, "_id")


@pytest.mark.parametrize("record, field", [
    ({"_id": "", "text": "x"}, "_id"),
    ({"_id": ["a"], "text": "x"}, "_id"),
    ({"_id": "a", "text": 3}, "text"),
    ({"_id": "a", "title": None}, "text"),
])
def test_wrong_types(tmp_path: Path, record: dict, field: str) -> None:
    path = _write(tmp_path, "c.jsonl", [json.dumps(record)])
    with pytest.raises(InputError) as info:
        read_corpus(path)
    assert (info.value.line, info.value.field) == (1, field)


def test_duplicate_id(tmp_path: Path) -> None:
    rows = [json.dumps({"_id": i, "text": "t"}) for i in ("a", "b", "a")]
    with pytest.raises(InputError, match="duplicate document id 'a'") as info:
        read_corpus(_write(tmp_path, "c.jsonl", rows))
    assert (info.value.line, info.value.field) == (3, "_id")


def test_neuclir_errors(tmp_path: Path) -> None:
    ok = {"doc_id": "csl-1", "title": "t", "abstract": "a", "keywords": ["k"]}
    bad = dict(ok, doc_id="csl-2", keywords="k")
    with pytest.raises(InputError) as info:
        read_corpus(_write(tmp_path, "n.jsonl", [json.dumps(ok), json.dumps(bad)]), "neuclir")
    assert (info.value.line, info.value.field) == (2, "keywords")
    with pytest.raises(InputError) as info:
        read_corpus(_write(tmp_path, "m.jsonl", [json.dumps({"title": "t", "abstract": "a"})]), "neuclir")
    assert info.value.field == "doc_id"


def test_tsv_wrong_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.tsv", ["id\ttext", "a\thello", "b\thello\textra", "c\tfine"])
    with pytest.raises(InputError, match=r"c\.tsv:3 field 'columns': found 3 tab-separated columns") as info:
        read_corpus(path, "tsv")
    assert info.value.line == 3
    with pytest.raises(InputError, match="expected 2 or 3"):
        read_corpus(_write(tmp_path, "d.tsv", ["only-one-column"]), "tsv")
    with pytest.raises(InputError, match="empty document id"):
        read_corpus(_write(tmp_path, "e.tsv", ["a\tx", "\ty"]), "tsv")


def test_empty_and_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no documents"):
        read_corpus(_write(tmp_path, "empty.jsonl", ["", "  "]))
    with pytest.raises(InputError, match="not found"):
        read_corpus(tmp_path / "absent.jsonl")
    with pytest.raises(InputError, match="unknown corpus format"):
        read_corpus(tmp_path / "absent.jsonl", "xml")
    with pytest.raises(InputError, match="no documents"):
        Corpus([])


def test_fingerprint_stable_and_sensitive(fixtures: Path) -> None:
    a = read_corpus(fixtures / "corpus" / "scifact_head.jsonl")
    b = read_corpus(fixtures / "corpus" / "scifact_head.jsonl")
    assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 64
    docs = list(a)
    changed = corpus_from_documents(docs[:-1] + [Document(docs[-1].doc_id, docs[-1].title, docs[-1].text + ".")])
    assert changed.fingerprint != a.fingerprint
    reordered = corpus_from_documents(docs[::-1])
    assert reordered.fingerprint != a.fingerprint
    # The field boundary matters: moving text between title and body is a different corpus.
    assert corpus_from_documents([("1", "ab", "c")]).fingerprint != \
        corpus_from_documents([("1", "a", "bc")]).fingerprint


def test_corpus_from_documents_tuples() -> None:
    c = corpus_from_documents([("1", "body one"), ("2", "T", "body two")])
    assert c["1"] == Document("1", "", "body one") and c["2"].content == "T\nbody two"
    with pytest.raises(InputError, match="duplicate"):
        corpus_from_documents([("1", "x"), ("1", "y")])
