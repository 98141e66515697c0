"""Exports that load anywhere: the ``st`` Parquet dataset (sentence-transformers trains on it with no ``map``), the
dataset card beside every export, and the dev split by source document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.grading import Grade
from syntra_dspy.production import RunStore, export_records, retrieval_instruction
from syntra_dspy.production.units import Candidate, DocumentResult, QueryResult, query_id

from test_produce_support import read_jsonl

DEFINITION = {"query_type": "biomedical research claim", "doc_type": "scientific paper abstract",
              "relevance_definition": "the document is relevant if it reports evidence on the claim.",
              "query_language": "en", "document_language": "en"}
SUMMARY = {"candidates": 139, "queries": 15, "positives": 18, "hard_negatives": 106, "easy_negatives": 15,
           "binary_kappa": 0.5948, "three_class_kappa": 0.7151, "positive_recall": 0.6667,
           "positive_precision": 0.6316, "cv_binary_kappa": {"hybrid": 0.4641}, "auc": {}}
JUDGE = {"mode": "graded", "calibrated": True,
         "calibration": {"feature": "hybrid", "positive_threshold": 4.0, "hard_threshold": -4.0, "summary": SUMMARY}}
#: doc -> queries, each [(candidate, label, calibrated score)]; every document has two queries
DOCS = {f"d{i}": [[(f"d{i}", 3, 6.0), ("a", 2, 5.0), ("b", 1, 1.0), ("c", 1, 0.5 + i), ("e", 0, -5.0)],
                  [("a", 2, 4.5), (f"x{i}", 1, -1.0)]] for i in range(6)}


def text(doc_id: str) -> str:
    return f"text of {doc_id}"


def make_store(path: Path, *, graded: bool = True) -> Path:
    with RunStore.open(path) as run:
        run.set_meta(artifact={"version": "v9", "checksum": "sum9", "task": "mini", "path": "/nowhere/art"},
                     task_definition=DEFINITION, instruction=retrieval_instruction(DEFINITION),
                     generator={"model": "embedded/qwen2.5-coder-1.5b"}, judge=JUDGE if graded else {"mode": "written"},
                     settings={"top_k": 5, "corpus": {"path": "/data/corpus.jsonl", "documents": 6,
                                                      "fingerprint": "f" * 64}})
        run.plan(list(DOCS))
        session = run.begin_session(concurrency=1, generator={"model": "scripted"}, options={})
        for doc_id, queries in DOCS.items():
            result = DocumentResult(doc_id=doc_id, features={"identifiers": [], "attributes": []})
            for pos, cands in enumerate(queries):
                qr = QueryResult(query_id(doc_id, pos), pos, f"claim {pos} about {doc_id}",
                                 {"identifier": "x", "choices": []},
                                 [Candidate(rank, cid, 0.9 - rank / 10, label,
                                            grade=Grade((0.1, 0.2, 0.3, 0.4), label, 0.9) if graded else None,
                                            judge_score=score if graded else None)
                                  for rank, (cid, label, score) in enumerate(cands)])
                qr.source_rank = next((c.rank for c in qr.candidates if c.doc_id == doc_id), None)
                result.queries.append(qr)
                result.texts.update({c.doc_id: text(c.doc_id) for c in qr.candidates})
            result.texts[doc_id] = text(doc_id)
            run.commit(result, session)
        run.end_session(session, "completed")
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("st") / "run.db")


def test_st_rows_have_fixed_negatives_repeated_in_rank_order_and_the_judges_scores(store, tmp_path):
    import pyarrow.parquet as pq
    from datasets import load_dataset

    summary = export_records(store, tmp_path / "st", format="st", num_negatives=3)
    assert summary.records == 12 and summary.splits == {"train": 12}
    table = pq.read_table(tmp_path / "st" / "data" / "train-00000-of-00001.parquet")
    assert table.column_names == ["anchor", "positive", "negative_1", "negative_2", "negative_3", "label"]
    rows = table.to_pylist()
    first, short = rows[0], rows[1]
    assert first["anchor"] == "claim 0 about d0" and first["positive"] == text("d0")  # the first positive
    assert [first[f"negative_{k}"] for k in (1, 2, 3)] == [text("b"), text("c"), text("b")]  # b, c, then again
    assert first["label"] == pytest.approx([6.0, 1.0, 0.5, 1.0])
    assert [short[f"negative_{k}"] for k in (1, 2, 3)] == [text("x0")] * 3
    assert short["positive"] == text("a") and short["label"] == pytest.approx([4.5, -1.0, -1.0, -1.0])
    # loads as plain Parquet and as a dataset folder (its card's YAML names the files)
    by_files = load_dataset("parquet", data_files={"train": str(tmp_path / "st" / "data" / "train-*.parquet")})
    by_folder = load_dataset(str(tmp_path / "st"))
    assert by_files["train"].column_names == by_folder["train"].column_names == table.column_names
    assert by_folder["train"].num_rows == 12 and list(by_folder) == ["train"]


def test_st_export_trains_a_sentence_transformers_step_with_no_map(store, tmp_path):
    from datasets import load_dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from syntra_dspy.retrieval.encoder import load_encoder

    export_records(store, tmp_path / "st", format="st", num_negatives=2)
    train = load_dataset(str(tmp_path / "st"))["train"]
    assert "label" in train.column_names  # a graded run: the judge's scores ride along, MNRL ignores them
    model = load_encoder("all-MiniLM-L6-v2").model  # a fresh copy: the shared fixture must stay untrained
    model.max_seq_length = 32
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path / "out"), max_steps=1,
                                                per_device_train_batch_size=2, report_to="none", use_cpu=True,
                                                save_strategy="no", disable_tqdm=True)
    before = next(model.parameters()).detach().clone()
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train,
                                         loss=MultipleNegativesRankingLoss(model))
    result = trainer.train()
    assert trainer.state.global_step == 1 and result.training_loss > 0
    assert not next(model.parameters()).detach().equal(before)  # the step changed the weights


def test_st_without_judge_scores_has_no_label_column_and_the_card_says_why(tmp_path):
    import pyarrow.parquet as pq

    store = make_store(tmp_path / "written.db", graded=False)
    export_records(store, tmp_path / "st", format="st", num_negatives=2)
    assert pq.read_table(tmp_path / "st" / "data").column_names == ["anchor", "positive", "negative_1", "negative_2"]
    card = (tmp_path / "st" / "README.md").read_text()
    assert "no `label` column" in card and "written 0-3 labels" in card


def test_every_export_has_a_dataset_card_saying_what_made_it(store, tmp_path):
    export_records(store, tmp_path / "train.jsonl", command="syntra export run.db --out train.jsonl")
    card = (tmp_path / "train.jsonl.README.md").read_text()
    for expected in ("`mini/v9`", "sum9", "embedded/qwen2.5-coder-1.5b", "calibrated score `hybrid`",
                     "binary kappa 0.595 in-sample, 0.464 cross-validated", "139 candidates of 15 queries",
                     "/data/corpus.jsonl", "12 records from 12 stored queries",
                     "syntra export run.db --out train.jsonl", "first dense hit for", 'load_dataset("json"'):
        assert expected in card, expected
    meta = json.loads((tmp_path / "train.jsonl.meta.json").read_text())
    assert meta["card"].endswith("train.jsonl.README.md") and meta["command"].startswith("syntra export")
    # from Python, the card names the call
    export_records(store, tmp_path / "hf", format="hf")
    marker = json.loads((tmp_path / "hf" / "syntra-export.json").read_text())
    assert "README.md" in marker["files"] and "export_records(" in (tmp_path / "hf" / "README.md").read_text()
    # the card is one of the export's files: replacing the folder is allowed, a foreign file still refuses it
    export_records(store, tmp_path / "hf", format="st", overwrite=True)
    assert json.loads((tmp_path / "hf" / "syntra-export.json").read_text())["kind"] == "syntra-export-st"
    (tmp_path / "hf" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="notes.txt"):
        export_records(store, tmp_path / "hf", format="st", overwrite=True)
    # a JSONL export's card is checked like the file: not replaced without --overwrite
    (tmp_path / "other.jsonl.README.md").write_text("a user's notes")
    with pytest.raises(ConfigError, match="already exists"):
        export_records(store, tmp_path / "other.jsonl")
    assert not (tmp_path / "other.jsonl").exists()


def test_dev_split_is_seeded_and_never_splits_a_document(store, tmp_path):
    from datasets import load_dataset

    summary = export_records(store, tmp_path / "train.jsonl", dev_split=0.34, seed=7)
    train, dev = read_jsonl(tmp_path / "train.jsonl"), read_jsonl(tmp_path / "train.dev.jsonl")
    assert summary.splits == {"train": len(train), "dev": len(dev)} and len(dev) == 4  # 2 of 6 documents
    assert not {r["source_doc_id"] for r in train} & {r["source_doc_id"] for r in dev}
    export_records(store, tmp_path / "again.jsonl", dev_split=0.34, seed=7)
    assert read_jsonl(tmp_path / "again.dev.jsonl") == dev  # the same seed draws the same documents
    export_records(store, tmp_path / "st", format="st", dev_split=0.34, seed=7)
    ds = load_dataset(str(tmp_path / "st"))
    assert ds["dev"]["anchor"] == [r["query"] for r in dev] and ds["train"].num_rows == len(train)
    meta = json.loads((tmp_path / "st.meta.json").read_text())
    assert meta["dev_split"] == {"fraction": 0.34, "seed": 7, "documents": 2, "of_documents": 6,
                                 "by": "source_doc_id"}
    assert "dev split: 2 of 6 source documents" in (tmp_path / "st" / "README.md").read_text()
    with pytest.raises(ConfigError, match="one split"):
        export_records(store, tmp_path / "hf", format="hf", dev_split=0.2)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        export_records(store, tmp_path / "x.jsonl", dev_split=1.0)


def test_cli_writes_st_with_a_dev_split_and_records_the_command(store, tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["export", str(store), "--out", str(out), "--format", "st", "--num-negatives", "2",
                 "--dev-split", "0.5", "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "train 6, dev 6" in printed and "README.md" in printed
    assert f"syntra export {store} --out {out} --format st --num-negatives 2 --dev-split 0.5 --seed 3" in \
        (out / "README.md").read_text()
    with pytest.raises(SystemExit):
        main(["export", str(store), "--out", str(tmp_path / "y"), "--dev-split", "1.5"])
    assert "fraction between 0 and 1" in capsys.readouterr().err


def test_syntra_train_says_an_st_folder_is_for_sentence_transformers(store, tmp_path):
    from syntra_dspy.errors import InputError
    from syntra_dspy.training import load_training_data

    export_records(store, tmp_path / "st", format="st")
    with pytest.raises(InputError, match="export --format st"):
        load_training_data(tmp_path / "st")
