"""The form of a task's queries, read off its few-shot examples, and the checks written queries must pass.

A retriever learns the query type it is trained on: if the examples are claims and the synthetic queries are
questions, the records teach the wrong task. Form here is deliberately cheap and robust (no parser): whether a
query is a question (final question mark, or an English interrogative first word), a punctuated sentence, or
plain text without final punctuation, and how long it is in words (characters for Chinese and Japanese).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from syntra_dspy.decoding_guards import StringGuard
from syntra_dspy.languages import HAN, cjk_share

Shape = Literal["question", "sentence", "plain"]
Kind = Literal["question", "claim", "plain", "statement", "mixed"]
Unit = Literal["words", "characters"]

#: How far outside the examples' length range a query may go, as a share of the range's ends: with examples of
#: 9-13 words, queries of 4-20 words pass. Three to eight examples show the style, not the exact bounds.
LENGTH_SLACK = 0.5

_TOKEN = re.compile(f"[{HAN}]|[^\\W{HAN}]+")
_CJK_CHAR = re.compile(f"[{HAN}]")
_QUESTION_END = ("?", "？")
_SENTENCE_END = (".", "!", "。", "！")
_INTERROGATIVE = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was", "were",
                  "do", "does", "did", "can", "could", "should", "would", "will"}
#: Words a question puts before its subject ("What are the main uses of ...", "How many ...", "How to ..."):
#: the run of them that opens a question is what :func:`search_terms` drops.
_QUESTION_OPENING = _INTERROGATIVE | {"has", "have", "had", "many", "much", "to", "the", "a", "an"}
_OPENING_WORD = re.compile(r"\s*([^\W\d_]+)(?:['’]s)?\b\s*")


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; each Chinese or Japanese character is a token of its own."""
    return [t.lower() for t in _TOKEN.findall(text)]


def shape(text: str) -> Shape:
    """``question``, ``sentence`` (ends with sentence punctuation) or ``plain`` (no final punctuation)."""
    text = text.strip().strip("\"'“”").strip()
    words = tokens(text)
    if text.endswith(_QUESTION_END) or (words and words[0] in _INTERROGATIVE):
        return "question"
    return "sentence" if text.endswith(_SENTENCE_END) else "plain"


def _question_parts(question: str) -> tuple[str, str]:
    """The text without quotes, and its body without the final question mark ("" when the text holds more than one
    question, or nothing else): what :func:`search_terms` and :func:`question_as_claim` read."""
    text = question.strip().strip("\"'“”").strip()
    body = text.rstrip("?？ ").strip()
    return text, "" if any(mark in body for mark in _QUESTION_END) else body


def search_terms(question: str) -> str | None:
    """A one-part English question as plain search terms: its opening question words and final question mark
    dropped ("What are the main applications of fractal techniques?" -> "main applications of fractal
    techniques"); None when nothing is left or the text holds more than one question.

    Why: asked for keyword queries, the embedded 1.5B writer mostly writes questions, and asked to rewrite one, it
    writes the same question again (CSL run: 42 rewrites rejected as questions in 10 documents). The subject of
    such a question is already the search request a keyword task wants, so code keeps it instead of a third call.
    """
    text, body = _question_parts(question)
    if not body:
        return None
    start = 0
    while (match := _OPENING_WORD.match(body, start)) and match.group(1).lower() in _QUESTION_OPENING:
        start = match.end()
    terms = body[start:].strip(" ,;:")
    if start == 0 and not text.endswith(_QUESTION_END):
        return None  # not a question at all
    return terms or None


