"""Trial runs of the synthesis steps on small samples, and their rendering for verifiers and refiners."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from syntra_dspy.errors import LMOutputError, QueriesIncomplete
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.signatures.types import Blueprint
from syntra_dspy.programs.validation import Features, WriteTally


class TrialDocument(Protocol):
    doc_id: str

    @property
    def content(self) -> str: ...


class CandidateSource(Protocol):
    """Retrieves candidate documents for a query: [(doc_id, text)], best first.

    Sources may also offer ``sample(n, *, exclude, seed) -> [(doc_id, text)]`` (random corpus documents),
    which the annotation check uses as control negatives.
    """

    def candidates(self, query: str, k: int) -> list[tuple[str, str]]: ...


@dataclass
class FeatureTrial:
    doc: TrialDocument
    features: Features | None
    error: str | None = None


@dataclass
class QueryTrial:
    """A trial document's blueprints and the valid queries written for them (fewer when some stayed invalid)."""

    doc: TrialDocument
    blueprints: list[Blueprint] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    error: str | None = None
    tally: WriteTally = field(default_factory=WriteTally)


@dataclass
class LabelTrial:
    example: FewShotPair
    candidate_ids: list[str]
    scores: list[int | None]
    positive_index: int
    control_indices: tuple[int, ...] = ()
    texts: list[str] = field(default_factory=list, repr=False)

    @property
    def positive_score(self) -> int | None:
        return self.scores[self.positive_index]

    @property
    def control_scores(self) -> list[int | None]:
        return [self.scores[i] for i in self.control_indices]


def run_extraction(program: SynthesisProgram, docs: Sequence[TrialDocument]) -> list[FeatureTrial]:
    trials = []
    for doc in docs:
        try:
            trials.append(FeatureTrial(doc, program.extract_features(doc.content)))
        except LMOutputError as exc:
            trials.append(FeatureTrial(doc, None, str(exc)))
    return trials


def run_queries(program: SynthesisProgram, features: Sequence[FeatureTrial], per_doc: int) -> list[QueryTrial]:
    """Plan every document first, then write every document: consecutive calls share a prompt prefix."""
    trials = [QueryTrial(ft.doc) for ft in features if ft.features is not None]
    feats = [ft.features for ft in features if ft.features is not None]
    for trial, feat in zip(trials, feats):
        try:
            trial.blueprints = program.plan_blueprints(trial.doc.content, feat, per_doc)
        except LMOutputError as exc:
            trial.error = str(exc)
    for trial in trials:
        if trial.error or not trial.blueprints:
            continue
        try:
            # no rewriting of rejected queries here: the loop judges the instruction by the writer's own queries
            trial.queries = program.write_queries(trial.doc.content, trial.blueprints, tally=trial.tally,
                                                  rewrite=False)
        except QueriesIncomplete as exc:
            trial.queries, trial.error = [exc.kept[n] for n in sorted(exc.kept)], str(exc)
        except LMOutputError as exc:
            trial.error = str(exc)
    return trials


@dataclass(frozen=True)
class AnnotationCase:
    """One few-shot query's candidate list for the annotation check: retrieved documents with the query's known
    positive among them and random corpus documents (control negatives) at seeded positions."""

    example: FewShotPair
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    positive_index: int
    control_indices: tuple[int, ...] = ()


