"""Text an LM wrote for test mode, made usable: instructions without fences or loops, verifier scores clamped."""

from __future__ import annotations

import re
from typing import Any

from syntra_dspy.programs.retry import strip_code_fence
from syntra_dspy.query_form import tokens as query_tokens

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

#: Token-set overlap above which a sentence of an LM-written instruction repeats an earlier one (see clean_text).
NEAR_REPEAT = 0.75


def clean_text(text: str | None) -> str:
    """Instruction text an LM wrote, without code fences and without repeated sentences.

    Small models fall into loops that repeat a sentence until the token budget runs out, or repeat it with one
    word changed ("The query must be consistent with the claim. ... with the evidence. ... with the context.");
    every repeat after the first, and every sentence of six or more words whose words overlap an earlier one's by
    more than ``NEAR_REPEAT`` (Jaccard), is dropped (order and line structure are kept), so a loop cannot bloat
    every later prompt.
    """
    text = strip_code_fence(text or "")
    seen: set[str] = set()
    earlier: list[set[str]] = []
    lines = []
    for line in text.splitlines():
        kept = []
        for sentence in _SENTENCE_END.split(line):
            key = " ".join(sentence.lower().split())
            if key and len(key) > 12 and key in seen:
                continue
            words = set(query_tokens(sentence))
            if len(words) >= 6 and any(len(words & w) / len(words | w) > NEAR_REPEAT for w in earlier):
                continue
            seen.add(key)
            if len(words) >= 6:
                earlier.append(words)
            kept.append(sentence)
        if kept or not line.strip():
            lines.append(" ".join(kept).rstrip())
    return _drop_cut_sentence(re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip())


def _drop_cut_sentence(text: str) -> str:
    """Without a last sentence the token budget cut off mid-way (prose only: a list item may lack a full stop).

    A cut sentence ("... is 0, which means") reads as an instruction with no end, and the judge or generator that
    receives it follows it anyway."""
    head, _, last = text.rpartition("\n")
    if not last or last.rstrip().endswith((".", "!", "?", ":", ")", '"', "'")) or re.match(r"\s*([-*•]|\d+[.)])", last):
        return text
    sentences = _SENTENCE_END.split(last)
    if len(sentences) < 2:
        return text
    kept = " ".join(sentences[:-1])
    return f"{head}\n{kept}" if head else kept


def verifier_score(value: Any) -> int:
    """A verifier's 0-3 score as written; anything unreadable counts as 0."""
    try:
        return max(0, min(3, int(value)))
    except (TypeError, ValueError):
        return 0