#: Yes/no questions a claim can be read off by moving the auxiliary behind the subject ("Is ATF4 a marker?" ->
#: "ATF4 is a marker."); other wh-questions than the relations below ("What is the function of ...?") ask for what a
#: claim would state, and are left to the writer. ``did`` is left out: its claim needs the verb's past tense.
_COPULAS = {"is", "are", "was", "were"}
_MODALS = {"can", "could", "will", "would", "should", "may", "might", "must"}
_PERFECT = {"has", "have"}
_DO = {"does", "do"}
#: Words that open a copula's predicate: "Is X *associated* with Y", "Are X *more* prevalent", "Is X *a* marker".
#: Lower-case "a"/"an" only: "cyclin A" is part of a subject.
_PREDICATE_OPENING = frozenset("""
a an not more less most highly necessary essential important required sufficient responsible associated involved
linked correlated related able capable critical crucial key present absent common rare effective safe useful
beneficial harmful toxic protective predictive indicative independent dependent different similar due likely
unlikely elevated higher lower greater increased decreased reduced altered expressed found known seen shown thought
used made bound given driven taken held lost broken
""".split())
#: Base-form verbs a yes/no question about a finding commonly turns on ("Does X *play* a role", "Can X *predict*").
_VERBS = frozenset("""
accelerate act activate affect alter ameliorate attenuate benefit bind block cause change confer contain contribute
control correlate decrease delay depend determine differ drive elevate enhance exacerbate exhibit exist explain
express extend facilitate fail form have help impair improve increase induce influence inhibit interact involve
imply indicate lead limit lower maintain mediate modify modulate need occur persist play predict predispose prevent
produce promote protect raise reduce reflect regulate remain repress require rescue respond restore result reveal
reverse show shorten slow stimulate suggest support suppress sustain target trigger undergo vary worsen
""".split())
#: Words a subject does not end with: a split after them cuts a noun phrase in two ("Is the *phosphorylated* ...").
_SUBJECT_CANNOT_END = frozenset("a an the of in on for to and or with by from at as than its their this that".split())
#: Words a subject does not hold: past one of them the boundary was missed and a clause has begun ("Does X suggest
#: *it may* have ...": "suggest" was the verb).
_CLAUSE_WORDS = frozenset("""
it they we may might can could will would should must is are was were be been has have had do does did that which who
""".split())
#: "Is there evidence that S?", "Does the study show that S?": the claim is S itself.
_WRAPPED_CLAIM = re.compile(
    r"^(?:(?:is|are) there (?:any )?(?:evidence|data|support)\b.*?|(?:has|have) it been \w+|"
    r"(?:does|do|did) (?:the|this) (?:study|paper|abstract|article|research|work|evidence|data|authors?) \w+)"
    r" that (?:(?:suggests?|shows?|indicates?|supports?|demonstrates?) (?:that )?)?(?P<claim>.+)$", re.IGNORECASE)
_WORD = re.compile(r"\S+")
_ADVERB = re.compile(r"[a-z]{3,}ly")  # "Can X *accurately* predict": the adverb joins the predicate