def annotation_cases(examples: Sequence[FewShotPair], source: CandidateSource, *, k: int, seed: int,
                     controls: int = 0) -> list[AnnotationCase]:
    """The candidate lists every strategy's annotation check labels (the one builder, so no strategy gets an
    easier list).

    When retrieval misses the positive, it replaces a candidate at a seeded position, so the check never
    depends on the retriever and the positive does not always sit in the same slot. ``controls`` random
    corpus documents replace the last retrieved candidates at seeded positions: an annotator that calls
    everything relevant then fails the check instead of passing it.
    """
    rng = random.Random(seed)
    sampler = getattr(source, "sample", None)
    cases = []
    for n, ex in enumerate(examples):
        found = source.candidates(ex.query, k)
        ids = [doc_id for doc_id, _ in found]
        texts = [text for _, text in found]
        key = ex.positive_id
        if key is not None and key in ids:
            pos = ids.index(key)
        else:
            pos = rng.randrange(min(k, len(ids) + 1))
            ids.insert(pos, key or "(example positive)")
            texts.insert(pos, ex.positive_text)
            ids, texts = ids[:k], texts[:k]
        control_ids: list[str] = []
        if controls and sampler is not None:
            drawn = sampler(controls, exclude={*ids, key}, seed=seed + n)
            keep = max(1, len(ids) - len(drawn))
            if pos >= keep:  # never drop the positive to make room
                ids[keep - 1], ids[pos] = ids[pos], ids[keep - 1]
                texts[keep - 1], texts[pos] = texts[pos], texts[keep - 1]
                pos = keep - 1
            ids, texts = ids[:keep], texts[:keep]
            for doc_id, text in drawn:
                at = rng.randrange(len(ids) + 1)
                ids.insert(at, doc_id)
                texts.insert(at, text)
                if at <= pos:
                    pos += 1
                control_ids.append(doc_id)
        control_at = tuple(i for i, doc_id in enumerate(ids) if doc_id in control_ids)
        cases.append(AnnotationCase(ex, tuple(ids), tuple(texts), pos, control_at))
    return cases


def label_cases(program: SynthesisProgram, cases: Sequence[AnnotationCase], *, chunk_size: int) -> list[LabelTrial]:
    """The annotator's 0-3 labels for each case (None where a chunk's answer stayed unusable)."""
    return [LabelTrial(c.example, list(c.ids), program.label_all(c.example.query, c.texts, chunk_size=chunk_size),
                       c.positive_index, c.control_indices, list(c.texts)) for c in cases]


def run_labels(program: SynthesisProgram, examples: Sequence[FewShotPair], source: CandidateSource, *, k: int,
               chunk_size: int, seed: int, controls: int = 0) -> list[LabelTrial]:
    """Label each few-shot query's candidate list (see :func:`annotation_cases`)."""
    cases = annotation_cases(examples, source, k=k, seed=seed, controls=controls)
    return label_cases(program, cases, chunk_size=chunk_size)


# -- rendering -----------------------------------------------------------------------------------------
def features_samples(trials: Sequence[FeatureTrial], *, with_documents: bool, max_doc_chars: int = 700) -> str:
    blocks = []
    for n, trial in enumerate(trials, 1):
        head = f"### Sample {n}"
        if with_documents:
            head += f"\nDocument: {ctx.clip(trial.doc.content, max_doc_chars)}"
        if trial.features is None:
            blocks.append(f"{head}\n(no valid extraction: {trial.error})")
            continue
        idents = "; ".join(f"[{i.kind}] {i.text}" for i in trial.features.identifiers)
        blocks.append(f"{head}\nIdentifiers: {idents}\nAttributes:\n{ctx.attributes_text(trial.features.attributes)}")
    return "\n\n".join(blocks)


def query_pairs(trials: Sequence[QueryTrial], *, limit: int, seed: int, max_doc_chars: int = 500) -> str:
    pairs = [(t.doc, q) for t in trials for q in t.queries]
    if len(pairs) > limit:
        pairs = random.Random(seed).sample(pairs, limit)
    return "\n\n".join(
        f"{n}. Document: {ctx.clip(doc.content, max_doc_chars)}\n   Query: {query}"
        for n, (doc, query) in enumerate(pairs, 1)
    )


def mismatches_text(trials: Sequence[LabelTrial], max_doc_chars: int = 600) -> str:
    lines = []
    for n, t in enumerate(trials, 1):
        score = t.positive_score
        if score is None or score < 2:
            given = "no label (the annotator's answer was unusable)" if score is None else f"{score}"
            lines.append(
                f"{n}. Query: {t.example.query}\n   Known-relevant document: "
                f"{ctx.clip(t.example.positive_text, max_doc_chars)}\n   Label given: {given} (expected 2 or 3)"
            )
        for i in t.control_indices:
            if t.scores[i] is not None and t.scores[i] >= 2:
                text = t.texts[i] if i < len(t.texts) else "(text not kept)"
                lines.append(
                    f"{n}. Query: {t.example.query}\n   Unrelated control document (drawn at random from the "
                    f"corpus): {ctx.clip(text, max_doc_chars)}\n   Label given: {t.scores[i]} (expected 0 or 1)"
                )
    return "\n\n".join(lines)
