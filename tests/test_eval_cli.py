"""`syntra eval` end to end (BM25 and run files), BEIR loading, exclusions and the NeuCLIRTech template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from syntra_dspy.cli import main
from syntra_dspy.evaluation import (
    detect_language,
    evaluate_run,
    load_dataset,
    load_exclusions,
    parse_dataset_spec,
    read_qrels,
    read_run,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def nt(fixtures):
    return fixtures / "neuclirtech"


@pytest.fixture()
def beir(tmp_path) -> Path:
    root = tmp_path / "toy-beir"
    (root / "qrels").mkdir(parents=True)
    docs = [("d1", "Solar panels", "Photovoltaic cells convert sunlight into electricity."),
            ("d2", "Wind turbines", "Wind turbines convert the kinetic energy of wind into power."),
            ("d3", "Tea", "Green tea leaves are steamed and dried."),
            ("d4", "Batteries", "Lithium batteries store electricity for electric cars.")]
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs))
    queries = {"1": "how do photovoltaic cells make electricity", "2": "wind turbine power",
               "3": "storing electricity in batteries", "4": "an unjudged query"}
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n"
                                                for k, v in queries.items()))
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t1\n3\td4\t1\n")
    return root


def test_beir_loader_and_specs(beir):
    ds = load_dataset(f"beir:{beir}")  # the only split there is
    assert ds.name == "beir:toy-beir:dev" and ds.judged_queries == ["1", "2", "3"]
    assert ds.language == "en" and len(ds.require_corpus()) == 4
    assert load_dataset(f"beir:{beir}:dev", load_corpus=False).corpus is None
    assert parse_dataset_spec(f"beir:{beir}:train") == ("beir", beir, "train")
    assert parse_dataset_spec("neuclirtech:/data/NeuCLIRTech:zho")[2] == "zho"
    with pytest.raises(Exception, match="no qrels for split 'test'"):
        load_dataset(f"beir:{beir}:test")


def test_language_detection():
    assert detect_language(["锂离子电池在放电过程中会产生大量热量"]) == "zh"
    assert detect_language(["Lithium-ion batteries (锂离子电池) heat up"]) == "en"


def test_eval_bm25_writes_run_and_per_query(beir, tmp_path, capsys):
    run_out, tsv, js = tmp_path / "bm25.trec", tmp_path / "pq.tsv", tmp_path / "pq.json"
    assert main(["eval", "--encoder", "bm25", "--dataset", f"beir:{beir}:dev", "--run-out", str(run_out),
                 "--per-query", str(tsv), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "bm25 on beir:toy-beir:dev (3 queries)" in out and "nDCG@10" in out and "Judged@20" in out
    lines = run_out.read_text().splitlines()
    assert lines[0].split() == ["1", "Q0", "d1", "1", lines[0].split()[4], "bm25"]
    assert read_run(run_out)["3"].keys() >= {"d4"}
    rows = [r.split("\t") for r in tsv.read_text().splitlines()]
    assert rows[0] == ["query_id", "nDCG@10", "nDCG@20", "R@100", "Judged@20"]
    assert [r[0] for r in rows[1:]] == ["1", "2", "3", "all"] and float(rows[1][1]) == 1.0
    # the written run scores the same through --run
    assert main(["eval", "--run", str(run_out), "--dataset", f"beir:{beir}:dev", "--per-query", str(js),
                 "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(js.read_text())
    assert printed["aggregate"]["nDCG@10"] == pytest.approx(float(rows[-1][1]))


def test_eval_excludes_ids_and_task_queries(beir, tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("# few-shot\n2\n")
    assert main(["eval", "--encoder", "bm25", "--dataset", f"beir:{beir}:dev", "--exclude-queries", str(ids),
                 "--json", "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["excluded"] == ["2"] and set(result["per_query"]) == {"1", "3"}

    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump({
        "name": "toy", "corpus": {"path": str(beir / "corpus.jsonl")},
        "examples": [{"query": "  How do PHOTOVOLTAIC cells make electricity ", "positive_id": "d1"},
                     {"query": "wind turbine power", "positive_id": "d2"},
                     {"query": "a query the dataset does not have", "positive_id": "d3"}]}))
    ds = load_dataset(f"beir:{beir}:dev", load_corpus=False)
    assert load_exclusions(task, ds.queries) == {"1", "2"}
    assert main(["eval", "--encoder", "bm25", "--dataset", f"beir:{beir}:dev", "--exclude-queries", str(task),
                 "--json", "--no-progress"]) == 0
    assert set(json.loads(capsys.readouterr().out)["per_query"]) == {"3"}


def test_eval_neuclirtech_cli(nt, tmp_path, capsys):
    per_query = tmp_path / "mono.json"
    assert main(["eval", "--encoder", "bm25", "--dataset", f"neuclirtech:{nt}:zho", "--measures", "nDCG@20",
                 "Judged@20", "--per-query", str(per_query), "--no-progress"]) == 0
    assert "bm25 on neuclirtech:mono (4 queries)" in capsys.readouterr().out
    assert set(json.loads(per_query.read_text())["per_query"]) == {"8", "24", "203", "217"}

    qrels = nt / "data" / "qrels.gains.txt"
    run = nt / "runs" / "plaidx_clir.trec"
    assert main(["eval", "--run", str(run), "--qrels", str(qrels), "--measures", "nDCG@20 Judged@20",
                 "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    expected = evaluate_run(read_run(run), read_qrels(qrels), "nDCG@20 Judged@20").aggregate
    assert scored["aggregate"] == pytest.approx(expected)
    assert scored["dataset"] == "qrels.gains.txt" and scored["model"] == "plaidx_clir.trec"


def test_eval_compare_prints_ci_and_p(nt, capsys):
    runs = nt / "runs"
    args = ["eval", "--compare", str(runs / "plaidx_clir.trec"), str(runs / "bm25_mono.trec"),
            "--qrels", str(nt / "data" / "qrels.gains.txt"), "--measures", "nDCG@20", "--bootstrap", "2000"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("nDCG@20 over 4 queries")
    assert "95% bootstrap CI [" in out and "p = " in out and "paired t-test" in out
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n"] == 4 and data["ci_low"] <= data["diff"] <= data["ci_high"]
    assert data["diff"] == pytest.approx(data["mean_b"] - data["mean_a"])


@pytest.mark.parametrize("argv, message", [
    (["--encoder", "bm25"], "--dataset is required"),
    (["--encoder", "bm25", "--qrels", "q.txt"], "--encoder needs --dataset"),
    (["--encoder", "bm25", "--dataset", "beir:/nowhere"], "BEIR dataset folder not found"),
    (["--run", "r.trec", "--qrels", "q.txt", "--measures", "nDCG@x"], "malformed measure"),
])
def test_eval_errors_exit_2_with_a_message(argv, message, capsys):
    assert main(["eval", *argv]) == 2
    assert message in capsys.readouterr().err


def test_neuclirtech_template_is_a_valid_cross_language_task():
    from syntra_dspy.retrieval.corpus import read_corpus
    from syntra_dspy.task import load_task

    path = REPO / "templates" / "neuclirtech-clir.yaml"
    task = load_task(path)
    assert task.corpus.format == "neuclir"
    assert task.task_definition.cross_language
    assert (task.task_definition.query_language, task.task_definition.document_language) == ("en", "zh")
    corpus = read_corpus(task.corpus.path, format="neuclir")
    assert all(ex.positive_id in corpus for ex in task.examples)
    assert 3 <= len(task.examples) <= 8
    assert path.read_text(encoding="utf-8").count("FILL IN") >= 5
