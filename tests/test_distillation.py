"""Learning from the judge's grades: teachers, the examples' teacher column, the distillation losses, and the
teaching signal measured before training."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.training import TrainConfig, build_examples, records_from_dicts
from syntra_dspy.training.signal import contrastive_signal, disagreement, distillation_signal
from syntra_dspy.training.teachers import LABEL_GAP, Teacher, teacher_scores


def _grade(doc: str, label: int, score: float, expected: float, bm25: float) -> dict:
    return {"doc_id": doc, "label": label, "score": score, "expected": expected, "probs": [0.1, 0.2, 0.3, 0.4],
            "bm25": bm25, "retrieval_score": 0.5}


def _record(**overrides) -> dict:
    grades = [_grade("p", 2, 9.0, 2.5, 4.0), _grade("a", 1, 1.0, 1.0, 9.0), _grade("b", 1, -1.0, 1.5, 1.0),
              _grade("c", 1, 0.0, 0.5, 2.0)]
    rec = {"query": "q", "pos": ["P"], "neg": ["A", "B", "C"], "pos_ids": ["p"], "neg_ids": ["a", "b", "c"],
           "pos_scores": [9.0], "neg_scores": [1.0, -1.0, 0.0], "labels": grades}
    rec.update(overrides)
    return rec


def _one(**overrides):
    return records_from_dicts([_record(**overrides)]).records[0]


def test_teachers_read_the_grades_in_the_records_order():
    rec = _one()
    assert teacher_scores("calibrated", rec.pos_grades, rec.neg_grades, 1, 3) == ([9.0], [1.0, -1.0, 0.0])
    assert teacher_scores("expected", rec.pos_grades, rec.neg_grades, 1, 3) == ([2.5], [1.0, 1.5, 0.5])
    # label+bm25: the judge's decision kept whole (every positive above every negative), BM25 inside it: the
    # negative BM25 likes best ("a", 9.0) ranks first among the negatives, although its BM25 beats the positive's
    pos, neg = teacher_scores("label+bm25", rec.pos_grades, rec.neg_grades, 1, 3)
    assert pos[0] > max(neg) and neg[0] > neg[2] > neg[1]
    assert pos[0] - LABEL_GAP < neg[0]
    # expected+bm25 adds the two standardised witnesses: "a" (weak E, strong BM25) beats "c" (weak both)
    pos, neg = teacher_scores("expected+bm25", rec.pos_grades, rec.neg_grades, 1, 3)
    assert neg[0] > neg[2]


def test_teacher_scores_are_standardised_per_record_then_scaled():
    rec = _one()
    pos, neg = Teacher("calibrated", scale=0.1).score(rec)
    values = np.array(pos + neg) / 0.1
    assert values.mean() == pytest.approx(0.0, abs=1e-9) and values.std() == pytest.approx(1.0)
    # a shift or stretch of a record's raw scores teaches the same thing
    shifted = _one(pos_scores=[95.0], neg_scores=[55.0, 45.0, 50.0])  # 5 x + 50
    a, b = Teacher("calibrated", scale=0.1).score(shifted), Teacher("calibrated", scale=0.1).score(rec)
    assert a[0] + a[1] == pytest.approx(b[0] + b[1])


def test_a_record_without_grades_is_refused_naming_the_record_and_field():
    bare = records_from_dicts([_record(), {"query": "q2", "pos": ["P"], "neg": ["N"]}], source="x.jsonl")
    with pytest.raises(InputError, match=r"record 2: carries no judge grades") as err:
        build_examples(bare, num_negatives=1, seed=0, teacher=Teacher("calibrated"))
    assert err.value.field == "pos_scores" and "x.jsonl" in str(err.value)
    no_bm25 = _record(labels=[{**g, "bm25": None} for g in _record()["labels"]])
    with pytest.raises(InputError, match="has no 'bm25'"):
        Teacher("label+bm25").score(records_from_dicts([no_bm25]).records[0], record=1)
    with pytest.raises(InputError, match=r"pos_scores\[0\]"):
        records_from_dicts([_record(pos_scores=["high"])])
    with pytest.raises(InputError, match="one per pos text"):
        records_from_dicts([_record(pos_scores=[1.0, 2.0])])


def test_examples_carry_the_teachers_scores_of_the_drawn_texts_and_draw_as_without_a_teacher():
    rows = [_record(query=f"q{i}", pos=[f"P{i}", f"Q{i}"], pos_ids=["p", "a"], pos_scores=[9.0, 8.0],
                    neg=[f"A{i}", f"B{i}"], neg_ids=["b", "c"], neg_scores=[-1.0, 0.0]) for i in range(12)]
    data = records_from_dicts(rows)
    plain = build_examples(data, num_negatives=3, seed=7)
    taught = build_examples(data, num_negatives=3, seed=7, teacher=Teacher("calibrated", scale=1.0))
    assert {k: v for k, v in taught.items() if k != "label"} == plain
    raw = {"p": 9.0, "a": 8.0, "b": -1.0, "c": 0.0}
    for i, label in enumerate(taught["label"]):
        texts = [taught["positive"][i], *(taught[f"negative_{k}"][i] for k in (1, 2, 3))]
        rec = data.records[i]
        mean, std = np.mean(list(raw.values())), np.std(list(raw.values()))
        by_text = dict(zip(rec.pos + rec.neg, ((raw[d] - mean) / std for d in ("p", "a", "b", "c")), strict=True))
        assert label == pytest.approx([by_text[t] for t in texts])


def test_distillation_settings_are_checked():
    with pytest.raises(ConfigError, match="unknown teacher"):
        TrainConfig(loss="margin-mse", teacher="oracle")
    with pytest.raises(ConfigError, match="needs num_negatives >= 1") as err:
        TrainConfig(loss="distill-kl", num_negatives=0)
    assert err.value.field == "num_negatives"
    with pytest.raises(ConfigError) as err:
        TrainConfig(teacher_scale=0)
    assert err.value.field == "teacher_scale"
    assert TrainConfig().loss_text == "CachedMultipleNegativesRankingLoss"
    assert TrainConfig(loss="margin-mse", teacher="label+bm25", infonce_weight=0.5).loss_text == (
        "MarginMSELoss (teacher label+bm25, scale 0.1) + 0.5 x MultipleNegativesRankingLoss")


def test_the_cli_offers_the_losses_and_teachers():
    from syntra_dspy.cli import build_parser
    from syntra_dspy.cli.train_cmd import config_from_args

    args = build_parser().parse_args(["train", "d.jsonl", "--encoder", "b", "--out", "o", "--loss", "distill-kl",
                                      "--teacher", "expected+bm25", "--teacher-scale", "0.05",
                                      "--infonce-weight", "1"])
    cfg = config_from_args(args)
    assert (cfg.loss, cfg.teacher, cfg.teacher_scale, cfg.infonce_weight) == ("distill-kl", "expected+bm25", 0.05, 1.0)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "d", "--encoder", "b", "--out", "o", "--teacher", "oracle"])


def test_the_distillation_losses_are_sentence_transformers_own_and_the_sum_embeds_once(minilm):
    import torch
    from sentence_transformers.sentence_transformer import losses

    from syntra_dspy.training.losses import WeightedLosses, build_loss

    model = minilm.model
    assert isinstance(build_loss(model, TrainConfig(loss="margin-mse")), losses.MarginMSELoss)
    kl = build_loss(model, TrainConfig(loss="distill-kl", temperature=0.05))
    assert isinstance(kl, losses.DistillKLDivLoss) and kl.student_temperature == kl.teacher_temperature == 0.05
    both = build_loss(model, TrainConfig(loss="margin-mse", infonce_weight=0.5))
    assert isinstance(both, WeightedLosses) and both.weights == [1.0, 0.5]
    columns = [["a claim about cells", "a claim about mice"], ["cells divide", "mice run"], ["stars", "rocks"]]
    labels = torch.tensor([[0.2, -0.1], [0.3, 0.0]])
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            features = [dict(model.tokenize(texts)) for texts in columns]
            alone = build_loss(model, TrainConfig(loss="margin-mse"))(features, labels)
            infonce = build_loss(model, TrainConfig(loss="mnrl"))(features, labels)
            summed = both(features, labels)
    finally:
        model.train(was)
    assert float(summed) == pytest.approx(float(alone) + 0.5 * float(infonce), rel=1e-5)


def test_signal_figures_by_hand():
    q = np.array([1.0, 0.0])
    same = np.array([[1.0, 0.0]])
    # a positive and a negative the encoder cannot tell apart: InfoNCE loss log 2, not first, margin 0
    found = contrastive_signal(q, same, same.copy(), 50.0)
    assert found["loss"] == pytest.approx(math.log(2)) and found["positive_first"] == 0.0 and found["margin"] == 0
    assert disagreement([3, 2, 1], [0.9, 0.8, 0.7]) == {"tau": pytest.approx(1.0), "discordant": 0.0}
    flipped = disagreement([3, 2, 1], [0.7, 0.8, 0.9])
    assert flipped["tau"] == pytest.approx(-1.0) and flipped["discordant"] == 1.0
    assert disagreement([1, 1], [0.5, 0.6]) == {"tau": None, "discordant": None}
    # a student that already matches the teacher: no margin error, no KL
    none = distillation_signal([0.5, 0.3, 0.1], [0.5, 0.3, 0.1], 0.02)
    assert none["margin_mse"] == pytest.approx(0.0) and none["kl"] == pytest.approx(0.0, abs=1e-9)
    off = distillation_signal([0.5, 0.3, 0.1], [0.3, 0.5, 0.1], 0.02)  # the positive and a negative swapped
    assert off["margin_mse"] == pytest.approx((0.4 ** 2 + 0.2 ** 2) / 2) and off["kl"] > 1


@pytest.mark.slow
def test_a_short_distillation_run_trains_and_says_what_taught_it(tmp_path: Path):
    rows = [_record(query=f"claim {i} about protein folding", pos=[f"Protein {i} folds in the cell."],
                    neg=[f"Stars {i} burn.", f"Rocks {i} erode.", f"Rivers {i} flow."]) for i in range(8)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    from syntra_dspy.training import train_embedding_model

    config = TrainConfig(loss="distill-kl", teacher="label+bm25", infonce_weight=1.0, max_steps=2, batch_size=4,
                         num_negatives=2, max_seq_length=32)
    result = train_embedding_model(path, base="all-MiniLM-L6-v2", out=tmp_path / "m", config=config, progress=False)
    report = json.loads(result.report_path.read_text())
    assert result.steps == 2 and result.final_loss is not None and math.isfinite(result.final_loss)
    assert report["effective"]["loss"] == "DistillKLDivLoss (teacher label+bm25, scale 0.1) + 1.0 x " \
                                          "MultipleNegativesRankingLoss"
    assert report["settings"]["teacher"] == "label+bm25"
    assert "label+bm25" in result.card_path.read_text()