def _third_person(verb: str) -> str:
    if verb == "have":
        return "has"
    if verb.endswith(("s", "x", "z", "ch", "sh")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _sentence(subject: list[str], predicate: list[str]) -> str:
    first = subject[0]
    if first[:1].isalpha() and first.islower() and not any(c.isdigit() for c in first):
        first = first[0].upper() + first[1:]  # "brain glial cells" -> "Brain ..."; "miR-184", "mRNA", "p53" stay
    return " ".join([first, *subject[1:], *predicate]).rstrip(" ,;:") + "."


def _split(words: list[str], opens) -> int | None:
    """Where the predicate begins: the first word ``opens`` accepts that has a subject before it which does not
    end with a function word; None when there is no such word."""
    for i in range(1, len(words)):
        before = words[i - 1] if words[i - 1] in ("A", "An") else words[i - 1].lower()  # "cyclin A" ends a subject
        if before in _CLAUSE_WORDS:
            return None
        if opens(i) and before not in _SUBJECT_CANNOT_END:
            return i
    return None


#: Wh-questions about a relation that presuppose it, and the claim each asks about: "What is the role of X in Y?" ->
#: "X plays a role in Y."; "What is the effect of X on Y?" -> "X affects Y."; "What is the relationship between X and
#: Y?" -> "X is related to Y.". Groups: the two terms, and (``number``) the auxiliary of "What role does/do X play".
_RELATION_QUESTIONS = (
    (re.compile(r"^what (?:is|was) the (?:main |key |primary )?role of (?P<a>.+?) in (?P<b>.+)$", re.IGNORECASE),
     ("plays", "play"), "a role in"),
    (re.compile(r"^what role (?P<number>does|do) (?P<a>.+?) play in (?P<b>.+)$", re.IGNORECASE),
     ("plays", "play"), "a role in"),
    (re.compile(r"^what (?:is|are) the (?:main )?(?:effects?|impacts?) of (?P<a>.+?) on (?P<b>.+)$", re.IGNORECASE),
     ("affects", "affect"), ""),
    (re.compile(r"^what (?:is|are) the (?:main )?influences? of (?P<a>.+?) on (?P<b>.+)$", re.IGNORECASE),
     ("influences", "influence"), ""),
    (re.compile(r"^what (?:is|was) the (?:relationship|relation|link) between (?P<a>.+?) and (?P<b>.+)$",
                re.IGNORECASE), ("is related to", "are related to"), ""),
    (re.compile(r"^what (?:is|was) the association between (?P<a>.+?) and (?P<b>.+)$", re.IGNORECASE),
     ("is associated with", "are associated with"), ""),
)


def _plural(subject: str) -> bool:
    """A rough number for a subject: "X and Y", or a last word in lower case ending in -s ("microtubules")."""
    words = subject.split()
    last = words[-1] if words else ""
    return " and " in f" {subject} " or (last.islower() and last.endswith("s")
                                          and not last.endswith(("ss", "us", "is", "sis")))


def _relation_claim(body: str) -> str | None:
    for pattern, (singular, plural), middle in _RELATION_QUESTIONS:
        match = pattern.match(body)
        if match is None:
            continue
        a, b = match.group("a").strip(" ,"), match.group("b").strip(" ,")
        if not a or not b:
            return None
        number = match.groupdict().get("number")  # "did" is not matched: its claim needs the past tense
        many = number.lower() == "do" if number is not None else _plural(a)
        verb = plural if many else singular
        words = _WORD.findall(a)
        return _sentence(words[:1], [*words[1:], verb, *([middle] if middle else []), b])
    return None


def question_as_claim(question: str) -> str | None:
    """A yes/no question restated as the claim it asks about ("Is MBD1 a regulator of miR-184?" -> "MBD1 is a
    regulator of miR-184."; "Does IL-12 play a role in Th1 development?" -> "IL-12 plays a role in Th1
    development."; "Is there evidence that S?" -> "S."), or a question about a relation it presumes as that relation
    ("What is the role of X in Y?" -> "X plays a role in Y."); None for any other question, for more than one
    question, or where no subject/predicate boundary is found.

    Why: asked for claims, the embedded 1.5B writer still writes questions, and its rewrite of one into a claim is
    often the same question again (SciFact run: 212 rewrites rejected as questions; of the 156 distinct ones, 73
    were yes/no questions, 17 about a role, effect or relationship). Read in code, such a question keeps its
    blueprint without two more calls. No parser: the boundary is found with word lists, and the claim must still
    pass every check of a written query."""
    text, body = _question_parts(question)
    if not body or not text.endswith(_QUESTION_END):
        return None
    relation = _relation_claim(body)
    if relation is not None:
        return relation
    wrapped = _WRAPPED_CLAIM.match(body)
    if wrapped:
        words = _WORD.findall(wrapped.group("claim"))
        return _sentence(words[:1], words[1:]) if len(words) >= 3 else None
    words = _WORD.findall(body)
    if len(words) < 3:
        return None
    aux, rest = words[0].lower(), words[1:]
    lowered = [w.lower().strip(",;:") for w in rest]
    at: int | None
    if aux in _COPULAS and lowered[0] == "there":
        rest = rest[2:] if len(rest) > 2 and lowered[1] == "any" else rest[1:]
        return _sentence(["there", aux], rest) if rest else None
    if aux in _COPULAS:
        at = _split(rest, lambda i: (lowered[i] in _PREDICATE_OPENING and rest[i] not in ("A", "An"))
                    or bool(re.fullmatch(r"[a-z]{3,}ed", rest[i])))
        if at is not None and at > 2 and lowered[at - 1] == "times":  # "five times more prevalent"
            at -= 2
        return None if at is None else _sentence([*rest[:at], aux], rest[at:])
    if aux in _PERFECT:
        at = _split(rest, lambda i: lowered[i] == "been" or bool(re.fullmatch(r"[a-z]{3,}ed", rest[i])))
        return None if at is None else _sentence([*rest[:at], aux], rest[at:])
    if aux in _MODALS:
        at = _split(rest, lambda i: lowered[i] in ("be", "not") or lowered[i] in _VERBS)
        if at is None:
            return None
        if at > 1 and _ADVERB.fullmatch(rest[at - 1]):
            at -= 1
        return _sentence([*rest[:at], aux], rest[at:])
    if aux in _DO:
        at = _split(rest, lambda i: lowered[i] in _VERBS)
        if at is None:
            return None
        verb = rest[at] if aux == "do" else _third_person(lowered[at])
        start = at - 1 if at > 1 and _ADVERB.fullmatch(rest[at - 1]) else at
        return _sentence(rest[:start], [*rest[start:at], verb, *rest[at + 1:]])
    return None


#: Words that name no subject of their own: function words, and what any paper has (its topic, results, method).
_GENERIC = frozenset("""
a an the of in on for to and or with by from at as about into its their this that these those it is are be
what which how main key primary major central overall general specific basic new recent current various different
topic topics subject subjects paper papers study studies article articles research work works document abstract
author authors result results finding findings conclusion conclusions method methods approach approaches analysis
purpose aim aims goal goals focus role roles application applications use uses used effect effects field area
""".split())


#: The same for Chinese, as words to cut out of the text (longest first): what is left must hold two characters.
#: Only words of two or more characters (and 的), so that no character is cut out of a term ("中国" keeps its 中).
_GENERIC_ZH = tuple(sorted("""
本文 本研究 该研究 论文 文章 研究 主要 内容 方法 结果 分析 应用 问题 作用 影响 进展 综述 探讨 现状 意义 目的 结论 特点
情况 方面 领域 什么 哪些 如何 怎样 关于 基于 一种 一个 这个 相关 最新 当前 目前 以及 的
""".split(), key=len, reverse=True))


def names_a_subject(query: str) -> bool:
    """Whether a query holds a word beyond function words and what every paper has ("main topic of the paper" names
    none: it matches any document; nor does "本文的主要研究内容", "the main research content of this paper")."""
    words = tokens(query)
    if not words:
        return False
    if any(w not in _GENERIC and not w.isdigit() and not _CJK_CHAR.fullmatch(w) for w in words):
        return True
    rest = query
    for word in _GENERIC_ZH:
        rest = rest.replace(word, " ")
    return len(_CJK_CHAR.findall(rest)) >= 2


@dataclass(frozen=True)
class QueryForm:
    """What the examples show: the kind of query and the length range a written query must stay within.

    ``question``: every example is a question, so every query must be one. ``claim``: no example is a question and
    every one is a punctuated sentence. ``plain``: no example is a question or ends with punctuation (keyword
    style). ``statement``: no question, punctuation mixed. ``mixed``: some examples are questions, some not;
    then only length is checked.
    """

    kind: Kind
    min_length: int
    max_length: int
    unit: Unit

    @classmethod
    def from_examples(cls, queries: Sequence[str], *, slack: float = LENGTH_SLACK) -> QueryForm | None:
        """The form the example queries share; None without examples (then nothing is checked)."""
        queries = [q for q in queries if q.strip()]
        if not queries:
            return None
        unit: Unit = "characters" if sum(cjk_share(q) > 0.5 for q in queries) * 2 > len(queries) else "words"
        shapes = [shape(q) for q in queries]
        kind: Kind
        if all(s == "question" for s in shapes):
            kind = "question"
        elif "question" in shapes:
            kind = "mixed"
        elif all(s == "sentence" for s in shapes):
            kind = "claim"
        elif all(s == "plain" for s in shapes):
            kind = "plain"
        else:
            kind = "statement"
        lengths = [len(tokens(q)) for q in queries]
        return cls(kind, max(1, math.floor(min(lengths) * (1 - slack))), math.ceil(max(lengths) * (1 + slack)), unit)

    @property
    def restates_questions(self) -> bool:
        """Whether a query written as a question can be restated in this form (the examples are never questions)."""
        return self.kind in ("claim", "statement", "plain")

    def problem(self, text: str) -> str | None:
        """What to fix so ``text`` has the examples' form, phrased for the writer; None when it has it."""
        found = shape(text)
        if found == "question" and self.kind in ("claim", "statement"):
            return "is a question; write a declarative claim like the examples, not a question"
        if found == "question" and self.kind == "plain":
            return "is a question; write it like the examples: plain search terms, not a question"
        if found == "sentence" and self.kind == "plain":
            return "is a punctuated sentence; write it like the examples: plain search terms without a final period"
        if found != "question" and self.kind == "question":
            return "is not a question; write a question like the examples, ending with a question mark"
        length = len(tokens(text))
        if length > self.max_length:
            return f"has {length} {self.unit}; use at most {self.max_length} {self.unit}, like the examples"
        if length < self.min_length:
            return f"has {length} {self.unit}; use at least {self.min_length} {self.unit}, like the examples"
        return None

    def rule(self) -> str:
        """The form as the writer's per-call rule, completing "Write every query in English, ...". Measured on
        SciFact with the embedded 1.5B writer and claim examples, first answers of 8 documents: without the rule 6 of 8
        wrote questions; with it next to the answer, none did; the same rule placed in the long fixed instruction
        still left 4 of 8 writing questions. So it goes into the call, right before the answer."""
        size = f"{self.min_length}-{self.max_length} {self.unit}"
        rules = {
            "claim": f"as a declarative claim of {size} ending with a period: a finding stated as fact, like the "
                     "example queries; never a question",
            "question": f"as a question of {size} ending with a question mark, like the example queries",
            "plain": f"as a few search terms ({size}) without final punctuation, like the example queries; never a "
                     "question or a full sentence",
            "statement": f"as a statement of {size}, like the example queries; never a question",
            "mixed": f"in {size}, like the example queries",
        }
        return rules[self.kind]

    def describe(self) -> str:
        """The form in words, for feedback to an instruction refiner."""
        kinds = {"question": "questions", "claim": "declarative claims ending with a period",
                 "plain": "plain search terms without final punctuation", "statement": "statements, never questions",
                 "mixed": "questions and statements"}
        return f"{kinds[self.kind]} of {self.min_length}-{self.max_length} {self.unit}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "min_length": self.min_length, "max_length": self.max_length, "unit": self.unit}


def token_jaccard(a: str, b: str) -> float:
    """Overlap of two texts' token sets (intersection over union): 1.0 for the same words in any order."""
    left, right = set(tokens(a)), set(tokens(b))
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def copied_share(query: str, document: str) -> float:
    """Share of the query's distinct tokens that occur in the document (0 for an empty query)."""
    words = set(tokens(query))
    if not words:
        return 0.0
    return len(words & set(tokens(document))) / len(words)


#: The key under which a request's output schema carries a question guard for one field: ``{}`` (no settings).
QUESTION_GUARD_KEY = "x-syntra-question-guard"


class QuestionGuard(StringGuard):
    """Refuses the piece of text that makes a string a question (:func:`~syntra_dspy.query_form.shape`): a question
    mark at its end, or an English interrogative as its first word ("What", "Does", ...), refused as soon as the word
    is written, so the decoder takes another opening rather than finishing a question it cannot end.

    A string that is a question already (the decoder kept a refused token when nothing else was allowed) is not
    refused again: the check rejects it later. Why: asked for claims, the embedded 1.5B writer writes questions (12 of
    40 first answers in one SciFact run), and asked to restate one, mostly the same question again."""

    def breaks(self, before: str, after: str) -> bool:
        return shape(after) == "question" and shape(before) != "question"


def question_guard_mark() -> dict[str, Any]:
    """What to add to an output field's JSON schema so an engine that steers decoding writes no question in it."""
    return {QUESTION_GUARD_KEY: {}}
