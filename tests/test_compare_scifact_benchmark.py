"""The strategy-comparison benchmark end to end with the scripted model: one command regenerates the report."""

from __future__ import annotations

import json
import sys

from helpers import MINI_TASK, scripted_roles
from test_compare_helpers import use_fast_encoder, write_heldout_beir

from conftest import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def test_the_benchmark_regenerates_its_report_and_replaces_the_old_one(tmp_path, monkeypatch, capsys):
    from benchmarks.compare_scifact import main

    use_fast_encoder(monkeypatch)
    monkeypatch.chdir(tmp_path)
    write_heldout_beir(tmp_path / "beir")  # 5 judged claims: 2 calibrate the human row, 3 are held out
    out = tmp_path / "report"
    (out / "artifacts" / "mini" / "0ld0ld0ld0ld").mkdir(parents=True)  # the earlier report's
    (out / "REPORT.md").write_text("the earlier report\n")
    roles, _ = scripted_roles()
    argv = ["--task", str(MINI_TASK), "--data", str(tmp_path / "beir"), "--split", "test", "--out", str(out),
            "--calibration-queries", "2", "--heldout-max-queries", "3", "--min-heldout-queries", "3",
            "--sample-docs", "3", "--heldout-docs", "2", "--gepa-max-metric-calls", "8",
            "--index-dir", str(tmp_path / "index")]
    assert main([*argv, "--dry-run"]) == 0 and "human: people's queries" in capsys.readouterr().out
    assert (out / "REPORT.md").exists()  # a dry run writes and removes nothing
    assert main(argv, lms=roles) == 0

    data = json.loads((out / "comparison.json").read_text())
    assert set(data["rank"]) == {"none", "self-improve", "gepa", "human"} and data["reference"] == "human"
    assert all(data["metrics"][row]["judge"] == "graded" for row in data["rank"])  # graded against graded
    assert all(data["compile_cost"][row]["calls"] > 0 for row in data["rank"])
    assert data["heldout"]["queries"] == 3 and data["settings"]["compile"]["judge"] == "graded"
    human = next(r for r in data["strategies"] if r["strategy"] == "human")
    manifest = json.loads((tmp_path / human["artifact"] / "manifest.json").read_text())
    people = set(manifest["optimizer"]["human_decisions"]["labels"]["queries"])
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (tmp_path / "beir" / "queries.jsonl").open()}
    scored = {texts[x["query_id"]] for x in human["metrics"]["labels"]}
    assert len(people) == 2 and len(scored) == 3 and not people & scored  # calibration claims are never scored
    assert human["human_decisions"]["reviews"]["source"] == "no review: every verifier judgement stands"
    readme = (out / "README.md").read_text().splitlines()
    assert readme[0] == "# SciFact: does self-improvement reach human calibration?"
    assert readme[2].startswith("Answer (binary κ on held-out claims, each against human calibration): "
                                "Self-improvement is ")
    assert any(line.startswith("Ranking rule: binary Cohen's κ") for line in readme)
    assert any("make bench-compare-scifact" in line for line in readme)
    assert any(line.startswith("No downstream column: `--downstream` was not given") for line in readme)
    assert not (out / "REPORT.md").exists() and not (out / "artifacts" / "mini" / "0ld0ld0ld0ld").exists()
    assert {p.name for p in (out / "artifacts" / "mini").iterdir()} == {r["version"] for r in data["strategies"]}


def test_the_benchmark_refuses_a_report_on_too_few_claims(tmp_path, monkeypatch, capsys):
    from benchmarks.compare_scifact import main

    use_fast_encoder(monkeypatch)
    write_heldout_beir(tmp_path / "beir")
    roles, _ = scripted_roles()
    code = main(["--task", str(MINI_TASK), "--data", str(tmp_path / "beir"), "--split", "test",
                 "--out", str(tmp_path / "report"), "--strategies", "none,human", "--calibration-queries", "2",
                 "--sample-docs", "3", "--heldout-docs", "1", "--index-dir", str(tmp_path / "index")], lms=roles)
    assert code == 1 and "only 3 held-out claims could be scored, fewer than --min-heldout-queries 100" in \
        capsys.readouterr().err
    assert not (tmp_path / "report" / "README.md").exists()
