"""The held-out material every compiled artifact is scored on: the same for every strategy.

* Fresh documents: drawn (seeded) from the diversity-selected pool, excluding every document a compile
  trial used and the few-shot positives, so no strategy has seen them.
* Annotation pairs with reference labels, from ``--heldout-qrels``: the judged pairs of a benchmark split
  (BEIR/TREC qrels with their queries, a ``beir:``/``neuclirtech:`` dataset spec, or a human label file of
  ``query, doc_id, label`` rows), plus, per query, the top retrieved candidates that carry no judgement and
  a few random documents. Judged gains map as in production (≥ 1 relevant → positive; 0, a pooled and
  rejected candidate → hard negative; label files may give all three classes). Unjudged candidates are
  treated as IR evaluation (and the paper's nDCG) treats them, as not relevant; because retrieval put them
  in the top-K they count as hard negatives in the three-class view (``unjudged=`` changes that), and the
  random documents as easy negatives. Few-shot queries are never among the held-out queries, nor any query a
  compile calibrated on (people's labels, a judged dataset's calibration claims): :func:`check_apart` refuses
  material that holds one.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from syntra_dspy.comparison.settings import HeldoutOptions
from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation.exclude import normalize_query

Source = Literal["judged", "unjudged", "random"]


@dataclass(frozen=True)
class JudgedItem:
    """One query/document pair with its reference label and where the label comes from."""

    query_id: str
    query: str
    doc_id: str
    gold: str
    source: Source
    listed: bool = True  # among the query's retrieved list (a list-relative judge compares it with the others)


@dataclass(frozen=True)
class HeldoutMaterial:
    documents: tuple[str, ...]
    items: tuple[JudgedItem, ...] = ()
    description: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        data = {"documents": list(self.documents), "items": [asdict(i) for i in self.items]}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for item in self.items:
            counts[f"{item.source}:{item.gold}"] = counts.get(f"{item.source}:{item.gold}", 0) + 1
        return {**self.description, "fingerprint": self.fingerprint, "documents": list(self.documents),
                "pairs": len(self.items), "queries": len({i.query_id for i in self.items}), "pair_counts": counts}


def fresh_documents(selected: Sequence[str], all_ids: Sequence[str], *, exclude: Iterable[str], n: int,
                    seed: int) -> list[str]:
    """``n`` documents no compile used: from the selected pool, topped up from the rest of the corpus."""
    banned = set(exclude)
    pool = [d for d in selected if d not in banned]
    rng = random.Random(seed)
    picked = rng.sample(pool, min(n, len(pool)))
    if len(picked) < n:
        taken = banned | set(picked)
        rest = [d for d in all_ids if d not in taken]
        picked += rng.sample(rest, min(n - len(picked), len(rest)))
    return picked


def annotation_items(queries: dict[str, str], labels: dict[str, dict[str, str]], *, corpus: Any, search: Any,
                     exclude_queries: Iterable[str], options: HeldoutOptions, seed: int) -> tuple[JudgedItem, ...]:
    """The pairs every artifact labels: judged, unjudged top-K and random documents per sampled query.

    ``search(texts, k)`` returns ``[[(doc_id, score), ...], ...]`` (the compile's dense index). Each query's
    pairs are shuffled (seeded) so a judged positive never sits in a fixed position of the annotator's list.
    """
    excluded = {normalize_query(q) for q in exclude_queries}
    usable = [qid for qid in sorted(labels) if qid in queries and normalize_query(queries[qid]) not in excluded
              and any(d in corpus for d in labels[qid])]
    if not usable:
        raise ConfigError("none of the held-out judgements can be used: their queries are missing, are the "
                          "task's few-shot queries, or judge documents outside the task's corpus",
                          hint="use judgements of the task's own corpus")
    rng = random.Random(seed)
    chosen = rng.sample(usable, min(options.max_queries, len(usable)))
    depth = options.unjudged_k + options.max_judged + options.random_negatives + 10
    hits = search([queries[q] for q in chosen], min(depth, len(corpus)))
    ids = corpus.ids
    items: list[JudgedItem] = []
    for qid, found in zip(chosen, hits):
        judged = [(d, c) for d, c in labels[qid].items() if d in corpus][: options.max_judged]
        known = set(labels[qid])
        # the list production's judge would see: the unjudged candidates' depth, widened by the judged ones in it
        listed = {d for d, _ in found[: options.unjudged_k + options.max_judged]}
        rows = [JudgedItem(qid, queries[qid], d, c, "judged", d in listed) for d, c in judged]
        top = [d for d, _ in found if d not in known][: options.unjudged_k]
        if options.unjudged != "exclude":
            rows += [JudgedItem(qid, queries[qid], d, options.unjudged, "unjudged") for d in top]
        seen = known | {d for d, _ in found}
        spare = [d for d in ids if d not in seen]
        rows += [JudgedItem(qid, queries[qid], d, "easy_negative", "random", False)
                 for d in rng.sample(spare, min(options.random_negatives, len(spare)))]
        rng.shuffle(rows)
        items.extend(rows)
    return tuple(items)


def check_apart(items: Sequence[JudgedItem], calibrated: Iterable[str]) -> None:
    """Refuse held-out pairs whose query a compile calibrated on (its few-shot, calibration or people's-label
    queries): agreement measured there would be measured on what the judge was fitted to."""
    seen = {normalize_query(q) for q in calibrated}
    shared = sorted({i.query for i in items if normalize_query(i.query) in seen})
    if shared:
        raise ConfigError(f"{len(shared)} held-out quer{'y is' if len(shared) == 1 else 'ies are'} also a compile's "
                          f"calibration or few-shot quer{'y' if len(shared) == 1 else 'ies'} (e.g. {shared[0][:80]!r})",
                          field="heldout", hint="score on claims no compile used: keep the human labels' and the "
                                                "held-out judgements' queries apart")
