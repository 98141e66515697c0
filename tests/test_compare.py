"""`syntra compare`: agreement metrics, held-out material, ranking and the three reports."""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import MINI_TASK, scripted_roles
from test_compare_helpers import HELDOUT_QUERIES, fast_encoder, use_fast_encoder, write_heldout_beir  # noqa: F401

from syntra_dspy.comparison import (
    HeldoutOptions,
    agreement,
    cohen_kappa,
    compare_strategies,
    label_agreement,
    load_judgements,
)
from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers import CompileSettings, ReviewSession
from syntra_dspy.optimizers.terminal_review import TerminalReviewer
from syntra_dspy.testing import SyntraBrain

# E alone: with the fake encoder the cosine already separates the mini task, so a fused judge would pass unrefined
SETTINGS = CompileSettings(sample_docs=3, selection_target=20, judge_feature="expected")


# -- agreement ------------------------------------------------------------------------------------------
def test_cohen_kappa_matches_the_hand_computed_value():
    # 50 pairs: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no.  p_o = 35/50 = 0.7;
    # p_e = (25/50)(30/50) + (25/50)(20/50) = 0.3 + 0.2 = 0.5;  kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    gold = ["yes"] * 25 + ["no"] * 25
    pred = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(gold, pred) == pytest.approx(0.4)
    assert cohen_kappa(["a", "a"], ["a", "a"]) is None  # undefined: one class only
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)


def test_three_class_kappa_agrees_with_scikit_learn():
    sklearn = pytest.importorskip("sklearn.metrics")
    gold = ["positive", "hard_negative", "easy_negative", "positive", "hard_negative", "easy_negative", "positive"]
    pred = ["positive", "easy_negative", "easy_negative", "hard_negative", "hard_negative", "easy_negative", "positive"]
    assert cohen_kappa(gold, pred) == pytest.approx(sklearn.cohen_kappa_score(gold, pred))


def test_agreement_reports_per_class_precision_recall_and_unlabelled_pairs():
    gold = ["positive", "positive", "hard_negative", "easy_negative", "easy_negative"]
    pred = ["positive", "hard_negative", "hard_negative", "hard_negative", None]
    three = agreement(gold, pred, ("positive", "hard_negative", "easy_negative"))
    assert three.n == 5 and three.unlabelled == 1 and three.accuracy == pytest.approx(2 / 5)
    assert three.per_class["positive"] == {"precision": 1.0, "recall": 0.5, "support": 2, "predicted": 1}
    assert three.per_class["hard_negative"]["precision"] == pytest.approx(1 / 3)
    assert three.per_class["easy_negative"]["recall"] == 0.0
    both = label_agreement(gold, pred)
    assert both["binary"]["accuracy"] == pytest.approx(3 / 5)  # hard and easy merge into non_relevant
    assert both["training_label_precision"] == pytest.approx(2 / 4)


# -- held-out judgements -----------------------------------------------------------------------------------
def test_judgements_from_beir_qrels_and_from_a_label_file(tmp_path):
    qrels = write_heldout_beir(tmp_path / "beir")
    queries, labels = load_judgements(qrels)
    assert queries["157"] == HELDOUT_QUERIES["157"][0] and labels["157"] == {"13439128": "positive"}
    file = tmp_path / "labels.csv"
    file.write_text("query,doc_id,label\nsome claim,d1,3\nsome claim,d2,1\n")
    queries, labels = load_judgements(file)
    assert queries == {"q1": "some claim"} and labels == {"q1": {"d1": "positive", "d2": "hard_negative"}}
    (tmp_path / "beir" / "queries.jsonl").unlink()
    with pytest.raises(ConfigError, match="need their queries.*--heldout-queries"):
        load_judgements(qrels)


# -- the comparison ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """none, self-improve, gepa and an interactive human session, scored on the same held-out material."""
    root = tmp_path_factory.mktemp("compare")
    qrels = write_heldout_beir(root / "heldout")
    roles, _ = scripted_roles()
    typed = "\n" * 20  # the person accepts every verifier judgement and supplies no labels
    with pytest.MonkeyPatch.context() as mp:
        use_fast_encoder(mp)
        result = compare_strategies(
            MINI_TASK, strategies="none,self-improve,human,gepa", out=root / "out", lms=roles,
            index_dir=root / "index", settings=SETTINGS, heldout=HeldoutOptions(docs=3, qrels=qrels),
            strategy_options={"human": {"review": ReviewSession(
                terminal=TerminalReviewer(io.StringIO(typed), io.StringIO()), record=root / "feedback.jsonl")}})
    return {"root": root, "result": result, "qrels": qrels}


