"""When a written query copies its document, measured one way for the check that rejects it and the decoder that
steers away from it.

A query that repeats a run of more than :data:`MAX_COPIED_WORDS` consecutive words of its document is rejected
(a searcher has not read the document, and a copied query teaches a retriever string matching). The write step's
checks (:mod:`syntra_dspy.programs.validation`) measure it on a finished answer; :class:`CopyGuard` measures it on
an answer while it is decoded, so the embedded engine can take the next best token instead of the one that would
make the copy (``syntra produce --copy-guard``). Both read runs of word pieces the same way, so a query the guard
let through is one the check keeps.
"""

from __future__ import annotations

import re
from typing import Any

from syntra_dspy.decoding_guards import StringGuard, pop_mark

#: The longest run of a document's consecutive words a query may repeat.
MAX_COPIED_WORDS = 10

#: Word pieces: "blood-brain" is "blood", "brain", so a copy cannot hide behind a hyphen.
WORD_PIECES = re.compile(r"\w+")

#: The key under which a request's output schema carries a copy guard for one field (the embedded engine takes it
#: out before the schema becomes a grammar): ``{"document": ..., "max_words": ...}``.
COPY_GUARD_KEY = "x-syntra-copy-guard"


def _pieces(text: str) -> tuple[list[str], list[int]]:
    """The text's word pieces as spelled, and for each the number of the whitespace-separated word it lies in."""
    spelled, word_of = [], []
    for number, word in enumerate(text.split()):
        found = WORD_PIECES.findall(word)
        spelled.extend(found)
        word_of.extend([number] * len(found))
    return spelled, word_of


def longest_copy(query: str, document: str) -> tuple[list[str], int]:
    """(the run of consecutive word pieces the query shares with the document that spans most of the query's words,
    in the query's spelling; how many of the query's whitespace-separated words it spans).

    Pieces are matched, but a run is as long as the words it covers: a compound name is one word however many
    pieces it holds. SciFact run: the writer named "1-(5-chloro-6-(trifluoromethoxy)-1H-benzoimidazol-2-yl)-1H-
    pyrazole-4-carboxylic acid" (the document's compound, the blueprint's identifier), 16 pieces, and every query
    naming it was a "copied sentence"."""
    spelled, word_of = _pieces(query)
    q = [w.lower() for w in spelled]
    d = [w.lower() for w in WORD_PIECES.findall(document)]
    best, best_len, end = 0, 0, 0
    previous = [0] * (len(d) + 1)
    for qi in range(1, len(q) + 1):
        current = [0] * (len(d) + 1)
        for di in range(1, len(d) + 1):
            if q[qi - 1] == d[di - 1]:
                run = current[di] = previous[di - 1] + 1
                words = word_of[qi - 1] - word_of[qi - run] + 1
                if (words, run) > (best, best_len):
                    best, best_len, end = words, run, qi
        previous = current
    return spelled[end - best_len:end], best


def copy_guard_mark(document: str, max_words: int = MAX_COPIED_WORDS) -> dict[str, Any]:
    """What to add to an output field's JSON schema so an engine that steers decoding keeps every string written in
    it from copying more than ``max_words`` consecutive words of ``document``."""
    return {COPY_GUARD_KEY: {"document": document, "max_words": max_words}}


def pop_copy_guard(schema: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the schema without any copy guard mark in its top-level fields, the mark's settings or None)."""
    return pop_mark(schema, COPY_GUARD_KEY)


class CopyGuard(StringGuard):
    """Follows a JSON answer as it is decoded and says whether the next piece of text would make a string in it
    repeat more than ``max_words`` consecutive words of ``document`` (as :func:`longest_copy` counts them).

    Every string of the answer is watched (the field names of a query list are short words, far below the limit).
    Only runs that end in a piece the new text changed are measured: every earlier piece was measured when it was
    written."""

    def __init__(self, document: str, max_words: int = MAX_COPIED_WORDS) -> None:
        self.max_words = max_words
        self._doc = [w.lower() for w in WORD_PIECES.findall(document)]
        self._at: dict[str, list[int]] = {}
        for position, piece in enumerate(self._doc):
            self._at.setdefault(piece, []).append(position)
        super().__init__()

    def breaks(self, before: str, after: str) -> bool:
        old, _ = _pieces(before)
        new, word_of = _pieces(after)
        first = 0
        while first < min(len(old), len(new)) and old[first] == new[first]:
            first += 1
        q = [w.lower() for w in new]
        for end in range(first, len(q)):
            for position in self._at.get(q[end], ()):
                run = 1
                while run <= end and run <= position and q[end - run] == self._doc[position - run]:
                    run += 1
                if word_of[end] - word_of[end - run + 1] + 1 > self.max_words:
                    return True
        return False
