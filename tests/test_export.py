"""Export from a hand-built run store: record rules, options, drop reasons, formats, sidecar and stats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.production import RunStore, compute_stats, export_records, format_stats, retrieval_instruction
from syntra_dspy.production.units import Candidate, DocumentResult, Failure, QueryResult, query_id

from test_produce_support import read_jsonl

DEFINITION = {"query_type": "biomedical research claim", "doc_type": "scientific paper abstract",
              "relevance_definition": "Given a claim and an abstract, the document is relevant if it reports "
                                      "evidence that supports or refutes the claim.",
              "query_language": "en", "document_language": "en"}
#: doc -> [(query text, [(candidate id, label)])]; label None = not labelled (a failed chunk)
QUERIES = {
    "d1": [("claim one", [("d1", 3), ("a", 2), ("b", 1), ("c", 0), ("e", 1)]),  # source retrieved, positive
           ("claim two", [("a", 2), ("b", 1), ("c", 0)]),  # source not retrieved
           ("claim three", [("a", 0), ("c", 0)]),  # no positive
           ("claim four", [("a", 3), ("c", 0)]),  # no hard negative
           ("claim five", [("a", 2), ("b", 1), ("c", None)])],  # annotation incomplete
    "d2": [("Claim  ONE", [("a", 2), ("b", 1)]),  # duplicate of d1's first query
           ("claim six", [("d2", 1), ("a", 2), ("b", 1)])],  # source judged a hard negative
}


def text(doc_id: str) -> str:
    return f"text of {doc_id}"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "run.db"
    with RunStore.open(path) as run:
        run.set_meta(artifact={"version": "v123", "checksum": "c456", "task": "mini"}, task_definition=DEFINITION,
                     instruction=retrieval_instruction(DEFINITION), settings={"top_k": 5})
        run.plan(["d1", "d2", "d3"])
        session = run.begin_session(concurrency=1, generator={"model": "scripted"}, options={})
        for doc_id, queries in QUERIES.items():
            result = DocumentResult(doc_id=doc_id, features={"identifiers": [], "attributes": []})
            for pos, (q, cands) in enumerate(queries):
                qr = QueryResult(query_id(doc_id, pos), pos, q, {"identifier": "x", "choices": []},
                                 [Candidate(rank, cid, 1.0 - rank / 10, label)
                                  for rank, (cid, label) in enumerate(cands)])
                qr.source_rank = next((c.rank for c in qr.candidates if c.doc_id == doc_id), None)
                result.queries.append(qr)
                result.texts.update({c.doc_id: text(c.doc_id) for c in qr.candidates})
            result.texts[doc_id] = text(doc_id)
            if any(not q.complete for q in result.queries):
                result.status = "partial"
                result.failures.append(Failure("annotate", "output", "missing doc_id 0", query_id(doc_id, 4)))
            result.usage = {"annotate": {"calls": 3, "prompt_tokens": 30, "completion_tokens": 3, "cached": 0,
                                         "failures": 0, "seconds": 0.3}}
            run.commit(result, session)
        failed = DocumentResult(doc_id="d3")
        failed.fail("extract", "output", "no valid answer after 3 tries", {"last_answer": '{"identifiers": []}'})
        run.commit(failed, session)
        run.end_session(session, "completed")
    return path


def by_id(path):
    return {r["query_id"]: r for r in read_jsonl(path)}


def test_default_export_keeps_every_query_with_a_positive_and_a_hard_negative(store, tmp_path):
    summary = export_records(store, tmp_path / "train.jsonl")
    records = by_id(tmp_path / "train.jsonl")
    assert list(records) == ["d1#q0", "d1#q1", "d2#q1"]  # plan order, every query of a document
    assert summary.dropped == {"annotation_incomplete": 1, "no_positive": 1, "no_negative": 1, "duplicate_query": 1}
    first = records["d1#q0"]
    assert first["pos_ids"] == ["d1", "a"] and first["neg_ids"] == ["b", "e"]
    assert first["pos"] == [text("d1"), text("a")] and first["neg"] == [text("b"), text("e")]
    assert {g["doc_id"]: g["label"] for g in first["labels"]} == {"d1": 3, "a": 2, "b": 1, "c": 0, "e": 1}
    assert [g["rank"] for g in first["labels"]] == [0, 1, 2, 3, 4] and first["labels"][1]["retrieval_score"] == 0.9
    # a judge that grades nothing leaves the teacher scores empty, one per text
    assert first["pos_scores"] == [None, None] and first["neg_scores"] == [None, None]
    assert first["labels"][0]["score"] is None and first["labels"][0]["expected"] is None
    assert first["source_doc_id"] == "d1" and first["source_retrieved"] and first["source_label"] == 3
    assert first["artifact_version"] == "v123" and first["query"] == "claim one"
    assert first["instruction"] == ("Given a biomedical research claim, retrieve a scientific paper abstract that "
                                    "reports evidence that supports or refutes the claim")
    # retrieval missed the source: it is not made a positive behind the user's back
    assert records["d1#q1"]["pos_ids"] == ["a"] and not records["d1#q1"]["source_retrieved"]
    assert records["d2#q1"]["source_label"] == 1 and records["d2#q1"]["neg_ids"] == ["d2", "b"]
    meta = json.loads((tmp_path / "train.jsonl.meta.json").read_text())
    assert meta["artifact_version"] == "v123" and meta["artifact_checksum"] == "c456"
    assert meta["run_store"] == str(store.resolve()) and meta["export_options"]["negatives"] == "hard"
    assert meta["counts"]["records"] == 3 and meta["counts"]["dropped"]["duplicate_query"] == 1
    again = export_records(store, tmp_path / "again.jsonl")
    assert again.records == 3 and (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "train.jsonl").read_bytes()


def test_export_reads_a_store_that_a_run_is_writing(store, tmp_path):
    with RunStore.open(store):  # a producer holds the store (and its lock)
        assert export_records(store, tmp_path / "t.jsonl").records == 3


def test_positives_source_first(store, tmp_path):
    export_records(store, tmp_path / "t.jsonl", positives="source-first")
    records = by_id(tmp_path / "t.jsonl")
    assert records["d1#q0"]["pos_ids"] == ["d1"]  # the source was judged positive: only it
    assert records["d2#q1"]["pos_ids"] == ["a"]  # the source was not positive: all positives


def test_negatives_hard_plus_easy_tops_up_to_num_negatives(store, tmp_path):
    summary = export_records(store, tmp_path / "t.jsonl", negatives="hard+easy", num_negatives=2)
    records = by_id(tmp_path / "t.jsonl")
    assert records["d1#q0"]["neg_ids"] == ["b", "e"]  # two hard ones fill it
    assert records["d1#q1"]["neg_ids"] == ["b", "c"]  # topped up with an easy one
    assert records["d1#q3"]["neg_ids"] == ["c"]  # easy negatives make this query usable
    assert summary.dropped["no_negative"] == 0
    export_records(store, tmp_path / "one.jsonl", num_negatives=1)
    assert by_id(tmp_path / "one.jsonl")["d1#q0"]["neg_ids"] == ["b"]


def test_unretrieved_source_and_partial_queries_only_on_request(store, tmp_path):
    export_records(store, tmp_path / "t.jsonl", include_unretrieved_source=True, include_partial=True)
    records = by_id(tmp_path / "t.jsonl")
    q = records["d1#q1"]
    assert q["pos_ids"] == ["d1", "a"] and q["source_label"] is None and not q["source_retrieved"]
    assert records["d1#q4"]["pos_ids"] == ["d1", "a"] \
        and [(g["doc_id"], g["label"]) for g in records["d1#q4"]["labels"]] == [("a", 2), ("b", 1)]


def test_hf_format_loads_with_load_from_disk_and_the_training_loader(store, tmp_path):
    from datasets import load_from_disk

    from syntra_dspy.training.data import load_training_data

    export_records(store, tmp_path / "hf", format="hf")
    ds = load_from_disk(str(tmp_path / "hf"))
    assert ds.num_rows == 3 and ds[0]["pos_ids"] == ["d1", "a"]
    assert ds[0]["labels"][0] == {"doc_id": "d1", "rank": 0, "label": 3, "score": None, "expected": None,
                                  "probs": None, "bm25": None, "retrieval_score": 1.0}
    data = load_training_data(tmp_path / "hf")
    assert len(data) == 3 and data.provenance()["artifact_version"] == "v123"
    assert data.provenance()["artifact_checksum"] == "c456"
    export_records(store, tmp_path / "hf", format="hf", num_negatives=1, overwrite=True)  # replaces an earlier export
    assert load_from_disk(str(tmp_path / "hf"))[0]["neg_ids"] == ["b"]


def test_stats_count_labels_sources_failures_and_drop_reasons(store):
    stats = compute_stats(store)
    assert stats["documents"] == {"planned": 3, "pending": 0, "done": 1, "partial": 1, "failed": 1}
    assert stats["queries"] == 7 and stats["records"] == 3
    assert stats["labels"] == {"3": 2, "2": 5, "1": 7, "0": 5}
    assert stats["classes"] == {"positive": 7, "hard_negative": 7, "easy_negative": 5}
    assert stats["candidates"]["unlabelled"] == 1
    assert stats["source"] == {"retrieved": 2, "not_retrieved": 5, "judged_positive": 1}
    assert stats["failures"]["by_stage"] == {"annotate": 1, "extract": 1}
    assert stats["usage"]["annotate"]["calls"] == 6 and stats["usage"]["annotate"]["latency_s"] == 0.1
    text = format_stats(stats)
    assert "records    3 exportable" in text and "duplicate_query 1" in text and "extract 1" in text


def test_the_sidecar_and_stats_name_every_code_version_a_resumed_run_wrote_with(tmp_path):
    path = tmp_path / "run.db"
    old = {"syntra_dspy": "0.1.0", "git_commit": "a" * 40, "git_dirty": False}
    new = {"syntra_dspy": "0.1.0", "git_commit": "b" * 40, "git_dirty": True}
    with RunStore.open(path) as run:
        run.set_meta(artifact={"version": "v1", "checksum": "c1", "task": "mini"}, task_definition=DEFINITION,
                     instruction=retrieval_instruction(DEFINITION), settings={}, generator={"model": "scripted"})
        run.plan(["d1", "d2", "d3"])
        for code, docs in ((old, ["d1"]), (None, []), (new, ["d2", "d3"])):
            session = run.begin_session(concurrency=1, generator={"model": "scripted"},
                                        options={"code": code} if code else {})
            for doc_id in docs:
                failed = DocumentResult(doc_id=doc_id)
                failed.fail("extract", "output", "no valid answer", None)
                run.commit(failed, session)
            run.end_session(session, "completed")
    export_records(path, tmp_path / "t.jsonl")
    made_by = json.loads((tmp_path / "t.jsonl.meta.json").read_text())["provenance"]
    assert made_by["generator"] == {"model": "scripted"}
    assert [(v["git_commit"], v["sessions"], v["documents"], v["uncommitted_changes"])
            for v in made_by["code_versions"]] == [("a" * 40, 1, 1, False), (None, 1, 0, False),
                                                   ("b" * 40, 1, 2, True)]
    assert [s["code"] for s in made_by["sessions"]] == [old, None, new]
    line = next(x for x in format_stats(compute_stats(path)).splitlines() if x.startswith("code"))
    assert line == ("code       3 versions over 3 sessions: aaaaaaa (1 documents), unrecorded (0 documents), "
                    "bbbbbbb with uncommitted changes (2 documents)")


def test_options_are_checked(store, tmp_path):
    with pytest.raises(ConfigError, match="negatives"):
        export_records(store, tmp_path / "t.jsonl", negatives="easy")
    with pytest.raises(ConfigError, match="num_negatives"):
        export_records(store, tmp_path / "t.jsonl", num_negatives=0)
    with pytest.raises(ConfigError, match="format"):
        export_records(store, tmp_path / "t.jsonl", format="csv")


def test_an_export_config_or_its_settings_as_keywords_give_the_same_files(store, tmp_path):
    from syntra_dspy.production import ExportConfig

    config = ExportConfig(negatives="hard+easy", num_negatives=2, dev_split=0.5, seed=3)
    export_records(store, tmp_path / "a" / "t.jsonl", config)
    export_records(store, tmp_path / "b" / "t.jsonl", negatives="hard+easy", num_negatives=2, dev_split=0.5, seed=3)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["t.dev.jsonl", "t.jsonl", "t.jsonl.README.md", "t.jsonl.meta.json"]
    for name in names:  # the same bytes, but for the output's own path in the card and the sidecar
        a, b = ((tmp_path / side / name).read_text(encoding="utf-8") for side in "ab")
        assert a.replace(str(tmp_path / "a"), str(tmp_path / "b")) == b, name
    with pytest.raises(ConfigError, match="not both") as info:
        export_records(store, tmp_path / "c.jsonl", config, num_negatives=3)
    assert info.value.field == "num_negatives"


def test_cli_needs_out_or_stats(store, tmp_path, capsys):
    assert main(["export", str(store)]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["export", str(store), "--stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 3
    assert main(["export", str(tmp_path / "missing.db"), "--stats"]) == 2


def test_stats_say_what_the_records_can_still_teach_an_encoder(store, capsys):
    """``--stats --encoder``: the encoder's loss on the records before training; a store of a written judge has
    no grades, so no teacher line (the graded case: tests/test_produce_graded.py and test_distillation.py)."""
    assert main(["export", str(store), "--encoder", "all-MiniLM-L6-v2"]) == 2
    assert "--stats" in capsys.readouterr().err
    assert main(["export", str(store), "--stats", "--encoder", "all-MiniLM-L6-v2", "--json"]) == 0
    teaching = json.loads(capsys.readouterr().out)["teaching"]
    assert teaching["records"] == 3 and teaching["teachers"] == {} and 0 <= teaching["positive_first"] <= 1
    assert main(["export", str(store), "--stats", "--encoder", "all-MiniLM-L6-v2"]) == 0
    assert "teaching   for all-MiniLM-L6-v2, before training: InfoNCE loss" in capsys.readouterr().out


def test_cli_lists_failures_with_the_last_rejected_answer(store, capsys):
    assert main(["export", str(store), "--failures"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(f["doc_id"], f["stage"], f["kind"]) for f in listed] == [("d1", "annotate", "output"),
                                                                       ("d3", "extract", "output")]
    assert listed[1]["detail"] == {"last_answer": '{"identifiers": []}'} and listed[0]["detail"] is None


def test_retrieval_instruction_from_the_task_definition():
    cross = {**DEFINITION, "query_type": "English technical question", "doc_type": "abstract",
             "relevance_definition": "The document is relevant when it answers the question.",
             "document_language": "zh"}
    assert retrieval_instruction(cross) == ("Given an English technical question, retrieve an abstract written in "
                                            "Chinese (Simplified) that answers the question")
    # a task file's definition written as sentences (examples/csl-zh-clir.yaml) still gives one readable sentence
    import yaml

    csl = yaml.safe_load((Path(__file__).parent.parent / "examples" / "csl-zh-clir.yaml").read_text())
    assert retrieval_instruction(csl["task_definition"]) == (
        "Given an English search request from a researcher or engineer, retrieve an abstract of a Chinese "
        "scientific paper from a Chinese core journal written in Chinese (Simplified) that reports work that "
        "directly addresses the request's subject, so that the person who wrote the request would want to read "
        "the paper")
    vague = {**DEFINITION, "relevance_definition": "Topical match."}
    assert retrieval_instruction(vague) \
        == "Given a biomedical research claim, retrieve a relevant scientific paper abstract"


def _ranked_store(path, definition, ranks, translated=(), source_labels=None):
    """A store whose queries' source documents rank ``ranks`` under BM25; ``translated``: positions translated;
    ``source_labels``: the label of each query's source document (default 2, positive)."""
    with RunStore.open(path) as run:
        run.set_meta(artifact={"version": "v1", "checksum": "c", "task": "t"}, task_definition=definition,
                     instruction="i", settings={"top_k": 2})
        run.plan(["d1"])
        session = run.begin_session(concurrency=1, generator={"model": "scripted"}, options={})
        result = DocumentResult(doc_id="d1", features={"identifiers": [], "attributes": []})
        for pos, rank in enumerate(ranks):
            qr = QueryResult(query_id("d1", pos), pos, f"query {pos}", {"identifier": "x", "choices": []},
                             [Candidate(0, "d1", 0.9, 2 if source_labels is None else source_labels[pos]),
                              Candidate(1, "a", 0.5, 1)],
                             translation=f"查询 {pos}" if pos in translated else None)
            qr.source_rank, qr.bm25_source_rank = 0, rank
            result.queries.append(qr)
        result.texts.update({"d1": "文本", "a": "文本 a"})
        run.commit(result, session)
        run.end_session(session, "completed")
    return path