def test_an_improving_strategy_ranks_above_one_that_does_not(compared):
    result = compared["result"]
    by = {r.strategy: r for r in result.strategies}
    assert by["self-improve"].rank < by["none"].rank and result.ranked()[-1].strategy == "none"
    # the unrefined writer's questions are rejected in code (the examples are claims): no query to score
    assert by["self-improve"].metrics["query_score"] == 3 and by["none"].metrics["query_score"] == 0
    report = (compared["root"] / "out" / "comparison.md").read_text()
    assert result.ranking.key == "kappa" and "Ranking rule: binary Cohen" in report
    # the cheaper of two equally good strategies ranks first
    assert by["self-improve"].compile_cost["total_tokens"] < by["gepa"].compile_cost["total_tokens"]
    assert by["self-improve"].rank < by["gepa"].rank


def test_every_strategy_is_scored_on_the_same_unseen_material(compared):
    result = compared["result"]
    held = result.heldout
    samples = set()
    for r in result.strategies:
        manifest = json.loads((compared["root"] / "out" / "artifacts" / "mini" / r.version
                               / "manifest.json").read_text())
        samples.add(tuple(manifest["sample"]["documents"]))  # same seed, same trial documents
        assert not set(held["documents"]) & set(manifest["sample"]["documents"])
        assert r.compile_cost["calls"] > 0 or r.strategy == "none"
        assert r.metrics["annotation"]["three_class"]["n"] == held["pairs"]
    assert len(samples) == 1 and len(held["documents"]) == 3
    assert held["pair_counts"]["judged:positive"] == len(HELDOUT_QUERIES)
    assert held["pair_counts"]["unjudged:hard_negative"] > 0 and held["pair_counts"]["random:easy_negative"] > 0


def test_reports_name_every_artifact_version(compared):
    result, out = compared["result"], compared["root"] / "out"
    md = (out / "comparison.md").read_text()
    data = json.loads((out / "comparison.json").read_text())
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for r in result.strategies:
        assert f"`{r.version}`" in md and r.version in json.dumps(data)
    assert data["ranking"] == [r.strategy for r in result.ranked()]
    assert data["rank"] == {r.strategy: r.rank for r in result.strategies} and data["reference"] == "human"
    for r in result.strategies:  # every row compiled the graded judge; its scores rank the held-out pairs
        row = data["metrics"][r.strategy]
        assert row["judge"] == "graded" and row["auc_score"] is not None and len(row["binary_kappa_ci95"]) == 2
        assert data["compile_cost"][r.strategy]["minutes"] == round(r.compile_cost["seconds"] / 60, 1)
        assert (row["vs_reference"] is None) == (r.strategy == "human")
    assert md.splitlines()[2].startswith("Binary κ against people's judgments on")
    assert "- self-improve κ " in md and "of human (" in md and "Without an LLM, on the same pairs: cosine AUC" in md
    assert "| 1 | self-improve |" in md and "binary κ" in md and "training-label precision" in md
    assert "- human, reviews: recorded terminal session `" in md and "- human, calibration labels: none" in md


def test_a_row_with_an_earlier_rows_grading_prompt_is_scored_without_grading_again(compared):
    """Rows that grade with the same prompt make the same model call; the later one calibrates the earlier one's
    grades (asked once), and the report says which judges are identical and where grades came from."""
    result, out = compared["result"], compared["root"] / "out"
    by = {r.strategy: r for r in result.strategies}
    grading = {r.strategy: r.judge_record["grade_prompt"] for r in result.strategies}
    assert grading["human"] == grading["self-improve"] != grading["none"]  # the mini task's scripted compiles
    assert by["human"].metrics["annotation"]["grades_from"] == "self-improve"
    assert "grades_from" not in by["self-improve"].metrics["annotation"]
    assert by["self-improve"].scoring_cost["calls"] - by["human"].scoring_cost["calls"] == result.heldout["pairs"]
    # the human row's judge is self-improve's (no people's labels here): the same labels, by construction
    assert by["human"].judge_record["id"] == by["self-improve"].judge_record["id"] != by["none"].judge_record["id"]
    assert [x["predicted"] for x in by["human"].metrics["labels"]] == \
        [x["predicted"] for x in by["self-improve"].metrics["labels"]]
    md = (out / "comparison.md").read_text()
    assert "Identical judges (same prompt and calibration" in md and ": self-improve and human." in md
    assert "## The judges" in md and "| calibrated from self-improve (same prompt) |" in md
    assert "| none | `" in md and "not run (drafted instruction kept)" in md


