"""benchmarks/compare_judgments.py on committed agreement logs: no LM call, so the committed figures must come out
again, and a log read under another artifact's keys is refused rather than compared on nothing."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FRESH = REPO / "benchmarks/results/judge_agreement_hybrid_fresh"
ARTIFACT = REPO / "artifacts/scifact/22e653baa2bb"
SMALL = FRESH / "small-judge"


def test_two_builds_logs_give_the_committed_comparison():
    from benchmarks.compare_judgments import compare

    out = compare(ARTIFACT, FRESH / "candidates.json", FRESH / "judgments.jsonl",
                  FRESH / "avx512-build/judgments.jsonl")
    assert (out["claims"], out["candidates"]) == (50, 463)
    assert (out["ref"]["binary_kappa"], out["new"]["binary_kappa"]) == (0.519, 0.497)
    assert out["labels_differ"] == 8
    assert out["paired_kappa_difference"]["difference"] == pytest.approx(-0.022, abs=5e-4)


def test_a_log_of_another_version_is_read_and_cut_with_that_versions_calibration():
    from benchmarks.compare_judgments import compare

    out = compare(ARTIFACT, FRESH / "candidates.json", FRESH / "avx512-build/judgments.jsonl",
                  SMALL / "judgments.jsonl", new_artifact=SMALL / "artifact/scifact/46228615c0c3")
    assert out["new"]["artifact"] == "46228615c0c3" and out["ref"]["artifact"] == "22e653baa2bb"
    assert (out["new"]["binary_kappa"], out["new"]["positive_recall"]) == (0.478, 0.389)
    assert out["labels_differ"] == 53


def test_a_log_read_under_keys_it_does_not_hold_is_refused():
    from benchmarks.compare_judgments import compare

    with pytest.raises(SystemExit, match="--new-artifact"):
        compare(ARTIFACT, FRESH / "candidates.json", FRESH / "avx512-build/judgments.jsonl", SMALL / "judgments.jsonl")


def test_a_margin_cascade_labels_a_log_as_production_would_and_gives_the_replayed_figures():
    from benchmarks.compare_judgments import compare

    store = REPO / "benchmarks/runs/scifact-hybrid-v2.db.gz"
    out = compare(ARTIFACT, FRESH / "candidates.json", FRESH / "judgments.jsonl", FRESH / "judgments.jsonl",
                  new_cascade_grades=store)
    # benchmarks/results/cost_replay: margin 0.95 learned on the run store, held-out seed 1 (these claims)
    assert out["new"]["cascade"]["coverage"] == 0.95 and out["new"]["cascade"]["lists"] == 324
    assert out["new"]["skipped"] == 89 and out["labels_differ"] == 6
    assert (out["ref"]["binary_kappa"], out["new"]["binary_kappa"]) == (0.519, 0.526)
    wider = compare(ARTIFACT, FRESH / "candidates.json", FRESH / "judgments.jsonl", FRESH / "judgments.jsonl",
                    new_cascade_grades=store, new_cascade_coverage=0.8)
    assert wider["new"]["skipped"] > out["new"]["skipped"]


def test_samples_of_other_claims_compare_pooled():
    from benchmarks.compare_judgments import compare

    seed2 = REPO / "benchmarks/results/judge_agreement_weighted/seed2"
    samples = [FRESH / "candidates.json", seed2 / "candidates.json"]
    logs = [FRESH / "judgments.jsonl", seed2 / "judgments.jsonl"]
    out = compare(ARTIFACT, samples, logs, logs, new_cascade_grades=REPO / "benchmarks/runs/scifact-hybrid-v2.db.gz")
    # benchmarks/results/cost_replay: the same rule on both held-out samples together
    assert (out["claims"], out["candidates"]) == (100, 936)
    assert out["new"]["skipped"] == 173 and out["labels_differ"] == 19
    assert out["paired_kappa_difference"]["difference"] == pytest.approx(0.507 - 0.519, abs=1e-3)
    with pytest.raises(SystemExit, match="twice"):
        compare(ARTIFACT, [FRESH / "candidates.json"] * 2, logs, logs)


def test_a_margin_learned_from_the_artifacts_own_calibration_grades_is_replayed_as_production_learns_it():
    """experiments/judge_guidance: the guidance-free version keeps its 139 calibration grades, from which production
    learns the margin when no --cascade-grades is given; its held-out log (keyed by that version) is committed."""
    from benchmarks.compare_judgments import compare

    guidance = REPO / "experiments/judge_guidance"
    weighted = REPO / "benchmarks/results/judge_agreement_weighted/seed2"
    args = (ARTIFACT, [FRESH / "candidates.json", weighted / "candidates.json"],
            [FRESH / "judgments.jsonl", weighted / "judgments.jsonl"], guidance / "judgments.jsonl")
    new = REPO / "artifacts/scifact/bfb6cfdf9e09"
    plain = compare(*args, new_artifact=new)
    assert plain["paired_kappa_difference"]["difference"] == pytest.approx(-0.006, abs=5e-4)  # as the probe measured
    assert "cascade" not in plain["new"]
    own = compare(*args, new_artifact=new, new_cascade_own=True)
    assert own["new"]["cascade"]["learned_from"] == "calibration samples" and own["new"]["cascade"]["lists"] == 15
    assert own["new"]["skipped"] == 334 and own["new"]["binary_kappa"] == 0.474
    assert own["paired_kappa_difference"]["difference"] == pytest.approx(-0.045, abs=5e-4)


def test_a_margin_learned_from_a_stores_lists_regraded_with_the_other_prompt_gives_the_committed_replay(tmp_path):
    """experiments/judge_guidance: the issue-day store's 324 production lists regraded with the guidance-free prompt
    teach that judge's margin, which production refuses to learn from the store's own (issue-day) grades; the first
    95 lists regraded gave the borderline figure before them."""
    from benchmarks.compare_judgments import compare

    guidance = REPO / "experiments/judge_guidance"
    weighted = REPO / "benchmarks/results/judge_agreement_weighted/seed2"
    store = REPO / "benchmarks/runs/scifact-hybrid-v2.db.gz"
    regrades = guidance / "production-lists-noguidance.jsonl"
    args = (ARTIFACT, [FRESH / "candidates.json", weighted / "candidates.json"],
            [FRESH / "judgments.jsonl", weighted / "judgments.jsonl"], guidance / "judgments.jsonl")
    kw = {"new_artifact": REPO / "artifacts/scifact/bfb6cfdf9e09", "new_cascade_grades": store}
    out = compare(*args, **kw, new_cascade_regrades=regrades)
    assert out["new"]["cascade"]["lists"] == 324 and "regraded" in out["new"]["cascade"]["learned_from"]
    assert (out["new"]["skipped"], out["new"]["binary_kappa"]) == (135, 0.507)
    assert out["paired_kappa_difference"]["difference"] == pytest.approx(-0.0125, abs=5e-4)
    first = tmp_path / "first-95-lists.jsonl"  # the rows graded by the first deadline
    first.write_text("".join(regrades.read_text(encoding="utf-8").splitlines(keepends=True)[:763]), encoding="utf-8")
    early = compare(*args, **kw, new_cascade_regrades=first)
    assert (early["new"]["cascade"]["lists"], early["new"]["skipped"], early["new"]["binary_kappa"]) == (95, 167, 0.501)
    assert early["paired_kappa_difference"]["difference"] == pytest.approx(-0.018, abs=5e-4)
    with pytest.raises(SystemExit, match="--new-cascade-grades"):
        compare(*args, new_artifact=kw["new_artifact"], new_cascade_regrades=regrades)
    few = tmp_path / "few-lists.jsonl"  # the first two lists: too few to learn a margin from
    few.write_text("".join(regrades.read_text(encoding="utf-8").splitlines(keepends=True)[:16]), encoding="utf-8")
    with pytest.raises(SystemExit, match="--new-cascade-regrades: a margin needs the grades of at least"):
        compare(*args, **kw, new_cascade_regrades=few)
