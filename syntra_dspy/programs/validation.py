"""Code checks for every structured LM output. A failed check becomes a repair note for the retry."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from syntra_dspy.copying import MAX_COPIED_WORDS, longest_copy
from syntra_dspy.languages import CJK_LANGUAGES, check_language, cjk_share, language_name
from syntra_dspy.query_form import QueryForm, names_a_subject, shape, token_jaccard
from syntra_dspy.signatures.types import (
    AttributeChoice,
    AttributeDimension,
    Blueprint,
    CandidateLabel,
    Identifier,
    WrittenQuery,
)


class OutputRejected(ValueError):
    """An LM answer broke a rule; ``str(err)`` is phrased as an instruction for the retry."""


@dataclass(frozen=True)
class Features:
    """Identifiers and attribute dimensions extracted from one document, after cleaning."""

    identifiers: tuple[Identifier, ...]
    attributes: tuple[AttributeDimension, ...]

    def to_dict(self) -> dict:
        return {
            "identifiers": [i.model_dump() for i in self.identifiers],
            "attributes": [a.model_dump() for a in self.attributes],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Features":
        return cls(
            tuple(Identifier.model_validate(i) for i in data["identifiers"]),
            tuple(AttributeDimension.model_validate(a) for a in data["attributes"]),
        )


def _norm(text: str) -> str:
    return " ".join(text.split()).strip().lower()


_NUMBERED = re.compile(r"^\s*(\d+)[.)]?(?:\s+(.*))?$")
def copied_run(query: str, document: str) -> list[str]:
    """The run of consecutive words the query shares with the document (the one spanning most of the query's words),
    as word pieces in the query's spelling."""
    return longest_copy(query, document)[0]


def copied_words(query: str, document: str) -> int:
    """How many consecutive words of the query the document holds in the same order (a compound name counts once)."""
    return longest_copy(query, document)[1]


_SENTENCE_BREAK = re.compile(r"(?<=[.!?。！？])\s+")


def without_copied_sentences(document: str, queries: Sequence[str], max_words: int) -> str:
    """``document`` without the sentences any of ``queries`` copied more than ``max_words`` consecutive words of
    (the document as it was when that would leave nothing). Why: asked again, the 1.5B writer copies the same
    sentence however the repair note words it (SciFact, held-out documents: 4 of 16 blueprints lost after 3 tries
    each); a sentence it is not shown, it cannot copy."""
    sentences = _SENTENCE_BREAK.split(document.strip())
    kept = [s for s in sentences if all(copied_words(q, s) <= max_words for q in queries)]
    return " ".join(kept) if kept and len(kept) < len(sentences) else document


#: Query dimensions for a document whose extracted ones were all in another script than the queries' language.
DEFAULT_ATTRIBUTES = (
    AttributeDimension(dimension="specificity", options=["broad", "specific"]),
    AttributeDimension(dimension="aspect", options=["method", "finding", "application"]),
)


def generic_dimensions(features: Features) -> bool:
    """Whether a document's query dimensions are :data:`DEFAULT_ATTRIBUTES`: none of its own survived cleaning, so
    there is nothing for an LM planner to plan around beyond pairing identifiers with generic options."""
    return tuple(features.attributes) == DEFAULT_ATTRIBUTES


def clean_features(identifiers: Sequence[Identifier], attributes: Sequence[AttributeDimension], *,
                   query_language: str | None = None) -> Features:
    """Drop empty and duplicate identifiers, dimensions and options; reject what is left unusable.

    With a ``query_language`` written in Latin script, a dimension or option holding Chinese/Japanese characters is
    dropped too (the identifiers, the document's own terms, stay as they are): dimensions describe the *query*, and
    the writer copies the blueprint's words into it. CSL probe (English queries, Chinese abstracts): the 1.5B
    extractor wrote dimensions and options in Chinese ("specificity": 高/中/低; "概率水平") for every document, the
    planner then named Chinese terms as dimensions in 6 of 10 documents and the writer answered in Chinese in 4.
    Where nothing is left, :data:`DEFAULT_ATTRIBUTES` are used. An identifier made only of what every paper has
    ("本文", "this study") is dropped: a blueprint built on it names no subject (the CSL run's extractor listed
    "本文" first for one of its first six documents)."""
    def foreign(text: str) -> bool:
        return query_language is not None and query_language.lower() not in CJK_LANGUAGES and cjk_share(text) > 0

    seen: set[str] = set()
    idents = []
    for ident in identifiers or []:
        key = _norm(ident.text)
        if key and key not in seen and names_a_subject(ident.text):  # not "本文" (this paper): no query's subject
            seen.add(key)
            idents.append(Identifier(kind=ident.kind, text=" ".join(ident.text.split())))
    dims = []
    seen_dims: set[str] = set()
    dropped = False
    for dim in attributes or []:
        name = " ".join(dim.dimension.split())
        options: list[str] = []
        for opt in dim.options:
            opt = " ".join(opt.split())
            if opt and foreign(opt):
                dropped = True
            elif opt and _norm(opt) not in {_norm(o) for o in options}:
                options.append(opt)
        if name and foreign(name):
            dropped = True
        elif name and _norm(name) not in seen_dims and len(options) >= 2:
            seen_dims.add(_norm(name))
            dims.append(AttributeDimension(dimension=name, options=options[:4]))
    if not dims and dropped:
        dims = list(DEFAULT_ATTRIBUTES)
    problems = []
    if not idents:
        problems.append("give at least one identifier taken from the document")
    if not dims:
        problems.append("give at least one attribute dimension with 2-4 distinct options")
    if problems:
        raise OutputRejected("; ".join(problems))
    return Features(tuple(idents), tuple(dims))


def check_blueprints(
    proposed: Sequence[Blueprint], features: Features, *, already: Sequence[Blueprint] = ()
) -> tuple[list[Blueprint], list[str]]:
    """Keep the blueprints that follow the rules, in canonical spelling; return them and the problems found.

    Rules: exactly one identifier copied from the list; exactly one option for every dimension, taken from
    that dimension; no combination repeated (within the answer or against ``already``).
    """
    ident_by_key = {_norm(i.text): i.text for i in features.identifiers}
    numbered = [i.text for i in features.identifiers]
    dims = {_norm(d.dimension): d for d in features.attributes}
    used = {bp.key() for bp in already}
    kept: list[Blueprint] = []
    problems: list[str] = []
    for n, bp in enumerate(proposed):
        ident = ident_by_key.get(_norm(bp.identifier))
        ref = _NUMBERED.match(bp.identifier)
        if ident is None and ref:
            # Small models often answer with the list number ("2" or "2. the text"): accept the reference.
            ident = ident_by_key.get(_norm(ref.group(2) or ""))
            if ident is None and 1 <= int(ref.group(1)) <= len(numbered):
                ident = numbered[int(ref.group(1)) - 1]
        if ident is None:
            problems.append(f"blueprint {n}: identifier '{bp.identifier}' is not in the list (copy it exactly)")
            continue
        chosen: dict[str, AttributeChoice] = {}
        bad = False
        for choice in bp.choices:
            dim = dims.get(_norm(choice.dimension))
            if dim is None:
                # A small model often writes the option where the dimension belongs (or leaves it empty):
                # the option alone still names the dimension when exactly one unchosen dimension offers it.
                offering = [d for k, d in dims.items() if k not in chosen
                            and any(_norm(o) == _norm(choice.option) for o in d.options)]
                if len(offering) == 1:
                    dim = offering[0]
            if dim is None:
                problems.append(f"blueprint {n}: '{choice.dimension}' is not one of the attribute dimensions")
                bad = True
                break
            option = next((o for o in dim.options if _norm(o) == _norm(choice.option)), None)
            if option is None:
                problems.append(f"blueprint {n}: '{choice.option}' is not an option of '{dim.dimension}'")
                bad = True
                break
            if _norm(dim.dimension) in chosen:
                problems.append(f"blueprint {n}: dimension '{dim.dimension}' chosen twice")
                bad = True
                break
            chosen[_norm(dim.dimension)] = AttributeChoice(dimension=dim.dimension, option=option)
        if bad:
            continue
        missing = [d.dimension for k, d in dims.items() if k not in chosen]
        if missing:
            problems.append(f"blueprint {n}: choose an option for {', '.join(missing)}")
            continue
        canon = Blueprint(identifier=ident, choices=[chosen[k] for k in dims])
        if canon.key() in used:
            problems.append(f"blueprint {n}: repeats an identifier-and-options combination already used")
            continue
        used.add(canon.key())
        kept.append(canon)
    return kept, problems


#: Two queries of one document whose token sets overlap more than this (Jaccard) ask the same thing in other words.
NEAR_DUPLICATE = 0.7


class QueriesRejected(OutputRejected):
    """Some written queries broke a rule. ``kept`` holds the valid ones by blueprint number (a retry keeps them and
    asks only for the rest); ``checked`` and ``off_form`` count the query texts looked at and those whose form or
    length differs from the examples'."""

    def __init__(self, message: str, *, kept: dict[int, str], checked: int, off_form: int,
                 repairs: dict[int, tuple[str, str]] | None = None, outcomes: dict[int, str] | None = None) -> None:
        super().__init__(message)
        self.kept, self.checked, self.off_form = kept, checked, off_form
        # blueprint number -> "kept", the kind of the first check its query failed (QueryProblem.kind), "missing"
        # (no query written for it) or "count" (the answer's queries could not be matched to the blueprints)
        self.outcomes = outcomes or {}
        # blueprint number -> (query, what to fix) for a query rejected only for a problem one short rewrite call
        # can fix (a question where the task's queries are not; a passage copied from the document): rewriting it
        # keeps the blueprint (see SynthesisProgram.write_queries)
        self.repairs = repairs or {}


#: What a rewrite is told to fix, by the kind of rejection it can repair.
REPAIRS = {
    "question": "It is a question, but this task's queries never are: restate it in the requested form.",
    "copy": "It repeats a passage of the document word for word: say the same in your own words, as a searcher who "
            "has not read the document would.",
}


#: Longest copied run a copy rewrite's note quotes, in words (the rest is elided).
QUOTED_RUN_WORDS = 12


def copy_repair(query: str, document: str, max_words: int | None) -> str:
    """What a copy rewrite is told: the words it copied, and (``max_words``) a length too short to hold such a run.
    A small writer told only to use its own words mostly returns the passage again."""
    run = copied_run(query, document)
    quoted = " ".join(run[:QUOTED_RUN_WORDS]) + (" ..." if len(run) > QUOTED_RUN_WORDS else "")
    length = f", at most {max_words} words" if max_words is not None else ""
    return (f'It copies the document\'s words "{quoted}". Say what it states in your own words{length}, keeping '
            "its key terms, as a searcher who has not read the document would.")


def repair_note(kind: str, query: str, document: str | None, max_copied_words: int,
                form: QueryForm | None = None, language: str | None = None) -> str:
    """The note a rewrite of ``kind`` (a key of :data:`REPAIRS`, or ``language``) gets for ``query``. A copy's
    length cap is the copy limit, or the examples' shortest length where that is longer; none where lengths are
    counted in characters (a Chinese run is one word to the copy check)."""
    if kind == "language":
        name = language_name(language or "en")
        return (f"It is not written in {name}, the language of this task's queries: translate it into {name}, "
                "keeping every concept and name, in the form of the example queries.")
    if kind == "copy" and document is not None:
        if form is not None and form.unit != "words":
            return copy_repair(query, document, None)
        return copy_repair(query, document, max(max_copied_words, form.min_length if form is not None else 0))
    return REPAIRS[kind]


#: The problems one short rewrite call can fix (each a key of :data:`REPAIRS`, or ``language``).
REPAIRABLE = frozenset({"copy", "language", "question"})


def repair_kind(problem: QueryProblem) -> str | None:
    """Which rewrite can fix a rejected query, or None: a copied passage, a query in the documents' language (a
    cross-language writer that answered in it: translate it), a question where the examples never are."""
    return problem.kind if problem.kind in REPAIRABLE else None


@dataclass
class WriteTally:
    """How a document's query-writing answers fared over all tries: the query loop's form-fidelity measure."""

    queries: int = 0  # query texts checked, retries included
    off_form: int = 0  # of them, of another form or length than the examples
    notes: list[str] = field(default_factory=list)  # every rejection, in order
    restated: dict[int, str] = field(default_factory=dict)  # blueprint number -> the query a kept rewrite replaced
    # every answer checked for a blueprint, in order: (blueprint number, step, outcome). Step: "write" (a write
    # call's query), "rewrite" (a rewrite call's), "code" (restated or translated in code, no call); outcome:
    # "kept", a QueryProblem kind, "missing", "count" or "unparsed" (a rewrite call whose answer was unusable)
    checks: list[tuple[int, str, str]] = field(default_factory=list)

    def add(self, checked: int, off_form: int = 0, note: str | None = None) -> None:
        self.queries += checked
        self.off_form += off_form
        if note:
            self.notes.append(note)

    def check(self, blueprint: int, step: str, outcome: str) -> None:
        self.checks.append((blueprint, step, outcome))


class QueryProblem(NamedTuple):
    """What is wrong with a written query: the message (phrased after "query for blueprint N"), 1 if the query is
    of another form or length than the examples, and what kind of problem it is (``empty``, ``language``,
    ``subject``, ``copy``, ``question``: a question where the examples never are, ``form``, ``duplicate``)."""

    message: str
    off_form: int
    kind: str


def query_problem(query: str, *, language: str, document: str | None,
                  max_copied_words: int = MAX_COPIED_WORDS, form: QueryForm | None = None,
                  earlier: Sequence[str] = (), near_duplicate: float = NEAR_DUPLICATE) -> QueryProblem | None:
    """What is wrong with one written query, or None."""
    text = " ".join(query.split()).strip().strip('"').strip()
    if not text:
        return QueryProblem("is empty", 0, "empty")
    lang_problem = check_language(text, language)
    if lang_problem:
        return QueryProblem(f"{lang_problem}; write it in the requested language", 0, "language")
    if not names_a_subject(text):
        return QueryProblem("names no subject (it would match any paper); name what this document is about", 0,
                            "subject")
    if document is not None and copied_words(text, document) > max_copied_words:
        return QueryProblem("copies a sentence of the document; rephrase it the way a searcher who has not read the "
                            "document would", 0, "copy")
    form_problem = form.problem(text) if form is not None else None
    if form_problem:
        question = form.restates_questions and shape(text) == "question"
        return QueryProblem(form_problem, 1, "question" if question else "form")
    twin = next((q for q in earlier if token_jaccard(text, q) > near_duplicate), None)
    if twin is not None and _norm(twin) == _norm(text):
        return QueryProblem("duplicates another query", 0, "duplicate")
    if twin is not None:
        return QueryProblem(f"nearly duplicates '{twin}'; make it ask what its own blueprint asks (its identifier and "
                            "options), not the same thing in other words", 0, "duplicate")
    return None


def check_queries(
    written: Sequence[WrittenQuery], blueprints: Sequence[Blueprint], *, language: str, avoid: Sequence[str] = (),
    document: str | None = None, max_copied_words: int = MAX_COPIED_WORDS,
    numbers: Sequence[int] | None = None, form: QueryForm | None = None, near_duplicate: float = NEAR_DUPLICATE,
) -> list[str]:
    """Return one query per blueprint, in order, or raise ``QueriesRejected`` with what to fix and what was fine.

    ``numbers`` are the blueprints' numbers as the writer saw them (default 0..n-1; a retry shows only the
    blueprints still missing, under their own numbers). With ``document``, a query that copies a run of more than
    ``max_copied_words`` consecutive words from it is rejected: a searcher has not read the document, and copied
    queries teach a retriever string matching. With ``form``, a query must have the examples' form and length. A
    query whose tokens overlap an earlier one's (or one in ``avoid``) by more than ``near_duplicate`` (Jaccard)
    asks the same thing again and is rejected; the earlier one is kept.
    """
    numbers = list(range(len(blueprints))) if numbers is None else list(numbers)
    offers: dict[int, list[WrittenQuery]] = {}
    given = [w.blueprint for w in written]
    if given and len(set(given)) == len(given) and set(given) <= set(numbers):
        offers = {w.blueprint: [w] for w in written}
    elif len(written) == len(numbers):
        offers = {n: [w] for n, w in zip(numbers, written)}
    elif any(g in numbers for g in given):
        # A small writer asked for one blueprint sometimes writes several queries for it (or some for blueprints
        # not asked): the first valid one per asked blueprint counts, the rest are ignored.
        for w in written:
            if w.blueprint in numbers:
                offers.setdefault(w.blueprint, []).append(w)
    else:
        raise QueriesRejected(f"write exactly {len(numbers)} queries, one per blueprint; got {len(written)}",
                              kept={}, checked=0, off_form=0, outcomes=dict.fromkeys(numbers, "count"))
    kept: dict[int, str] = {}
    repairs: dict[int, tuple[str, str]] = {}
    problems: list[str] = []
    outcomes = dict.fromkeys(numbers, "missing")
    earlier = [" ".join(q.split()) for q in avoid]
    off_form = 0
    for slot in (n for n in numbers if n in offers):
        first_problem = None
        for item in offers[slot]:
            problem = query_problem(item.query, language=language, document=document,
                                     max_copied_words=max_copied_words, form=form, earlier=earlier,
                                     near_duplicate=near_duplicate)
            if problem is None:
                text = " ".join(item.query.split()).strip().strip('"').strip()
                earlier.append(text)
                kept[slot] = text
                break
            off_form += problem.off_form
            if first_problem is None:
                first_problem, outcomes[slot] = problem.message, problem.kind
            kind = repair_kind(problem)
            if kind is not None:
                repairs.setdefault(slot, (" ".join(item.query.split()),
                                           repair_note(kind, item.query, document, max_copied_words, form,
                                                       language)))
        if slot not in kept:
            problems.append(f"query for blueprint {slot} {first_problem}")
        else:
            repairs.pop(slot, None)
            outcomes[slot] = "kept"
    slots = list(offers)
    missing = [str(n) for n in numbers if n not in slots]
    if missing:
        problems.append(f"write exactly {len(numbers)} queries, one per blueprint; none was written for "
                        f"blueprint {', '.join(missing)}")
    if problems:
        raise QueriesRejected("; ".join(problems), kept=kept, checked=len(written), off_form=off_form,
                              repairs=repairs, outcomes=outcomes)
    return [kept[n] for n in numbers]


def check_labels(labels: Sequence[CandidateLabel], n_candidates: int) -> list[int]:
    """Return one 0-3 score per candidate (local order), or raise naming missing, unknown or repeated ids."""
    if n_candidates == 1 and labels:
        # One candidate: the first label is its label whatever id the model wrote (a small model often
        # numbers it 1, or keeps inventing further candidates after it).
        return [labels[0].score]
    scores: dict[int, int] = {}
    problems: list[str] = []
    for label in labels:
        if not 0 <= label.doc_id < n_candidates:
            problems.append(f"doc_id {label.doc_id} was not shown (valid ids: 0-{n_candidates - 1})")
        elif label.doc_id in scores:
            problems.append(f"doc_id {label.doc_id} labelled more than once")
        else:
            scores[label.doc_id] = label.score
    missing = [i for i in range(n_candidates) if i not in scores]
    if missing:
        problems.append(f"label every candidate exactly once; missing doc_id {', '.join(map(str, missing))}")
    if problems:
        raise OutputRejected("; ".join(problems))
    return [scores[i] for i in range(n_candidates)]


def fallback_blueprints(features: Features, count: int, *, seed: int = 0, kept: Sequence[Blueprint] = (),
                        already: Sequence[Blueprint] = ()) -> list[Blueprint]:
    """Blueprints drawn in code (``syntra produce --planner code``, and where the LM planner gave too few valid
    ones): ``kept`` (the planner's valid ones) first, then identifiers in turn, each blueprint with the next option
    of every dimension (dimension j starts ``seed + j`` options in), so a document's queries differ in identifier
    and in options, never a repeated combination nor one of ``already`` (blueprints the document's queries use), up
    to ``count`` in all. Callers record that they used it (a fallback as the plan step's failure, ``--planner code``
    in the session's options); the queries are still written by the LM from these blueprints. Why options turn
    with every blueprint: the embedded 1.5B planner gave both queries of a document the same options in 97 of 127
    two-query SciFact documents, and spreading them is the planner's own rule."""
    idents = [i.text for i in features.identifiers]
    dims = list(features.attributes)
    out: list[Blueprint] = list(kept)[:count]
    used: set = {bp.key() for bp in [*out, *already]}
    step = 0
    limit = len(idents) * max(1, max((len(d.options) for d in dims), default=1)) * 2
    while len(out) < count and step < limit:
        # identifier i of turn t: every dimension's option i + t further along, so the identifiers of one turn get
        # different options and each identifier gets the next ones in the next turn
        turn, i = divmod(step, len(idents))
        choices = [AttributeChoice(dimension=d.dimension, option=d.options[(seed + j + i + turn) % len(d.options)])
                   for j, d in enumerate(dims)]
        bp = Blueprint(identifier=idents[i], choices=choices)
        if bp.key() not in used:
            used.add(bp.key())
            out.append(bp)
        step += 1
    return out
