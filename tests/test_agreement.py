"""``syntra agreement``: the same candidates for every judge, human qrels as reference, resumable judgments."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.comparison.judge_agreement import measure_agreement
from syntra_dspy.testing import SyntraBrain, scripted_lm

from helpers import MINI_TASK
from test_compare_helpers import HELDOUT_QUERIES, write_heldout_beir
from test_produce_support import mini_artifact


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return mini_artifact(tmp_path_factory, judge="graded")


def test_graded_and_written_judges_are_measured_on_the_same_candidates(graded, tmp_path):
    art, index = graded
    write_heldout_beir(tmp_path / "eval")
    shutil.copy(MINI_TASK.parent / "corpus.jsonl", tmp_path / "eval" / "corpus.jsonl")
    brain = SyntraBrain()
    report = measure_agreement([art], f"beir:{tmp_path / 'eval'}:test", judges=("graded", "written"), n_queries=10,
                               top_k=4, random_negatives=1, seed=3, out=tmp_path / "out",
                               generator=scripted_lm(brain), index_dir=index)
    n_queries = len(HELDOUT_QUERIES)
    assert report["queries"] == n_queries and report["reference"]["positive"] == n_queries
    assert report["candidates"] == n_queries * 5 + report["reference"]["added_positives"]
    graded_name, written_name = (f"mini/{art.name}:graded", f"mini/{art.name}:written")
    assert set(report["judges"]) == {graded_name, written_name}
    g = report["judges"][graded_name]
    assert g["judge"]["mode"] == "graded" and g["judge"]["calibrated"] is True
    assert g["ranking"]["expected"]["auc"] is not None and g["cost"]["candidates"] == report["candidates"]
    assert sum(g["predicted"].values()) == report["candidates"]
    assert "ranking" in report["judges"][written_name] and "expected" not in report["judges"][written_name]["ranking"]
    assert brain.calls["grade"] == report["candidates"] and brain.calls["annotate"] == report["candidates"]
    comparison = report["comparisons"][f"{written_name} vs {graded_name}"]
    assert comparison["rounds"] > 0 and len(comparison["ci95"]) == 2
    out = tmp_path / "out"
    assert (out / "reliability.png").stat().st_size > 1000 and "binary κ" in (out / "agreement.md").read_text()
    assert len((out / "judgments.jsonl").read_text().splitlines()) == 2 * report["candidates"]
    # a rerun reuses every logged judgment: no LM call at all
    again = SyntraBrain()
    rerun = measure_agreement([art], f"beir:{tmp_path / 'eval'}:test", judges=("graded", "written"), n_queries=10,
                              top_k=4, random_negatives=1, seed=3, out=out, generator=scripted_lm(again),
                              index_dir=index)
    assert again.calls == {} and rerun["judges"][graded_name]["binary"] == g["binary"]


def test_few_shot_and_calibration_queries_are_never_measured(graded, tmp_path):
    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.judging.measure import excluded_queries

    art, _ = graded
    program = load_artifact(art).program
    excluded = excluded_queries(program)
    assert [ex.query for ex in program.state.examples] == excluded[:3]
    assert set(program.state.judge.summary.query_texts) <= set(excluded)


def test_the_command_rejects_an_unknown_judge_mode(graded, tmp_path, capsys):
    art, index = graded
    with pytest.raises(SystemExit) as exited:
        main(["agreement", str(art), "--dataset", f"beir:{tmp_path}:test", "--judge-mode", "graded,psychic"])
    assert exited.value.code == 2 and "unknown 'psychic'" in capsys.readouterr().err


def test_queries_an_earlier_measurement_used_can_be_kept_out(graded, tmp_path):
    import json

    art, index = graded
    write_heldout_beir(tmp_path / "eval")
    shutil.copy(MINI_TASK.parent / "corpus.jsonl", tmp_path / "eval" / "corpus.jsonl")
    spec = f"beir:{tmp_path / 'eval'}:test"
    first = measure_agreement([art], spec, n_queries=2, top_k=3, random_negatives=0, seed=3, out=tmp_path / "a",
                              generator=scripted_lm(SyntraBrain()), index_dir=index)
    used = sorted({c["query_id"] for c in json.loads((tmp_path / "a" / "candidates.json").read_text())})
    (tmp_path / "used.txt").write_text("\n".join(used) + "\n")
    measure_agreement([art], spec, n_queries=10, top_k=3, random_negatives=0, seed=3, out=tmp_path / "b",
                      generator=scripted_lm(SyntraBrain()), index_dir=index, exclude_queries=tmp_path / "used.txt")
    again = {c["query_id"] for c in json.loads((tmp_path / "b" / "candidates.json").read_text())}
    assert first["queries"] == 2 and again and not again & set(used)
    assert len(again) == len(HELDOUT_QUERIES) - 2


def test_the_command_builds_one_agreement_config(graded):
    """The flags become one AgreementConfig (its defaults where a flag is not given, the artifact's own judge where
    --judge-mode is not); a bad value is an error naming the setting."""
    from syntra_dspy.cli import build_parser
    from syntra_dspy.cli.agreement_cmd import config_from_args
    from syntra_dspy.judging.settings import AgreementConfig

    art, _ = graded
    flags = ["agreement", str(art), "--dataset", "beir:x:test"]
    args = build_parser().parse_args([*flags, "--queries", "7", "--random", "0", "--compare-judge-mode", "written"])
    assert config_from_args(args) == AgreementConfig(judges=("graded",), compare_judges=("written",), n_queries=7,
                                                     random_negatives=0)
    args = build_parser().parse_args([*flags, "--cascade-grades", "first.db", "--cascade-coverage", "0.96"])
    assert config_from_args(args) == AgreementConfig(cascade_grades=Path("first.db"), cascade_coverage=0.96)
    with pytest.raises(ConfigError) as raised:
        config_from_args(build_parser().parse_args([*flags, "--random", "-1"]))
    assert raised.value.field == "random_negatives"
    with pytest.raises(ConfigError) as raised:
        config_from_args(build_parser().parse_args([*flags, "--cascade-coverage", "1.5"]))
    assert raised.value.field == "cascade_coverage"


def test_the_report_names_the_embedded_engine_build_that_graded(graded, tmp_path, monkeypatch):
    """Two builds of llama.cpp can grade a candidate at the cut differently: a report says which one graded (a served or
    scripted generator has none, and the report names none)."""
    import syntra_dspy.lm.roles as roles

    art, index = graded
    write_heldout_beir(tmp_path / "eval")
    shutil.copy(MINI_TASK.parent / "corpus.jsonl", tmp_path / "eval" / "corpus.jsonl")

    def run(out: str) -> dict:
        return measure_agreement([art], f"beir:{tmp_path / 'eval'}:test", judges=("graded",), n_queries=10, top_k=4,
                                 random_negatives=1, seed=3, out=tmp_path / out, generator=scripted_lm(SyntraBrain()),
                                 index_dir=index)

    (scripted,) = run("scripted")["judges"].values()
    assert "engine_build" not in scripted
    monkeypatch.setattr(roles, "with_engine_build",
                        lambda info: {**info, "embedded": {"name": "qwen2.5-coder-1.5b", "engine_build": "amx"}})
    (embedded,) = run("embedded")["judges"].values()
    assert embedded["engine_build"] == "amx"


def test_a_margin_cascade_is_measured_on_the_same_grades_without_another_call(tmp_path_factory, tmp_path, minilm):
    """--cascade-grades labels the graded judge's judgments as production's margin learned from a run store would:
    no LM call beyond the judge's own, skipped candidates cost nothing, a wider margin skips no more, and the margin
    is paired against the judge without it. A store of another prompt's grades, or no graded judge, is refused
    before any call."""
    import sqlite3

    from syntra_dspy.production import produce
    from syntra_dspy.production.store import RunStore

    art, index = mini_artifact(tmp_path_factory, judge="graded", feature="hybrid")  # SciFact's score
    store = tmp_path / "first.db"
    produce(art, store, generator=scripted_lm(), index_dir=index, encoder=minilm, progress=False, docs=5,
            queries_per_doc=2, top_k=5)
    with sqlite3.connect(store) as conn:
        lists = conn.execute("SELECT count(*) FROM queries").fetchone()[0]
    write_heldout_beir(tmp_path / "eval")
    shutil.copy(MINI_TASK.parent / "corpus.jsonl", tmp_path / "eval" / "corpus.jsonl")
    spec, out = f"beir:{tmp_path / 'eval'}:test", tmp_path / "out"
    common = {"judges": ("graded",), "n_queries": 10, "top_k": 4, "random_negatives": 1, "seed": 3, "out": out,
              "index_dir": index, "cascade_grades": store}
    brain = SyntraBrain()
    narrow = measure_agreement([art], spec, generator=scripted_lm(brain), cascade_coverage=0.5, **common)
    name = f"mini/{art.name}:graded"
    g, m = narrow["judges"][name], narrow["judges"][f"{name}+margin"]
    assert brain.calls["grade"] == narrow["candidates"]  # the margin's labels come from the same grades
    assert m["cascade"]["mode"] == "margin" and m["cascade"]["coverage"] == 0.5
    assert m["cascade"]["learned_from"] == "run store first.db" and m["cascade"]["lists"] == lists
    assert 0 < m["skipped"] < narrow["candidates"] and sum(m["predicted"].values()) == narrow["candidates"]
    assert m["cost"]["prompt_tokens_per_candidate"] < g["cost"]["prompt_tokens_per_candidate"]
    assert m["ranking"] == g["ranking"]
    assert f"{name}+margin vs {name}" in narrow["comparisons"]
    assert f"{m['skipped']} of {narrow['candidates']} grading calls skipped" in (out / "agreement.md").read_text()
    # a rerun at another coverage reads the log: no LM call, and the wider margin skips no more
    again = SyntraBrain()
    wide = measure_agreement([art], spec, generator=scripted_lm(again), cascade_coverage=0.99, **common)
    assert again.calls == {} and wide["judges"][f"{name}+margin"]["skipped"] <= m["skipped"]
    assert wide["judges"][name]["binary"] == g["binary"]
    # beside another version (--compare), the margin is paired against it too: the bar a user holds a version to
    other, _ = mini_artifact(tmp_path_factory, judge="graded")
    both = measure_agreement([art, other], spec, generator=scripted_lm(), cascade_coverage=0.5, **common)
    assert {f"{name}+margin vs {name}", f"mini/{other.name}:graded vs {name}",
            f"{name}+margin vs mini/{other.name}:graded"} == set(both["comparisons"])
    # refused before any call: another prompt's grades, a missing store, no graded judge
    foreign = tmp_path / "foreign.db"
    with RunStore.open(foreign) as run:
        run.set_meta(artifact={"prompts_sha256": {"grade": "another prompt"}})
    for bad, match in ((foreign, "graded with another prompt"), (tmp_path / "none.db", "no such run store")):
        idle = SyntraBrain()
        with pytest.raises(ConfigError, match=match):
            measure_agreement([art], spec, generator=scripted_lm(idle), **{**common, "out": tmp_path / "x",
                                                                            "cascade_grades": bad})
        assert idle.calls == {}
    with pytest.raises(ConfigError) as raised:
        measure_agreement([art], spec, generator=scripted_lm(), **{**common, "judges": ("written",)})
    assert raised.value.field == "cascade_grades"
