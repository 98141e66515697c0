"""How much can records still teach an encoder? Measured before any training step, in minutes.

A contrastive loss learns only from records whose positive the encoder does not already rank above the negatives;
a distillation loss learns where the teacher orders a record's candidates differently from the encoder, or puts
them further apart. For each record this scores the untrained encoder on its own texts:

* ``loss``: InfoNCE over the positive and the hard negatives at the training temperature (averaged over positives,
  since training draws one of them per record); ``positive_first``: a positive above every negative; ``margin``:
  the best positive's cosine minus the best negative's;
* per teacher (:mod:`syntra_dspy.training.teachers`): ``tau``, Kendall's rank correlation between the teacher's
  scores and the encoder's cosines over the record's candidates; ``discordant``, the share of candidate pairs the
  two order differently (ties in either left out); ``margin_mse`` and ``kl``, the distillation losses a first
  step would see (teacher standardised over the record and scaled as training scales it).

``syntra export RUN.db --stats --encoder MODEL`` reports the summary for a run's records and the user's own base
model; ``benchmarks/teaching_signal.py`` compares record sets with it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from syntra_dspy.errors import InputError
from syntra_dspy.training.config import TrainConfig
from syntra_dspy.training.data import TrainingRecord
from syntra_dspy.training.teachers import TEACHERS, Teacher


def record_vectors(records: Sequence[TrainingRecord], encoder: Any, *, batch_size: int = 64
                   ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(query vector, positive vectors, negative vectors) per record, each text encoded once."""
    texts = list(dict.fromkeys(t for r in records for t in (*r.pos, *r.neg)))
    docs = encoder.encode_documents(texts, batch_size=batch_size)
    row = {t: i for i, t in enumerate(texts)}
    queries = encoder.encode_queries([r.query for r in records], batch_size=batch_size)
    return [(q, docs[[row[t] for t in r.pos]], docs[[row[t] for t in r.neg]]) for r, q in zip(records, queries,
                                                                                            strict=True)]


def contrastive_signal(query: np.ndarray, pos: np.ndarray, neg: np.ndarray, scale: float) -> dict[str, float]:
    """InfoNCE loss, positive-first and margin of one record (rows are L2-normalised vectors)."""
    pos_sims, neg_sims = pos @ query, neg @ query
    best_neg = float(neg_sims.max())
    losses = []
    for p in pos_sims:
        logits = scale * np.concatenate([[p], neg_sims])
        logits -= logits.max()
        losses.append(float(-(logits[0] - np.log(np.exp(logits).sum()))))
    return {"loss": float(np.mean(losses)), "positive_first": float(pos_sims.max() > best_neg),
            "margin": float(pos_sims.max() - best_neg)}


def disagreement(teacher: Sequence[float], student: Sequence[float]) -> dict[str, float | None]:
    """Kendall's tau-b and the share of discordant pairs between two scorings of the same candidates."""
    concordant = discordant = 0
    n = len(teacher)
    for i in range(n):
        for j in range(i + 1, n):
            t, s = teacher[i] - teacher[j], student[i] - student[j]
            if t == 0 or s == 0:
                continue
            if (t > 0) == (s > 0):
                concordant += 1
            else:
                discordant += 1
    pairs = concordant + discordant
    if not pairs:
        return {"tau": None, "discordant": None}
    from scipy.stats import kendalltau

    tau = kendalltau(teacher, student).statistic
    return {"tau": None if tau is None or math.isnan(tau) else float(tau), "discordant": discordant / pairs}


def distillation_signal(teacher: Sequence[float], student: Sequence[float], temperature: float) -> dict[str, float]:
    """First-step margin-MSE and KL losses of one record: index 0 is the positive, teacher already scaled."""
    t, s = np.asarray(teacher, dtype=float), np.asarray(student, dtype=float)
    mse = float(np.mean(((s[0] - s[1:]) - (t[0] - t[1:])) ** 2))
    tl, sl = t / temperature, s / temperature
    tp = np.exp(tl - tl.max())
    tp /= tp.sum()
    log_sp = sl - sl.max() - np.log(np.exp(sl - sl.max()).sum())
    kl = float(np.sum(np.where(tp > 0, tp * (np.log(np.where(tp > 0, tp, 1.0)) - log_sp), 0.0)))
    return {"margin_mse": mse, "kl": kl}


def score_records(records: Sequence[TrainingRecord], encoder: Any, *, config: TrainConfig | None = None,
                  teachers: Sequence[str] = TEACHERS) -> list[dict[str, Any]]:
    """Per record: the contrastive figures and, for each teacher the record has grades for, its disagreement with
    the encoder and first-step distillation losses (over the positive of highest teacher score and every negative)."""
    config = config or TrainConfig()
    if not records:
        raise InputError("no records to score", hint="export a run with records first")
    out = []
    for rec, (q, pos, neg) in zip(records, record_vectors(records, encoder), strict=True):
        row: dict[str, Any] = {"query_id": rec.query_id, **contrastive_signal(q, pos, neg, config.scale),
                               "teachers": {}}
        cosines = [float(v) for v in np.concatenate([pos @ q, neg @ q])]
        for name in teachers:
            try:
                t_pos, t_neg = Teacher(name, scale=config.teacher_scale).score(rec)
            except InputError:
                continue  # the record carries no grades this teacher reads
            best = int(np.argmax(t_pos))
            teacher = [t_pos[best], *t_neg]
            student = [cosines[best], *cosines[len(t_pos):]]
            row["teachers"][name] = {**disagreement(t_pos + t_neg, cosines),
                                     **distillation_signal(teacher, student, config.temperature)}
        out.append(row)
    return out


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means (and the loss's median) over records; per teacher over the records it could score."""
    losses = [r["loss"] for r in rows]
    summary: dict[str, Any] = {
        "records": len(rows), "loss": statistics.fmean(losses), "loss_median": statistics.median(losses),
        "positive_first": statistics.fmean(r["positive_first"] for r in rows),
        "margin_median": statistics.median(r["margin"] for r in rows), "teachers": {}}
    names = list(dict.fromkeys(n for r in rows for n in r["teachers"]))
    for name in names:
        scored = [r["teachers"][name] for r in rows if name in r["teachers"]]

        def mean(key: str, scored: list[dict[str, Any]] = scored) -> float | None:
            values = [s[key] for s in scored if s[key] is not None]
            return statistics.fmean(values) if values else None

        summary["teachers"][name] = {"records": len(scored), "tau": mean("tau"), "discordant": mean("discordant"),
                                     "margin_mse": mean("margin_mse"), "kl": mean("kl")}
    return summary


def format_signal(summary: dict[str, Any], *, encoder: str, config: TrainConfig) -> list[str]:
    """The summary as report lines (``syntra export --stats --encoder``)."""
    lines = [f"teaching   for {encoder}, before training: InfoNCE loss {summary['loss']:.3f} (median "
             f"{summary['loss_median']:.3f}) at temperature {config.temperature}; the positive is already above every "
             f"hard negative for {summary['positive_first']:.0%} of {summary['records']} records (median margin "
             f"{summary['margin_median']:+.3f})"]
    for name, t in summary["teachers"].items():
        tau = "—" if t["tau"] is None else f"{t['tau']:+.2f}"
        disc = "—" if t["discordant"] is None else f"{t['discordant']:.0%}"
        lines.append(f"           teacher {name}: orders {disc} of candidate pairs differently (Kendall tau {tau}); "
                     f"first-step margin-MSE {t['margin_mse']:.4f}, KL {t['kl']:.3f} (scale {config.teacher_scale}; "
                     f"{t['records']} records)")
    return lines
