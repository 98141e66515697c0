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
  random documents as easy negatives. Few-shot queries are never among the held-out queries.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.evaluation.exclude import normalize_query
from syntra_dspy.optimizers.calibration import read_label_file

Source = Literal["judged", "unjudged", "random"]
UnjudgedPolicy = Literal["hard_negative", "easy_negative", "exclude"]


@dataclass(frozen=True)
class HeldoutOptions:
    """How much held-out material to draw. ``seed=None`` uses the compile seed."""

    docs: int = 5
    qrels: str | Path | None = None
    queries: str | Path | None = None
    max_queries: int = 20
    unjudged_k: int = 5
    random_negatives: int = 2
    max_judged: int = 5
    unjudged: UnjudgedPolicy = "hard_negative"
    seed: int | None = None


@dataclass(frozen=True)
class JudgedItem:
    """One query/document pair with its reference label and where the label comes from."""

    query_id: str
    query: str
    doc_id: str
    gold: str
    source: Source


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


# -- reference judgements --------------------------------------------------------------------------------
def _gain_class(gain: int) -> str | None:
    return "positive" if gain >= 1 else "hard_negative" if gain == 0 else None


def is_label_file(path: Path) -> bool:
    """True for a ``query, doc_id, label`` file (by suffix or header), False for BEIR/TREC qrels."""
    first = path.read_text(encoding="utf-8-sig").split("\n", 1)[0].lower()
    return path.suffix.lower() in (".csv", ".jsonl", ".json") or first.replace(",", "\t").split("\t")[:3] == [
        "query", "doc_id", "label"]


def load_judgements(spec: str | Path, *, queries: str | Path | None = None) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """``(queries {qid: text}, labels {qid: {doc_id: class}})`` from a qrels file, dataset spec or label file."""
    text = str(spec)
    if text.startswith(("beir:", "neuclirtech:")):
        from syntra_dspy.evaluation.datasets import load_dataset

        ds = load_dataset(text, load_corpus=False)
        return dict(ds.queries), _classes(ds.qrels, text)
    path = Path(spec)
    if not path.is_file():
        raise InputError("held-out judgements not found", path=path,
                         hint="give BEIR/TREC qrels, a beir:PATH:split spec, or a 'query, doc_id, label' file")
    if is_label_file(path):
        qtexts: dict[str, str] = {}
        labels: dict[str, dict[str, str]] = {}
        for pair in read_label_file(path):
            qid = qtexts.setdefault(pair.query, f"q{len(qtexts) + 1}")
            labels.setdefault(qid, {})[pair.doc_id] = pair.label
        return {qid: q for q, qid in qtexts.items()}, labels
    from syntra_dspy.evaluation.datasets import read_beir_queries, read_topics_tsv
    from syntra_dspy.evaluation.trec import read_qrels

    qrels = read_qrels(path)
    qpath = Path(queries) if queries else path.parent.parent / "queries.jsonl"
    if not qpath.is_file():
        raise ConfigError("the held-out qrels need their queries", path=qpath,
                          hint="give --heldout-queries (BEIR queries.jsonl or id<TAB>text topics)")
    qtexts = read_beir_queries(qpath) if qpath.suffix == ".jsonl" else read_topics_tsv(qpath)
    return qtexts, _classes(qrels, str(path))


def _classes(qrels: dict[str, dict[str, int]], source: str) -> dict[str, dict[str, str]]:
    out = {qid: {d: c for d, g in docs.items() if (c := _gain_class(int(g))) is not None} for qid, docs in qrels.items()}
    out = {qid: docs for qid, docs in out.items() if docs}
    if not out:
        raise InputError("no usable judgements (gains must be 0 or more)", path=source)
    return out


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
        rows = [JudgedItem(qid, queries[qid], d, c, "judged") for d, c in judged]
        top = [d for d, _ in found if d not in known][: options.unjudged_k]
        if options.unjudged != "exclude":
            rows += [JudgedItem(qid, queries[qid], d, options.unjudged, "unjudged") for d in top]
        seen = known | {d for d, _ in found}
        spare = [d for d in ids if d not in seen]
        rows += [JudgedItem(qid, queries[qid], d, "easy_negative", "random")
                 for d in rng.sample(spare, min(options.random_negatives, len(spare)))]
        rng.shuffle(rows)
        items.extend(rows)
    return tuple(items)