def test_report_paths_are_relative_to_the_working_directory(tmp_path, monkeypatch):
    from syntra_dspy.comparison.report import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "out" / "artifacts" / "mini" / "abc") == "out/artifacts/mini/abc"
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert shown_path(tmp_path / "shared" / "qrels.tsv") == "../shared/qrels.tsv"  # beside the checkout
    assert shown_path("/elsewhere/qrels.tsv") == "/elsewhere/qrels.tsv"  # anywhere else: kept as given


def test_a_replayed_comparison_reproduces_every_artifact(compared, tmp_path, monkeypatch):
    use_fast_encoder(monkeypatch)
    roles, _ = scripted_roles()
    again = compare_strategies(MINI_TASK, strategies="human,none", out=tmp_path / "out", lms=roles,
                               index_dir=compared["root"] / "index", settings=SETTINGS,
                               heldout=HeldoutOptions(docs=3), chart=False,
                               strategy_options={"human": {"review": ReviewSession(
                                   feedback=compared["root"] / "feedback.jsonl")}})
    first = {r.strategy: r.program_id for r in compared["result"].strategies}
    assert {r.strategy: r.program_id for r in again.strategies} == {"human": first["human"], "none": first["none"]}
    assert "annotation" not in again.strategies[0].metrics and not (tmp_path / "out" / "comparison.png").exists()


def test_a_stubborn_self_improve_does_not_outrank_what_it_failed_to_improve(tmp_path, fast_encoder):  # noqa: F811
    roles, _ = scripted_roles(SyntraBrain(stubborn=True))
    result = compare_strategies(MINI_TASK, strategies="self-improve,none", out=tmp_path / "out", lms=roles,
                                index_dir=tmp_path / "index", settings=SETTINGS, heldout=HeldoutOptions(docs=3),
                                chart=False)
    by = {r.strategy: r for r in result.strategies}
    assert by["self-improve"].overall == by["none"].overall  # no improvement: same quality ...
    assert by["none"].rank == 1  # ... and none spent fewer tokens


def test_an_interrupted_comparison_takes_the_rows_it_finished_and_redoes_only_what_changed(tmp_path,
                                                                                           fast_encoder):  # noqa: F811
    """A comparison on the embedded model outlasts a sitting: rerun with the same inputs, finished rows are taken
    from OUT/rows/ (no LM call), with the same versions, scores and compile cost; other inputs redo them."""
    kwargs = dict(out=tmp_path / "out", index_dir=tmp_path / "index", heldout=HeldoutOptions(docs=3), chart=False)
    roles, brain = scripted_roles()
    first = compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=SETTINGS, **kwargs)
    assert sum(brain.calls.values()) > 0
    assert sorted(p.name for p in (tmp_path / "out" / "rows").iterdir()) == ["none.json", "self-improve.json"]

    roles, brain = scripted_roles()
    again = compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=SETTINGS, **kwargs)
    assert sum(brain.calls.values()) == 0  # nothing compiled or scored again
    assert [r.to_dict() for r in again.strategies] == [r.to_dict() for r in first.strategies]

    # a run from another directory shows the rows the earlier run scored as it finds them, not as that run did
    (tmp_path / "elsewhere").mkdir()
    started_in = Path.cwd()  # where the first run's shown paths are relative to (when they are)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path / "elsewhere")
        moved = compare_strategies(MINI_TASK, strategies="none,self-improve", lms=scripted_roles()[0],
                                   settings=SETTINGS, **kwargs)
    assert [r.artifact for r in moved.strategies] == [
        os.path.relpath((started_in / r.artifact).resolve(), (tmp_path / "elsewhere").resolve())
        for r in first.strategies]
    assert all(r.artifact.startswith("../out/artifacts/") for r in moved.strategies)

    # a row killed after compiling: its artifact is taken, only its scoring is made again
    record = json.loads((tmp_path / "out" / "rows" / "none.json").read_text())
    (tmp_path / "out" / "rows" / "none.json").write_text(json.dumps({k: record[k] for k in ("key", "artifact")}))
    roles, brain = scripted_roles()
    third = compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=SETTINGS, **kwargs)
    assert brain.calls and [r.version for r in third.strategies] == [r.version for r in first.strategies]
    assert third.strategies[0].metrics == first.strategies[0].metrics

    # a comparison of other rows takes the rows it shares (a row compiles alone); scores follow the material
    roles, brain = scripted_roles()
    fewer = compare_strategies(MINI_TASK, strategies="self-improve", lms=roles, settings=SETTINGS, **kwargs)
    assert fewer.strategies[0].version == first.strategies[1].version

    # other settings, or --fresh: every row is compiled again
    roles, brain = scripted_roles()
    other = SETTINGS.model_copy(update={"max_attempts": 2})
    compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=other, **kwargs)
    compiled_again = brain.calls.get("propose_instruction", 0) + brain.calls.get("extract", 0)
    roles, brain = scripted_roles()
    compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=SETTINGS, resume=False, **kwargs)
    assert compiled_again > 0 and brain.calls.get("extract", 0) > 0


