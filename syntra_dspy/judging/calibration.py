"""How graded judgments become training roles: thresholds fitted per task, compiled into the artifact.

A graded judgment gives E = sum k * p(k) in [0, 3]; the retriever gives the candidate's cosine similarity. Test
mode fits, on a calibration set with known classes (the few-shot queries' retrieved candidates: their positive,
the other candidates as presumed negatives, random corpus documents as easy negatives; plus any labels people
confirmed), one score and two cut points:

* score: E alone (``expected``); E and the cosine standardised on the calibration set and added (``fused``);
  ``relative``: the fused score plus how far the candidate's E and cosine stand above the *other* candidates of its
  query's retrieved list (each as a z-score against that list, standardised again on the calibration set); or
  ``hybrid``: the relative score plus a lexical witness, the candidate's BM25 score for the query and its standing
  in the list, standardised the same way (same-language tasks only). A relevant document stands out from the rest
  of its list; an absolute score alone cannot see that. Measured on 50 held-out SciFact claims (1.5B judge,
  leave-one-claim-out): binary kappa 0.46 relative, 0.61 hybrid (recall 0.53 and 0.62); on SciFact, BM25 alone is
  a stronger witness than the 1.5B model's label probabilities; ``weighted``: the same standardised terms (the
  hybrid's six, or the relative's four without BM25 scores), weighed by an L2-regularised logistic regression
  fitted on the calibration set instead of added with equal weight, since the witnesses are not equally strong.
  ``auto`` picks the score with the best leave-one-query-out agreement on the calibration set, so the choice is
  not an in-sample fit (``weighted`` only when asked for: see ``AUTO_FEATURES``);
* ``positive_threshold``: the cut that maximises binary Cohen's kappa (the middle of the best interval);
* ``hard_threshold``: below the positive cut, the cut that best separates related candidates (hard negatives)
  from unrelated ones (easy negatives), by three-class kappa.

The fitted :class:`JudgeCalibration` is a component of the program (saved in ``program.json``, so it is
versioned and verified like the instructions); production applies it unchanged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from syntra_dspy.judging.agreement import agreement, cohen_kappa, to_binary
from syntra_dspy.judging.settings import DEFAULT_GRADE_ORDER, GradeOrder

Klass = Literal["positive", "hard_negative", "easy_negative"]
Feature = Literal["expected", "fused", "relative", "hybrid", "weighted"]
FEATURES: tuple[Feature, ...] = ("expected", "fused", "relative", "hybrid", "weighted")
#: What ``auto`` chooses from. ``weighted`` is fitted and cross-validated (the summary shows it) but must be asked
#: for: on 50 SciFact claims no analysis had seen it agreed with people no better than ``hybrid`` (binary kappa
#: 0.500 against 0.519, positive recall 0.517 against 0.633), although its leave-one-query-out kappa on the
#: calibration set was higher (0.397 against 0.379): its extra fitted numbers cost more than they gave there.
AUTO_FEATURES: tuple[Feature, ...] = ("expected", "fused", "relative", "hybrid")
#: The scores that compare a candidate with the rest of its query's list, and those that always need its BM25
#: score (``weighted`` needs it when it was fitted with BM25 scores).
LIST_FEATURES: frozenset[str] = frozenset({"relative", "hybrid", "weighted"})
LEXICAL_FEATURES: frozenset[str] = frozenset({"hybrid"})
#: The standardised terms a score is made of, in the order they are added; each is standardised with the
#: calibration's ``<term>_mean`` and ``<term>_std``.
TERMS: tuple[str, ...] = ("expected", "cosine", "expected_standing", "cosine_standing", "lexical",
                          "lexical_standing")
_FEATURE_TERMS: dict[str, tuple[str, ...]] = {"fused": TERMS[:2], "relative": TERMS[:4], "hybrid": TERMS}
#: Inverse L2 strength of the ``weighted`` score's logistic regression (scikit-learn's default, not tuned). On the
#: 1.5B judge's SciFact grades, fitted on 15 claims and applied to 35 others (20 splits of each of two samples of 50
#: held-out claims): binary kappa +0.046 and +0.012 over the equal-weight sum (experiments/judge_weights).
WEIGHT_C = 1.0
#: The 0-3 label stored for each calibrated class (what export's 3/2 → positive, 1 → hard, 0 → easy reads back).
CLASS_LABEL: dict[str, int] = {"positive": 2, "hard_negative": 1, "easy_negative": 0}


@dataclass(frozen=True)
class CalibrationSample:
    """One judged candidate of the calibration set."""

    query: str
    expected: float
    cosine: float
    gold: Klass
    source: str  # example_positive | retrieved | control | human
    listed: bool = True  # in the query's retrieved list (False: a random control, or a positive added to the set)
    lexical: float | None = None  # BM25 score of the document for the query (None: not a corpus document)
    doc_id: str | None = None  # the candidate document (what a later recalibration matches saved grades by)


@dataclass(frozen=True)
class ListContext:
    """The other graded candidates of the same query's retrieved list (the candidate itself left out)."""

    expected: tuple[float, ...]
    cosine: tuple[float, ...]
    lexical: tuple[float, ...] = ()