def test_across_languages_bm25_difficulty_counts_only_queries_translated_into_the_documents_language(tmp_path):
    cross = {**DEFINITION, "document_language": "zh"}
    both = compute_stats(_ranked_store(tmp_path / "t.db", cross, [0, 5, None], translated={0, 1}))
    ranks = both["quality"]["source_ranks"]
    assert (ranks["bm25_ranked_queries"], ranks["bm25_rank1"]) == (2, 0.5)  # the untranslated query is not ranked
    assert "50% (BM25 over the 2 queries translated into the documents' language)" in format_stats(both)
    none = compute_stats(_ranked_store(tmp_path / "n.db", cross, [None, None]))
    assert none["quality"]["source_ranks"]["bm25_rank1"] is None
    assert "— (BM25: no query was translated into the documents' language)" in format_stats(none)
    same = compute_stats(_ranked_store(tmp_path / "s.db", DEFINITION, [0, 5, None]))
    assert same["quality"]["source_ranks"]["bm25_rank1"] == 0.3333  # every query, as written
    assert "33% (BM25)" in format_stats(same)


def test_difficulty_is_reported_with_whether_the_judge_calls_the_source_relevant(tmp_path):
    # BM25 finds the source first for q0 and q1; the judge calls the source relevant for q0 (2) and q2 (3) only
    stats = compute_stats(_ranked_store(tmp_path / "j.db", DEFINITION, [0, 0, 5, None], source_labels=[2, 1, 3, 0]))
    ranks = stats["quality"]["source_ranks"]
    assert ranks["bm25_rank1"] == 0.5
    assert ranks["bm25_rank1_source_positive"] == 0.5 and ranks["bm25_lower_source_positive"] == 0.5
    assert ranks["bm25_rank1_among_source_positive"] == 0.5
    mostly_off = compute_stats(_ranked_store(tmp_path / "o.db", DEFINITION, [0, 3, 7, None],
                                             source_labels=[3, 0, 1, 0]))["quality"]["source_ranks"]
    # a low BM25-first share made of queries their source does not answer: among the answered ones, all are first
    assert mostly_off["bm25_rank1"] == 0.25 and mostly_off["bm25_lower_source_positive"] == 0.0
    assert mostly_off["bm25_rank1_among_source_positive"] == 1.0
    text = format_stats(stats)
    assert "judged relevant to its query for 50% of the queries BM25 finds it first for, 50% of the others" in text