def test_a_comparison_compiled_in_parts_is_scored_once_without_compiling_again(tmp_path, fast_encoder):  # noqa: F811
    """--compile-only makes one row per sitting and scores nothing (the held-out material depends on every row's
    compile); the full run then compiles nothing and scores the same as one made in a single sitting."""
    kwargs = {"out": tmp_path / "out", "index_dir": tmp_path / "index", "heldout": HeldoutOptions(docs=3),
              "chart": False}
    roles, brain = scripted_roles()
    part = compare_strategies(MINI_TASK, strategies="none", compile_only=True, lms=roles, settings=SETTINGS, **kwargs)
    assert [r.strategy for r in part.strategies] == ["none"] and part.strategies[0].metrics == {}
    assert part.strategies[0].compile_cost["calls"] > 0 and not part.outputs
    assert not (tmp_path / "out" / "comparison.json").exists()
    assert sorted(json.loads((tmp_path / "out" / "rows" / "none.json").read_text())) == ["artifact", "key"]
    roles, brain = scripted_roles()
    second = compare_strategies(MINI_TASK, strategies="self-improve", compile_only=True, lms=roles,
                                settings=SETTINGS, **kwargs)
    assert brain.calls  # the second row is compiled in its own sitting
    compiled = sorted((tmp_path / "out" / "artifacts").glob("*/*"))

    roles, brain = scripted_roles()
    whole = compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=SETTINGS, **kwargs)
    assert brain.calls.get("propose_instruction", 0) == 0  # no compile: only the held-out scoring's calls
    assert sorted((tmp_path / "out" / "artifacts").glob("*/*")) == compiled
    assert [r.version for r in whole.strategies] == [part.strategies[0].version, second.strategies[0].version]
    assert all(r.metrics for r in whole.strategies) and (tmp_path / "out" / "comparison.json").is_file()
    roles, brain = scripted_roles()
    once = compare_strategies(MINI_TASK, strategies="none,self-improve", lms=roles, settings=SETTINGS,
                              **{**kwargs, "out": tmp_path / "once"})
    assert [r.metrics for r in once.strategies] == [r.metrics for r in whole.strategies]


# -- the command line ----------------------------------------------------------------------------------------
def test_cli_compare_prints_the_table_and_writes_reports(tmp_path, monkeypatch, capsys, fast_encoder):  # noqa: F811
    from syntra_dspy.cli import main
    from syntra_dspy.lm.roles import LMRoles

    roles, _ = scripted_roles()
    monkeypatch.setattr(LMRoles, "from_spec", classmethod(lambda cls, *a, **k: roles))
    qrels = write_heldout_beir(tmp_path / "heldout")
    code = main(["compare", str(MINI_TASK), "--strategies", "none,self-improve", "--out", str(tmp_path / "out"),
                 "--artifacts", str(tmp_path / "artifacts"), "--index-dir", str(tmp_path / "index"),
                 "--sample-docs", "3", "--selection-target", "20", "--heldout-docs", "2",
                 "--heldout-qrels", str(qrels), "--heldout-max-queries", "3", "--no-chart"])
    out = capsys.readouterr().out
    assert code == 0 and "# Strategy comparison: mini" in out and "| 1 | self-improve |" in out
    assert (tmp_path / "out" / "comparison.json").is_file() and (tmp_path / "artifacts" / "mini").is_dir()