#: Below this spread a list's z-score would blow up: the other candidates are then taken as one point.
_MIN_SPREAD = 1e-3


def standing(value: float, others: Sequence[float]) -> float:
    """How far ``value`` stands above ``others``, in their standard deviations (0 with fewer than two others)."""
    if len(others) < 2:
        return 0.0
    return (value - statistics.fmean(others)) / max(statistics.pstdev(others), _MIN_SPREAD)


def list_contexts(expected: Sequence[float], cosine: Sequence[float], listed: Sequence[bool],
                  lexical: Sequence[float | None] | None = None) -> list[ListContext]:
    """For each candidate of one query, the context of the others in the retrieved list (``listed``); the lexical
    context only when every candidate has a BM25 score."""
    members = [i for i, ok in enumerate(listed) if ok]
    known = lexical is not None and all(x is not None for x in lexical)
    return [ListContext(tuple(expected[j] for j in members if j != i), tuple(cosine[j] for j in members if j != i),
                        tuple(lexical[j] for j in members if j != i) if known else ())  # type: ignore[index,misc]
            for i in range(len(expected))]


class CalibrationSummary(BaseModel):
    """What the calibration was fitted on and how well it agrees there (in-sample and cross-validated)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    candidates: int
    queries: int
    positives: int
    hard_negatives: int
    easy_negatives: int
    sources: dict[str, int] = Field(default_factory=dict)
    query_texts: tuple[str, ...] = ()  # the calibration queries: agreement measurements must exclude them
    binary_kappa: float | None = None
    three_class_kappa: float | None = None
    positive_recall: float | None = None
    positive_precision: float | None = None
    cv_binary_kappa: dict[str, float | None] = Field(default_factory=dict)
    auc: dict[str, float | None] = Field(default_factory=dict)


class JudgeCalibration(BaseModel):
    """Maps a graded judgment (and the retriever's cosine) to positive / hard negative / easy negative."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feature: Feature = "expected"
    positive_threshold: float
    hard_threshold: float
    expected_mean: float = 0.0
    expected_std: float = 1.0
    cosine_mean: float = 0.0
    cosine_std: float = 1.0
    # ``relative`` only: the standardisation of the candidate's standing in its list (E, then cosine)
    expected_standing_mean: float = 0.0
    expected_standing_std: float = 1.0
    cosine_standing_mean: float = 0.0
    cosine_standing_std: float = 1.0
    # ``hybrid`` only: the standardisation of the BM25 score and of its standing in the list
    lexical_mean: float = 0.0
    lexical_std: float = 1.0
    lexical_standing_mean: float = 0.0
    lexical_standing_std: float = 1.0
    # ``weighted`` only: the weight of each standardised term (names from TERMS), fitted on the calibration set
    weights: dict[str, float] = Field(default_factory=dict)
    summary: CalibrationSummary | None = None
    # The graded calibration set it was fitted on, in order: the artifact then holds the evidence for its own cut
    # points, and ``syntra artifacts recalibrate`` refits from it without grading again, on any machine and build
    # (grades of the same model differ slightly between llama.cpp builds). Empty in artifacts made before it was kept.
    samples: tuple[CalibrationSample, ...] = ()
    # Which the grading prompt showed first when the grades it was fitted on were made (GradeOrder). The same model
    # reading the same words in the other order gives E of another spread (on SciFact's 1.5B judge, mean 1.14 ->
    # 1.53), so these cut points hold for grades of this order only, and the judge grades in it.
    grade_order: GradeOrder = DEFAULT_GRADE_ORDER

    @model_serializer(mode="wrap")
    def _without_empty_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``weights`` (a ``weighted`` calibration's) and ``samples`` are written only when they hold something, and
        ``grade_order`` only when the document comes first: a calibration made before they existed serialises as it
        did then, so re-saving an earlier artifact keeps its bytes."""
        data = handler(self)
        for name in ("weights", "samples"):
            if not getattr(self, name):
                data.pop(name, None)
        if self.grade_order == DEFAULT_GRADE_ORDER:
            data.pop("grade_order", None)
        return data

    def description(self) -> dict[str, Any]:
        """JSON-ready: the fitted numbers and the summary, without the graded samples (for run stores and reports)."""
        return self.model_dump(mode="json", exclude={"samples"})

    @property
    def needs_list(self) -> bool:
        """Whether a candidate can only be classified with the rest of its query's retrieved list."""
        return self.feature in LIST_FEATURES

    @property
    def needs_lexical(self) -> bool:
        """Whether every candidate needs its BM25 score for the query."""
        return self.feature in LEXICAL_FEATURES or "lexical" in self.weights

    @property
    def terms(self) -> tuple[str, ...]:
        """The standardised terms the score is made of (none for ``expected``: E as it is)."""
        return tuple(self.weights) if self.feature == "weighted" else _FEATURE_TERMS.get(self.feature, ())

    def standardised(self, expected: float, cosine: float | None, context: ListContext | None = None,
                     lexical: float | None = None) -> dict[str, float]:
        """Each of the score's terms, standardised with the calibration set's mean and standard deviation."""
        terms = self.terms
        if cosine is None:
            raise ValueError(f"the {self.feature} judge needs the retriever's similarity of every candidate")
        raw = {"expected": expected, "cosine": cosine}
        if "expected_standing" in terms:
            if context is None:
                raise ValueError(f"the {self.feature} judge classifies a candidate against the rest of its query's "
                                 "list; judge the query's candidates together (RelevanceJudge.judge_all)")
            raw["expected_standing"] = standing(expected, context.expected)
            raw["cosine_standing"] = standing(cosine, context.cosine)
        if "lexical" in terms:
            if lexical is None:
                raise ValueError(f"the {self.feature} judge needs the BM25 score of every candidate for its query")
            raw["lexical"] = lexical
            raw["lexical_standing"] = standing(lexical, context.lexical)  # type: ignore[union-attr]
        return {t: (raw[t] - getattr(self, f"{t}_mean")) / getattr(self, f"{t}_std") for t in terms}

    def scores(self, expected: float, cosine: float | None, context: ListContext | None = None,
               lexical: float | None = None) -> tuple[float, float]:
        """The calibrated score (compared with ``positive_threshold``) and the score that tells related negatives
        from unrelated ones (compared with ``hard_threshold``): the same number except for ``weighted``, whose
        weights are fitted for positives and may weigh against what sets a random document apart from retrieved
        ones (a control stands far below the list), so its hard cut is on the plain sum of its terms."""
        if self.feature == "expected":
            return expected, expected
        total = weighted = 0.0
        for term, value in self.standardised(expected, cosine, context, lexical).items():
            total += value
            if self.feature == "weighted":
                weighted += self.weights[term] * value
        return (weighted, total) if self.feature == "weighted" else (total, total)

    def score(self, expected: float, cosine: float | None, context: ListContext | None = None,
              lexical: float | None = None) -> float:
        """The calibrated score: E; or the sum of the standardised terms (E and cosine for ``fused``; also their
        standing against the other candidates of the list for ``relative``; also the BM25 score and its standing
        for ``hybrid``); or, for ``weighted``, their weighted sum."""
        return self.scores(expected, cosine, context, lexical)[0]

    def classify(self, expected: float, cosine: float | None, context: ListContext | None = None,
                 lexical: float | None = None) -> Klass:
        score, related = self.scores(expected, cosine, context, lexical)
        return classify_score(score, self.positive_threshold, self.hard_threshold, related)

    def label(self, expected: float, cosine: float | None, context: ListContext | None = None,
              lexical: float | None = None) -> int:
        """The stored 0-3 label of the calibrated class (2 positive, 1 hard negative, 0 easy negative)."""
        return CLASS_LABEL[self.classify(expected, cosine, context, lexical)]


#: Used when a graded judgment has no fitted calibration (an artifact compiled before graded judging): the
#: nearest written label, E >= 1.5 positive, E >= 0.5 hard negative. Reports call such labels uncalibrated.
UNCALIBRATED = JudgeCalibration(positive_threshold=1.5, hard_threshold=0.5)


def classify_score(score: float, positive: float, hard: float, related: float | None = None) -> Klass:
    """Positive at or above ``positive``; below it, a hard negative when ``related`` (default: ``score``) reaches
    ``hard``, else an easy one."""
    if score >= positive:
        return "positive"
    return "hard_negative" if (score if related is None else related) >= hard else "easy_negative"


# ── fitting ───────────────────────────────────────────────────────────────────────────────────────────


def _cuts(scores: Sequence[float]) -> list[float]:
    """Candidate thresholds: midpoints between distinct sorted scores, plus one below and one above all."""
    values = sorted(set(scores))
    if not values:
        return [0.0]
    mids = [(a + b) / 2 for a, b in zip(values, values[1:])]
    return [values[0] - 1e-6, *mids, values[-1] + 1e-6]


def _middle_of_best(cuts: Sequence[float], kappa_at: Any) -> tuple[float, float | None]:
    """The cut with the highest kappa (an undefined kappa counts as -1); among equal ones, the middle one; and the
    kappa at that cut."""
    best, runs = -math.inf, []
    for cut in cuts:
        kappa = kappa_at(cut)
        k = -1.0 if kappa is None else kappa
        if k > best + 1e-12:
            best, runs = k, [(cut, kappa)]
        elif abs(k - best) <= 1e-12:
            runs.append((cut, kappa))
    return runs[len(runs) // 2]


class BestCut(NamedTuple):
    """The binary threshold that agrees best with a reference, and its kappa (None when the reference holds one
    class only: no threshold can agree beyond chance)."""

    threshold: float
    kappa: float | None


def best_cut(scores: Sequence[float], gold: Sequence[bool]) -> BestCut:
    """The threshold (score >= t is positive) with the highest binary kappa, the middle one of the best run, and
    that kappa: what a calibration cuts at, and what a report shows as the best any threshold could do."""
    gold_l = ["positive" if g else "negative" for g in gold]
    threshold, kappa = _middle_of_best(_cuts(scores), lambda cut: cohen_kappa(
        gold_l, ["positive" if s >= cut else "negative" for s in scores], ("positive", "negative")))
    return BestCut(threshold, kappa if any(gold) and not all(gold) else None)


def _hard_cut(scores: Sequence[float], gold: Sequence[str], positive: float,
              related: Sequence[float] | None = None) -> float:
    """Among the candidates below ``positive``, the cut on ``related`` (default: the same scores) with the highest
    three-class kappa (related vs unrelated negatives)."""
    labels = ("positive", "hard_negative", "easy_negative")
    same = related is None
    related = scores if related is None else related
    cuts = _cuts([r for s, r in zip(scores, related) if s < positive])
    if same:  # on the positive score itself a cut at or above ``positive`` separates nothing
        cuts = [c for c in cuts if c < positive] or [positive]
    return _middle_of_best(cuts, lambda cut: cohen_kappa(
        gold, [classify_score(s, positive, cut, r) for s, r in zip(scores, related)], labels))[0]


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Probability that a random positive scores above a random negative (ties count half); None if undefined."""
    pos = [s for s, p in zip(scores, positive) if p]
    neg = [s for s, p in zip(scores, positive) if not p]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def _standardiser(values: Sequence[float]) -> tuple[float, float]:
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return mean, std if std > 1e-9 else 1.0


def sample_contexts(samples: Sequence[CalibrationSample]) -> list[ListContext]:
    """Each sample's list context: the other listed samples of its query."""
    out: list[ListContext | None] = [None] * len(samples)
    by_query: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        by_query.setdefault(s.query, []).append(i)
    for members in by_query.values():
        group = [samples[i] for i in members]
        for i, context in zip(members, list_contexts([s.expected for s in group], [s.cosine for s in group],
                                                      [s.listed for s in group], [s.lexical for s in group])):
            out[i] = context
    return out  # type: ignore[return-value]


def lexical_known(samples: Sequence[CalibrationSample]) -> bool:
    """Whether every sample has a BM25 score, so the ``hybrid`` score (and a ``weighted`` one with BM25 terms) can
    be fitted and applied."""
    return bool(samples) and all(s.lexical is not None for s in samples)


def _raw_term(term: str, sample: CalibrationSample, context: ListContext) -> float:
    """One term of a score before standardisation."""
    if term == "expected_standing":
        return standing(sample.expected, context.expected)
    if term == "cosine_standing":
        return standing(sample.cosine, context.cosine)
    if term == "lexical_standing":
        return standing(sample.lexical, context.lexical)  # type: ignore[arg-type]
    return getattr(sample, term)


def _fit_weights(columns: dict[str, list[float]], positive: Sequence[bool]) -> dict[str, float]:
    """Weights of the standardised terms: the coefficients of an L2-regularised logistic regression of "positive"
    on them; equal weights when the set holds one class only (nothing to fit)."""
    if all(positive) or not any(positive):
        return dict.fromkeys(columns, 1.0)
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    x = np.column_stack([columns[t] for t in columns])
    model = LogisticRegression(C=WEIGHT_C, max_iter=1000).fit(x, np.asarray(positive, dtype=bool))
    return {t: float(w) for t, w in zip(columns, model.coef_[0])}


def fit_feature(samples: Sequence[CalibrationSample], feature: Feature,
                 contexts: Sequence[ListContext] | None = None, *, lexical: bool | None = None) -> JudgeCalibration:
    """``lexical``: whether a ``weighted`` score weighs the BM25 terms (default: when every sample has a BM25
    score; cross-validation passes the whole set's answer, so no fold fits a score its held-out query cannot use)."""
    contexts = contexts if contexts is not None else sample_contexts(samples)
    if feature == "weighted":
        terms = TERMS if (lexical_known(samples) if lexical is None else lexical) else TERMS[:4]
    else:  # ``expected`` keeps E's and the cosine's standardisers too, as reports show them
        terms = _FEATURE_TERMS.get(feature, TERMS[:2])
    settings: dict[str, float] = {}
    standardised: dict[str, list[float]] = {}
    for term in terms:
        values = [_raw_term(term, s, c) for s, c in zip(samples, contexts)]
        mean, std = settings[f"{term}_mean"], settings[f"{term}_std"] = _standardiser(values)
        standardised[term] = [(v - mean) / std for v in values]
    is_pos = [s.gold == "positive" for s in samples]
    weights = _fit_weights(standardised, is_pos) if feature == "weighted" else {}
    probe = JudgeCalibration(feature=feature, positive_threshold=0.0, hard_threshold=0.0, weights=weights,
                             **settings)
    both = [probe.scores(s.expected, s.cosine, c, s.lexical) for s, c in zip(samples, contexts)]
    scores = [score for score, _ in both]
    positive = best_cut(scores, is_pos).threshold
    hard = _hard_cut(scores, [s.gold for s in samples], positive,
                     [related for _, related in both] if feature == "weighted" else None)
    return probe.model_copy(update={"positive_threshold": positive, "hard_threshold": hard})


def _cv_kappa(samples: Sequence[CalibrationSample], feature: Feature, contexts: Sequence[ListContext]
              ) -> float | None:
    """Binary kappa when each query's candidates are classified by a calibration fitted on the other queries
    (a list context involves only its own query, so the contexts are computed once)."""
    queries = sorted({s.query for s in samples})
    if len(queries) < 2:
        return None
    gold, pred = [], []
    for query in queries:
        train = [i for i, s in enumerate(samples) if s.query != query]
        if not any(samples[i].gold == "positive" for i in train):
            continue
        fitted = fit_feature([samples[i] for i in train], feature, [contexts[i] for i in train],
                              lexical=lexical_known(samples))
        for s, context in zip(samples, contexts):
            if s.query == query:
                gold.append("positive" if s.gold == "positive" else "negative")
                pred.append("positive" if fitted.classify(s.expected, s.cosine, context, s.lexical) == "positive"
                            else "negative")
    return cohen_kappa(gold, pred, ("positive", "negative")) if gold else None


def fit_calibration(samples: Sequence[CalibrationSample], *, feature: Feature | Literal["auto"] = "auto",
                    grade_order: GradeOrder = DEFAULT_GRADE_ORDER) -> JudgeCalibration:
    """Fit the score and its two cut points on a calibration set (graded in ``grade_order``); the summary records
    how well they agree there.

    ``auto`` chooses from ``AUTO_FEATURES`` and considers ``hybrid`` only when every sample has a BM25 score (a
    same-language task); ``weighted``, fitted only when asked for, weighs the BM25 terms only then."""
    if not samples:
        raise ValueError("a judge calibration needs at least one judged candidate")
    if not any(s.gold == "positive" for s in samples):
        raise ValueError("a judge calibration needs at least one known positive")
    lexical = lexical_known(samples)
    if feature in LEXICAL_FEATURES and not lexical:
        raise ValueError(f"the {feature} judge needs the BM25 score of every calibration candidate; it applies to "
                         "same-language tasks whose candidates are corpus documents")
    usable = tuple(f for f in FEATURES if lexical or f not in LEXICAL_FEATURES)
    features: tuple[Feature, ...] = tuple(f for f in usable if f in AUTO_FEATURES) if feature == "auto" else (feature,)
    contexts = sample_contexts(samples)
    cv = {f: _cv_kappa(samples, f, contexts) for f in usable}
    # Ties go to the simpler score (fewer fitted numbers): expected, then fused, relative, hybrid.
    chosen = max(features, key=lambda f: (cv[f] if cv[f] is not None else -2.0, -FEATURES.index(f)))
    fitted = fit_feature(samples, chosen, contexts)
    gold = [s.gold for s in samples]
    pred = [fitted.classify(s.expected, s.cosine, c, s.lexical) for s, c in zip(samples, contexts)]
    binary = agreement([to_binary(g) for g in gold], [to_binary(p) for p in pred], ("relevant", "non_relevant"))
    three = agreement(gold, pred, ("positive", "hard_negative", "easy_negative"))
    is_pos = [s.gold == "positive" for s in samples]
    auc: dict[str, float | None] = {"expected": roc_auc([s.expected for s in samples], is_pos),
                                    "cosine": roc_auc([s.cosine for s in samples], is_pos)}
    if lexical:
        auc["lexical"] = roc_auc([s.lexical for s in samples], is_pos)  # type: ignore[misc]
    for f in usable[1:]:
        scorer = fitted if f == chosen else fit_feature(samples, f, contexts)
        auc[f] = roc_auc([scorer.score(s.expected, s.cosine, c, s.lexical) for s, c in zip(samples, contexts)],
                         is_pos)
    sources: dict[str, int] = {}
    for s in samples:
        sources[s.source] = sources.get(s.source, 0) + 1
    summary = CalibrationSummary(
        candidates=len(samples), queries=len({s.query for s in samples}), positives=sum(is_pos),
        hard_negatives=gold.count("hard_negative"), easy_negatives=gold.count("easy_negative"), sources=sources,
        query_texts=tuple(dict.fromkeys(s.query for s in samples)),
        binary_kappa=binary.kappa, three_class_kappa=three.kappa,
        positive_recall=binary.per_class["relevant"]["recall"],
        positive_precision=binary.per_class["relevant"]["precision"],
        cv_binary_kappa=cv, auc=auc,
    )
    return fitted.model_copy(update={"summary": summary, "samples": tuple(samples), "grade_order": grade_order})


def describe(calibration: JudgeCalibration | None) -> dict[str, Any]:
    """A JSON-ready description for reports and run stores."""
    if calibration is None:
        return {"mode": "written"}
    return {"mode": "graded", **calibration.description()}
