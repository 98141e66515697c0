"""Safe, honest defaults: produce never runs the whole corpus by surprise, calls in flight follow the engine, options
that would do nothing are refused or named, and --dry-run says what a compile or a run will cost before any LM call.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import re
import shlex
import sqlite3
from pathlib import Path

import pytest
from helpers import MINI_TASK
from test_produce_support import mini_artifact

from syntra_dspy.artifacts.manifest import Manifest
from syntra_dspy.cli import build_parser, main
from syntra_dspy.errors import ConfigError
from syntra_dspy.estimate import (
    COMPILE_PER_CALL,
    PRODUCE_CALLS,
    PRODUCE_PER_CALL,
    compile_calls,
    compile_estimate,
    measured_per_call,
    produce_estimate,
)
from syntra_dspy.optimizers.progress import CompileProgress
from syntra_dspy.production import RunStore, produce
from syntra_dspy.production.config import DEFAULT_DOCS, ProduceConfig
from syntra_dspy.testing import SyntraBrain, scripted_lm

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


def _no_lm(monkeypatch):
    """Fail the test if anything builds or prepares an LM."""
    from syntra_dspy.lm import roles

    def refuse(*args, **kwargs):
        raise AssertionError("a dry run built an LM")

    monkeypatch.setattr(roles, "build_lm", refuse)
    monkeypatch.setattr(roles.LMRoles, "from_spec", classmethod(refuse))
    monkeypatch.setattr("syntra_dspy.production.setup.build_lm", refuse)


# --- how many documents, how many calls in flight -----------------------------------------------------------


def test_docs_default_to_a_few_for_a_new_store_and_to_the_plan_when_resuming():
    config = ProduceConfig()
    assert config.docs is None and config.plan_target(None) == (DEFAULT_DOCS, True) and DEFAULT_DOCS == 10
    stored = {"target": 40, "count": 37}  # a selection that kept fewer than it was asked for: exhausted
    assert config.plan_target(stored) == (37, False)  # a resumed store keeps its plan
    assert ProduceConfig(docs="all").plan_target(None) == (None, True)
    assert ProduceConfig(docs="all").plan_target(stored) == (None, False)
    assert ProduceConfig(docs=50).plan_target({"target": 37, "count": 37}) == (50, True)
    with pytest.raises(ConfigError, match="already plans 37 documents, more than --docs 3") as raised:
        ProduceConfig(docs=3).plan_target(stored)
    assert raised.value.hint == "omit --docs or pass --docs 37 or more"
    with pytest.raises(ConfigError, match="docs"):
        ProduceConfig(docs="most")
    args = build_parser().parse_args(["produce", "art", "--store", "r.db", "--docs", "all"])
    assert args.docs == "all"
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["produce"].format_help().split())
    assert "default: 10 for a new run store" in help_text and "'all': every document" in help_text


def test_concurrency_follows_what_the_engine_serves():
    assert ProduceConfig().with_concurrency(embedded=True).concurrency == 1
    assert ProduceConfig().with_concurrency(embedded=False).concurrency == 4
    assert ProduceConfig(concurrency=3).with_concurrency(embedded=True).concurrency == 3
    assert ProduceConfig().max_errors == 10


def test_a_new_run_plans_the_default_few_and_says_how_to_ask_for_all(mini, minilm, tmp_path, caplog):
    art, index = mini
    store = tmp_path / "run.db"
    with caplog.at_level(logging.INFO, logger="syntra_dspy.production.runner"):
        summary = produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
                          progress=False, queries_per_doc=1, top_k=3, chunk_size=3)
    assert summary.documents["planned"] == DEFAULT_DOCS
    assert "--docs all for every document" in caplog.text
    # resuming without --docs keeps the plan (no error, nothing new planned); --docs all plans everything
    again = produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
                    progress=False, queries_per_doc=1, top_k=3, chunk_size=3)
    assert again.documents["planned"] == DEFAULT_DOCS and again.processed == 0
    with sqlite3.connect(store) as db:  # each session records the plan it ran under
        options = [json.loads(row[0]) for row in db.execute("SELECT options FROM sessions ORDER BY id")]
    assert [o["docs"] for o in options] == [DEFAULT_DOCS, DEFAULT_DOCS]


# --- options that would do nothing ----------------------------------------------------------------------------


def test_chunk_size_under_a_graded_judge_is_refused(tmp_path_factory, minilm, tmp_path):
    art, index = mini_artifact(tmp_path_factory, judge="graded")
    with pytest.raises(ConfigError, match="graded judge grades one candidate per call") as raised:
        produce(art, tmp_path / "run.db", generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
                progress=False, docs=1, chunk_size=4)
    assert raised.value.field == "chunk_size" and not (tmp_path / "run.db").exists()


def test_compile_refuses_settings_its_judge_does_not_use(capsys):
    assert main(["compile", str(MINI_TASK), "--chunk-size", "2"]) == 2  # default: the graded judge
    assert "--chunk-size 2 would do nothing" in capsys.readouterr().err
    assert main(["compile", str(MINI_TASK), "--judge-mode", "written", "--judge-feature", "hybrid"]) == 2
    assert "tune the graded judge's calibration" in capsys.readouterr().err


def test_a_retry_temperature_without_retries_is_named(caplog):
    from syntra_dspy.production.runner import _warn_unused

    with caplog.at_level(logging.WARNING):
        _warn_unused(ProduceConfig(retry_temperature=0.9))
    assert "--retry-temperature applies to documents redone with --retry-failed" in caplog.text
    caplog.clear()
    _warn_unused(ProduceConfig(retry_failed=True, retry_temperature=0.9))
    _warn_unused(ProduceConfig())
    assert caplog.text == ""


def test_the_demo_passes_only_current_options(capsys):
    """Every syntra command in scripts/demo.sh parses with the script's defaults, with no deprecated spelling and no
    option that does nothing (the graded judge takes no --chunk-size; concurrency follows the engine)."""
    script = (REPO / "scripts" / "demo.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    values = {"artifact": "artifacts/x/0", **dict(re.findall(r"^(\w+)=([^\s\"$]+)", script, flags=re.MULTILINE)),
              **dict(re.findall(r'^(\w+)="\$\{\w+:-([^}]*)\}"', script, flags=re.MULTILINE))}
    commands = [line.strip() for line in script.splitlines() if line.strip().startswith('"$syntra"')]
    assert len(commands) >= 5
    for line in commands:
        words = shlex.split(re.sub(r"\$(\w+)", lambda m: values[m.group(1)], line.split("|")[0].split("#")[0]))
        build_parser().parse_args(words[1:])
        assert "--chunk-size" not in words and "--concurrency" not in words
    assert values["docs"] == "3" and values["top_k"] == "5"
    assert "deprecated" not in capsys.readouterr().err


def test_the_demo_fits_half_an_hour_of_lm_work_by_the_documented_figures(tmp_path, monkeypatch, capsys):
    """The sizing docs/flow.md states: the demo's compile at most ~14 min and its 3 documents ~13.5 min of LM
    work on 2 cores, by the figures --dry-run falls back on (the compile's assumes every loop takes both attempts)."""
    _no_lm(monkeypatch)
    script = (REPO / "scripts" / "demo.sh").read_text(encoding="utf-8").replace("\\\n", " ")
    (line,) = [line for line in script.splitlines() if line.strip().startswith('"$syntra" compile')]
    flags = shlex.split(line.split("|")[0])[3:]  # after `"$syntra" compile "$task"`; the --out below wins
    assert main(["compile", str(REPO / "examples/scifact-sample/task.yaml"), *flags, "--out", str(tmp_path),
                 "--dry-run", "--json"]) == 0
    compile_plan = json.loads(capsys.readouterr().out)
    production = produce_estimate(3, queries_per_doc=2, top_k=5, chunk_size=1, graded=True, embedded=True,
                                  concurrency=1, what="the demo")
    assert compile_plan["upper_bound"] and compile_plan["seconds"] / 60 == pytest.approx(14, abs=0.5)
    assert production.seconds / 60 == pytest.approx(13.5, abs=0.5)
    assert (compile_plan["seconds"] + production.seconds) / 60 < 28


# --- --dry-run: the plan before any LM call -------------------------------------------------------------------


def test_produce_dry_run_plans_a_new_store_without_loading_or_writing_anything(mini, tmp_path, monkeypatch, capsys):
    art, _ = mini
    _no_lm(monkeypatch)
    store = tmp_path / "new.db"
    assert main(["produce", str(art), "--store", str(store), "--dry-run", "--queries-per-doc", "2", "--top-k", "5",
                 "--chunk-size", "5", "--generator", "embedded"]) == 0
    out = capsys.readouterr().out
    assert not store.exists()
    assert "a new run store: up to 10 documents of the corpus's 40" in out and "--docs all" in out
    assert re.search(r"annotate\s+20\s", out)  # 10 documents x 2 queries x one 5-candidate call (written judge)
    assert "expected time:" in out and "scifact-hybrid-v2" in out
    assert "extraction and writing are upper bounds" in out  # the figures predate today's defaults
    assert main(["produce", str(art), "--store", str(store), "--dry-run", "--queries-per-doc", "2",
                 "--max-identifiers", "all", "--no-hide-copied", "--generator", "embedded"]) == 0
    assert "upper bounds" not in capsys.readouterr().out  # the settings the figures were measured with
    assert main(["produce", str(art), "--store", str(store), "--dry-run", "--json", "--docs", "all",
                 "--generator", "embedded"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["stages"][0]["stage"] == "extract" and plan["stages"][0]["calls"] == pytest.approx(40 * 1.25)


def test_produce_dry_run_on_a_resumed_store_uses_its_own_figures(mini, minilm, tmp_path, monkeypatch, capsys):
    art, index = mini
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=1, top_k=3, chunk_size=3)
    before = store.read_bytes()
    _no_lm(monkeypatch)
    argv = ["produce", str(art), "--store", str(store), "--dry-run", "--generator", "embedded", "--queries-per-doc",
            "1", "--top-k", "3", "--chunk-size"]
    assert main([*argv, "3", "--docs", "5"]) == 0
    out = capsys.readouterr().out
    assert "resuming" in out and "0 of its 2 planned documents left, up to 3 more by --docs" in out
    assert "this run store's own usage (2 documents processed)" in out
    assert store.read_bytes() == before
    assert main([*argv, "4"]) == 2  # another setting than the store's: the error produce would give
    assert "started with chunk_size=3, not 4" in capsys.readouterr().err
    assert main([*argv, "3", "--docs", "1"]) == 2  # fewer documents than it plans
    assert "already plans 2 documents, more than --docs 1" in capsys.readouterr().err


def test_compile_dry_run_counts_stages_attempts_and_trials_without_an_lm(monkeypatch, tmp_path, capsys):
    _no_lm(monkeypatch)
    assert main(["compile", str(MINI_TASK), "--dry-run", "--out", str(tmp_path / "none"), "--json",
                 "--max-attempts", "2", "--sample-docs", "3"]) == 0
    plan = json.loads(capsys.readouterr().out)
    calls = {s["stage"]: s["calls"] for s in plan["stages"]}
    assert calls["idattr"] == 2 * (3 + 3) and plan["upper_bound"] and plan["seconds"] > 0
    assert not (tmp_path / "none").exists()
    assert main(["compile", str(MINI_TASK), "--dry-run", "--strategy", "none", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    expected = out.split("expected time:")[1]
    assert "(none, graded judge, " in out and expected.startswith(" about") and "at most" not in expected


def test_the_estimates_follow_the_settings_and_the_measured_figures():
    plan = produce_estimate(10, queries_per_doc=2, top_k=8, chunk_size=1, graded=True, embedded=True, concurrency=4,
                            what="x")
    annotate = next(s for s in plan.stages if s.stage == "annotate")
    assert annotate.calls == 160 and annotate.seconds == pytest.approx(160 * PRODUCE_PER_CALL["annotate"][2])
    assert plan.concurrency == 1  # the embedded engine answers one call at a time
    served = produce_estimate(10, queries_per_doc=2, top_k=8, chunk_size=1, graded=True, embedded=False,
                              concurrency=4, what="x")
    assert served.seconds is None and "unknown" in "\n".join(served.lines())
    measured = produce_estimate(4, queries_per_doc=2, top_k=8, chunk_size=1, graded=True, embedded=False,
                                concurrency=4, what="x", processed=2,
                                usage={"annotate": {"calls": 32, "prompt_tokens": 3200, "completion_tokens": 32,
                                                    "seconds": 64.0}})
    assert next(s for s in measured.stages if s.stage == "annotate").seconds == pytest.approx(4 * 16 * 2.0)
    # the bundled sample's written-judge compile: 41 annotation calls an attempt in its history (5 queries x 8
    # candidates, controls among them, and the explanation), plus the refinement
    written = compile_calls(sample_docs=5, queries_per_doc=2, examples=5, annotation_candidates=8,
                            control_negatives=1, chunk_size=1, graded=False, graded_queries=False,
                            calibration_queries=0, infer_definition=True)
    assert written["annotation_instruction"] == 42 and written["idattr"] == 8 and written["query_instruction"] == 16
    # the SciFact graded compile: 139 graded calls an attempt (15 calibration queries x (8 candidates + a control),
    # and the positives retrieval missed), plus the explanation and the refinement
    graded = compile_calls(sample_docs=5, queries_per_doc=2, examples=5, annotation_candidates=8,
                           control_negatives=1, chunk_size=1, graded=True, graded_queries=False,
                           calibration_queries=10, infer_definition=False)
    assert graded["annotation_instruction"] == 137 and "task_definition" not in graded
    plan = compile_estimate(attempts=3, calls=written, graded=False, embedded=True, what="x")
    assert {s.stage: s.calls for s in plan.stages}["annotation_instruction"] == 3 * 42 and plan.upper_bound
    assert plan.seconds == pytest.approx(3 * sum(n * COMPILE_PER_CALL[k][2] for k, n in written.items()))
    once = compile_estimate(attempts=1, calls=written, graded=False, embedded=True, what="x",
                            usage={"idattr": {"calls": 10, "cached": 5, "prompt_tokens": 500, "completion_tokens": 50,
                                              "seconds": 20.0}}, usage_source="an earlier compile")
    assert not once.upper_bound and once.basis.startswith("an earlier compile for idattr; the manifests of")
    assert next(s for s in once.stages if s.stage == "idattr").seconds == pytest.approx(8 * 4.0)  # 5 uncached calls


def test_the_documented_figures_are_the_committed_measurements(tmp_path):
    """The per-call figures --dry-run falls back on are read off the committed SciFact store and artifacts."""
    store = tmp_path / "scifact.db"
    store.write_bytes(gzip.decompress((REPO / "benchmarks/runs/scifact-hybrid-v2.db.gz").read_bytes()))
    with RunStore.open(store, readonly=True) as run:
        usage, counts = run.usage(), run.document_counts()
        queries_per_doc = run.meta()["identity"]["queries_per_doc"]
    processed = counts["done"] + counts["partial"] + counts["failed"]
    assert processed == 215
    for stage, figures in measured_per_call(usage, uncached=False).items():
        assert figures == pytest.approx(PRODUCE_PER_CALL[stage], rel=0.01), stage
    assert usage["extract"]["calls"] / processed == pytest.approx(PRODUCE_CALLS["extract"], rel=0.01)
    assert usage["plan"]["calls"] / processed == pytest.approx(PRODUCE_CALLS["plan"], rel=0.02)
    assert usage["write"]["calls"] / processed / queries_per_doc == pytest.approx(PRODUCE_CALLS["write_per_query"],
                                                                                   rel=0.02)
    sample, scifact = (Manifest.model_validate_json((REPO / "artifacts" / name / "manifest.json").read_text())
                       for name in ("scifact-sample/65aeaa735911", "scifact/22e653baa2bb"))
    written = measured_per_call({k: u.model_dump() for k, u in sample.usage.items()}, uncached=True)
    for stage, figures in written.items():
        assert figures == pytest.approx(COMPILE_PER_CALL[stage], rel=0.01), stage
    graded = measured_per_call({k: u.model_dump() for k, u in scifact.usage.items()}, uncached=True)
    assert graded["annotation_instruction"] == pytest.approx(COMPILE_PER_CALL["annotation_instruction/graded"],
                                                             rel=0.01)


# --- the compile's progress line ------------------------------------------------------------------------------


def test_the_compile_progress_line_gives_the_stage_attempt_and_an_upper_bound_of_time_left():
    now = [0.0]
    progress = CompileProgress(["idattr", "query_instruction", "annotation_instruction"], 3, clock=lambda: now[0])
    assert "starting" in progress.line() and "no attempt finished yet" in progress.line()
    progress.stage_started("idattr")
    now[0] = 120.0
    progress.attempt_done()
    progress.stage_done(1)  # passed at once: its two other attempts are not needed
    line = progress.line()
    assert "1 of at most 7 attempts done in 2 min" in line and "at most about 12 min left" in line, line
    progress.stage_started("query_instruction")
    assert "stage 2/3 query_instruction, attempt 1/3" in progress.line()


def test_a_compile_logs_its_progress(tmp_path, caplog):
    from helpers import compile_mini

    with caplog.at_level(logging.INFO, logger="syntra_dspy.optimizers.progress"):
        compile_mini(tmp_path)
    lines = [r.getMessage() for r in caplog.records if r.name == "syntra_dspy.optimizers.progress"]
    assert lines and all(line.startswith("compile: stage") for line in lines)
    assert any("left" in line or "no attempt left" in line for line in lines)


def test_a_compile_dry_run_reads_an_earlier_compile_of_the_task_with_the_same_generator(tmp_path, monkeypatch,
                                                                                           capsys):
    from helpers import compile_mini

    artifact, _ = compile_mini(tmp_path)
    model = artifact.meta.generator.model
    _no_lm(monkeypatch)
    out = str(tmp_path / "artifacts")
    assert main(["compile", str(MINI_TASK), "--dry-run", "--json", "--out", out, "--generator", model]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["basis"] == ("the usage of an earlier compile of this task with the same generator "
                             f"({artifact.path})")
    assert main(["compile", str(MINI_TASK), "--dry-run", "--json", "--out", out]) == 0  # another generator
    assert json.loads(capsys.readouterr().out)["basis"].startswith("the manifests of artifacts/scifact-sample")


def test_the_compile_bar_counts_attempts_and_drops_those_not_needed(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with CompileProgress(["idattr", "query_instruction"], 3) as progress:
        progress.stage_started("idattr")
        progress.attempt_done()
        progress.stage_done(1)
        assert (progress._bar.n, progress._bar.total) == (1, 4)
        progress.stage_started("query_instruction")
        assert "stage 2/2 query_instruction, attempt 1/3" in terminal.getvalue()
    assert "compile" in terminal.getvalue() and "attempt" in terminal.getvalue()
    with CompileProgress(["idattr"], 3, live=False) as quiet:  # a person reviews at the terminal
        assert quiet._bar is None and quiet._thread is None


def test_compare_dry_run_plans_every_row_without_an_lm(monkeypatch, tmp_path, capsys):
    from test_compare_helpers import write_heldout_beir

    _no_lm(monkeypatch)
    qrels = write_heldout_beir(tmp_path / "beir")
    argv = ["compare", str(MINI_TASK), "--strategies", "none,self-improve,gepa,human", "--human-labels", str(qrels),
            "--no-review", "--heldout-qrels", str(qrels), "--heldout-max-queries", "3", "--out", str(tmp_path / "out"),
            "--artifacts", str(tmp_path / "artifacts"), "--dry-run"]
    assert main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    calls = {s["stage"]: s["calls"] for s in plan["stages"]}
    assert plan["upper_bound"] and plan["seconds"] > 0 and not (tmp_path / "out").exists()
    assert calls["none: annotation_instruction"] < calls["self-improve: annotation_instruction"]
    assert calls["gepa: GEPA annotation_instruction"] > 0 and calls["human: people's queries"] > 0
    # 3 held-out claims, each with its judged abstract, 5 unjudged retrieved and 2 random documents
    assert calls["self-improve: held-out judging"] == 3 * (1 + 5 + 2)
    assert main(argv) == 0
    assert "expected time: at most about" in capsys.readouterr().out