def test_cli_compare_compile_only_says_what_it_compiled_and_writes_no_report(tmp_path, monkeypatch, capsys,
                                                                          fast_encoder):  # noqa: F811
    from syntra_dspy.cli import main
    from syntra_dspy.lm.roles import LMRoles

    roles, _ = scripted_roles()
    monkeypatch.setattr(LMRoles, "from_spec", classmethod(lambda cls, *a, **k: roles))
    code = main(["compare", str(MINI_TASK), "--strategies", "none", "--out", str(tmp_path / "out"),
                 "--artifacts", str(tmp_path / "artifacts"), "--index-dir", str(tmp_path / "index"),
                 "--sample-docs", "3", "--selection-target", "20", "--compile-only", "--no-chart"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("none: ") and "not scored yet: run again without --compile-only" in out
    assert not (tmp_path / "out" / "comparison.json").exists() and (tmp_path / "out" / "rows" / "none.json").is_file()


@pytest.mark.parametrize("argv, message", [
    (["--strategies", "none,magic"], "unknown 'magic'"),  # refused by the parser: the choices it lists
    (["--strategies", "none", "--human-feedback", "f.jsonl"], "--human-feedback is only used by the 'human'"),
    (["--strategies", "none", "--human-labels", "q.tsv"], "--human-labels is only used by the 'human'"),
    (["--strategies", "none", "--no-review"], "--no-review is only used by the 'human'"),
    (["--strategies", "human", "--no-review", "--human-feedback", "f.jsonl"], "--no-review leaves no session"),
    (["--strategies", "none", "--downstream"], "--downstream needs an evaluation dataset"),
])
def test_cli_compare_refuses_bad_options_with_a_fix(argv, message, capsys):
    from syntra_dspy.cli import main

    try:
        code = main(["compare", str(MINI_TASK), *argv])
    except SystemExit as exited:  # a value argparse refuses
        code = exited.code
    assert code == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_downstream_produces_trains_and_evaluates_each_strategy(tmp_path, monkeypatch):
    """The one scripted end-to-end check of --downstream: a real (tiny) LoRA step on the bundled MiniLM."""
    import shutil

    from test_compare_helpers import FastEncoder

    from syntra_dspy.comparison import DownstreamOptions
    from syntra_dspy.training import TrainConfig

    use_fast_encoder(monkeypatch)
    monkeypatch.setattr("syntra_dspy.production.setup.load_encoder", lambda *a, **k: FastEncoder())
    qrels = write_heldout_beir(tmp_path / "eval")
    shutil.copy(MINI_TASK.parent / "corpus.jsonl", tmp_path / "eval" / "corpus.jsonl")
    roles, _ = scripted_roles()
    options = DownstreamOptions(dataset=f"beir:{tmp_path / 'eval'}:test", docs=4, records=2,
                                # one step moves the weights only without warmup (a warmup step runs at lr 0)
                                train=TrainConfig(max_steps=1, batch_size=4, num_negatives=1, warmup_ratio=0.0))
    result = compare_strategies(MINI_TASK, strategies="none,self-improve", out=tmp_path / "out", lms=roles,
                                index_dir=tmp_path / "index", settings=SETTINGS,
                                heldout=HeldoutOptions(docs=2, qrels=qrels), downstream=options, chart=False)
    by = {r.strategy: r for r in result.strategies}
    improved, untouched = by["self-improve"].downstream, by["none"].downstream
    assert improved["records"] > 0 and improved["train_steps"] == 1 and 0.0 <= improved["nDCG@10"] <= 1.0
    assert improved["trained_on"] == min(2, improved["records"])  # every row trains on as many records
    # the brain's unrefined annotator never labels a positive: nothing to train on, and it says so
    assert untouched["records"] == 0 and "no training records" in untouched["error"]
    assert by["self-improve"].rank == 1
    assert result.baseline["model"] == "all-MiniLM-L6-v2" and "nDCG@10" in result.baseline
    assert "nDCG@10" in (tmp_path / "out" / "comparison.md").read_text()


def test_a_comparison_is_configured_by_one_config_or_its_fields_as_keywords():
    from syntra_dspy.comparison import CompareConfig

    config = CompareConfig(strategies="none, gepa", heldout=None, settings=None)
    assert config.strategies == ("none", "gepa")
    assert config.heldout == HeldoutOptions() and config.settings == CompileSettings()
    with pytest.raises(ConfigError, match="listed twice"):
        CompareConfig(strategies=["none", "none"])
    with pytest.raises(ConfigError, match="unknown strategy nope") as info:
        CompareConfig(strategies="none,nope")
    assert info.value.field == "strategies"
    with pytest.raises(ConfigError) as info:
        HeldoutOptions(docs=0)
    assert info.value.field == "docs"
    with pytest.raises(ConfigError, match="not both"):  # refused before the task is read
        compare_strategies("no-such-task.yaml", config, chart=False)


def test_rows_take_labels_and_the_reference_is_human_calibration_when_compared():
    from syntra_dspy.comparison import CompareConfig

    config = CompareConfig(strategies="none,self-improve,gepa,human,developer=human")
    assert config.rows()[-1] == ("developer", "human") and config.reference_row() == "human"
    assert CompareConfig(strategies="none,self-improve").reference_row() == "self-improve"
    with pytest.raises(ConfigError, match="names another strategy"):
        CompareConfig(strategies="none,gepa=human")
    with pytest.raises(ConfigError, match="listed twice"):
        CompareConfig(strategies="human,human")
    with pytest.raises(ConfigError, match="not one of the rows"):
        CompareConfig(strategies="none,human", reference="gepa").reference_row()


def test_held_out_pairs_on_a_calibration_query_are_refused():
    from syntra_dspy.comparison.heldout import JudgedItem, check_apart

    items = [JudgedItem("1", "BLM gene encodes RecQ-class DNA helicase.", "d1", "positive", "judged")]
    check_apart(items, ["Another claim."])
    with pytest.raises(ConfigError, match="1 held-out query is also a compile's calibration or few-shot query"):
        check_apart(items, ["blm gene encodes  RecQ-class DNA helicase."])


def test_a_row_calibrating_another_rows_grades_labels_as_if_it_had_graded_them(caplog):
    """A comparison row whose grading prompt is an earlier row's takes that row's grades of the held-out pairs: its
    own (list-relative) calibration then gives exactly the labels and scores it would give by grading again, with
    no grading call."""
    from test_judge_cascade import HYBRID, Program

    from syntra_dspy.comparison.heldout import JudgedItem
    from syntra_dspy.comparison.scoring import SharedGrades, label_items

    rng = random.Random(3)
    texts = {f"d{n}": f"{rng.uniform(0, 3):.3f}" for n in range(12)}
    items = [JudgedItem(f"q{n // 4}", f"claim {n // 4}", f"d{n}", "positive" if n % 4 == 0 else "hard_negative",
                        "judged", listed=n % 4 != 3) for n in range(12)]
    corpus = {d: SimpleNamespace(content=t) for d, t in texts.items()}
    cosine = {d: rng.uniform(0.2, 0.8) for d in texts}
    bm25 = SimpleNamespace(scores=lambda query, ids: [float(i[1:]) for i in ids])
    kwargs = {"chunk_size": 1, "similarity": lambda q, d: cosine[d], "lexical": bm25}

    with caplog.at_level("INFO", logger="syntra_dspy.comparison.scoring"):
        first = label_items(Program(HYBRID), items, corpus, **kwargs)
    assert "labelled 12/12 held-out pairs" in caplog.text  # a long labelling shows progress
    labels = [{"query_id": i.query_id, "doc_id": i.doc_id, "grade": j.grade.to_dict()} for i, j in zip(items, first)]
    shared = SharedGrades.of_labels("self-improve", labels)
    # another calibration, the same grading prompt: its own labels, no call
    other = HYBRID.model_copy(update={"positive_threshold": 2.0, "hard_threshold": -3.0})
    asked, graded = Program(other), label_items(Program(other), items, corpus, **kwargs)
    reused = label_items(asked, items, corpus, grades=shared.grades, **kwargs)
    assert asked.asked == [] and reused == graded
    assert [j.klass for j in reused] != [j.klass for j in first]  # the calibration, not the grades, decides
    # a pair the earlier row could not grade is graded now, and its query's list is settled as a whole
    partial = {k: v for k, v in shared.grades.items() if k != ("q1", "d5")}
    asked = Program(other)
    assert label_items(asked, items, corpus, grades=partial, **kwargs) == graded and asked.asked == [texts["d5"]]
