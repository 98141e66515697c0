"""A scripted "brain" that answers every syntra-dspy signature offline, with prompt-dependent answers.

It lets tests (ours and users') run compile and production end to end with no model, while the optimizer's
behaviour is really exercised: outputs change when instructions change, and the verifiers' scores depend on
those outputs. The markers below are what the brain's refiners add and what its generators react to.

- extraction yields relationship identifiers only when the extraction instructions contain ``GUIDANCE_MARK``;
  the identifier/attribute verifier scores 3 when relationships are present, else 1;
- queries are short claims when the query instruction contains ``STYLE_MARK``, else questions (which the code
  check rejects when the task's examples are claims); the query verifier scores 3 for claims, 1 for questions;
- a ``copies`` brain writes its claims as runs of the document's own words (the source is then the first BM25
  hit) until the query instruction contains ``PARAPHRASE_MARK``;
- the annotator labels a candidate 2 when the annotation instruction contains ``LENIENT_MARK`` and the
  candidate shares a content word with the query, else 1 (or 0 without shared words);
- the graded query verifier (one query, one digit) peaks at 1 for a question, 3 for a claim of the brain's own
  claim template, else 2 (so copied passages rate below the brain's claims);
- the graded judge (one candidate, one digit) answers with label-token probabilities peaked at the number of
  content words query and candidate share (at most 3) when the instruction contains ``LENIENT_MARK``, else at
  most 1, so without the marker relevant and merely related candidates look alike;
- refiners add the marker for their loop, unless the brain is ``stubborn`` (then nothing ever improves); the
  query refiner adds ``PARAPHRASE_MARK`` too when the feedback says the queries reuse the document's terms;
- GEPA's reflection call (``new_instruction``) adds the marker of the step whose instruction it is shown
  (extraction, query planning/writing, written annotation or grading), likewise unless ``stubborn``;
- translation (``translation``) replaces the terms of ``glossary`` (English -> Chinese, read backwards for a
  translation into English) found in the text, in the order they appear; a text with none of them comes back
  unchanged, which the translator's language check rejects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from syntra_dspy.lm.compact_layout import compact_inputs
from syntra_dspy.lm.scripted import ScriptedCall, ScriptedLM, TokenDistribution
from syntra_dspy.optimizers.query_measures import COPYING

GUIDANCE_MARK = "Prefer relationships stated as findings."
STYLE_MARK = "Write each query as a short declarative claim, never a question."
LENIENT_MARK = "A document reporting evidence about the claim's finding is relevant (2 or 3)."
PARAPHRASE_MARK = "Name at most one key term of the document; say everything else in a searcher's own words."
COPY_WORDS = 8  # words per copied claim (fewer than the consecutive words the copy check rejects)
# A field runs to the next field's marker, or to the adapter's closing request ("Respond with ...") or the end.
_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## \w+ ## \]\]|\n+Respond with |\Z)", re.DOTALL)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{3,}")
_STOP = {"that", "with", "from", "this", "were", "have", "been", "does", "what", "which", "their", "about", "into"}


def fields_of(text: str) -> dict[str, str]:
    """Input fields of a JSONAdapter/ChatAdapter user message, or of the compact format's, by name."""
    marked = {m.group(1): m.group(2).strip() for m in _FIELD.finditer(text)}
    return marked or compact_inputs(text)


def content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


def grading_inputs(user: str) -> tuple[str, str]:
    """(query, document) of a one-candidate grading call's user message, in either order (``--grade-order``)."""
    query = re.search(r"^Query: (.*)$", user, re.MULTILINE)
    document = re.search(r"^Document: (.*?)(?=\n\nQuery: |\n\n[^\n]*\(one digit, 0-3\):\s*$)", user,
                         re.MULTILINE | re.DOTALL)
    return (query.group(1) if query else ""), (document.group(1) if document else "")


@dataclass
class SyntraBrain:
    """Callable responder for ``ScriptedLM``; counts the calls it answers per signature."""

    stubborn: bool = False
    copies: bool = False
    glossary: dict[str, str] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, call: ScriptedCall) -> dict[str, Any] | TokenDistribution:
        if call.user.rstrip().endswith("(one digit, 0-3):") and call.user.startswith("Example queries:"):
            self.calls["rate_query"] = self.calls.get("rate_query", 0) + 1
            return self.rate_query(call.user)
        if call.user.rstrip().endswith("(one digit, 0-3):"):  # the one-candidate grading call
            self.calls["grade"] = self.calls.get("grade", 0) + 1
            return self.grade(call.system, call.user)
        inputs = fields_of(call.user)
        outputs = set(call.output_fields)
        name, answer = self._route(call.system, inputs, outputs)
        self.calls[name] = self.calls.get(name, 0) + 1
        return answer

    # -- routing on output and input field names ---------------------------------------------------------
    def _route(self, system: str, inputs: dict[str, str], outputs: set[str]) -> tuple[str, dict[str, Any]]:
        if "judgements" in outputs:
            return "annotate", self.annotate(system, inputs)
        if "translation" in outputs:
            return "translate", self.translate(inputs)
        if "queries" in outputs:
            if self.copies and STYLE_MARK in system and PARAPHRASE_MARK not in system:
                return "write", self.write_copies(inputs)
            return "write", self.write(system, inputs)
        if "rewritten" in outputs:
            return "rewrite", self.rewrite(inputs)
        if "blueprints" in outputs:
            return "plan", self.plan(inputs)
        if "identifiers" in outputs:
            return "extract", self.extract(system, inputs)
        if "query_type" in outputs:
            refined = "feedback" in inputs and not self.stubborn
            return ("refine_task" if "feedback" in inputs else "infer_task"), self.definition(refined)
        if outputs == {"score", "feedback"}:
            if "pairs" in inputs:
                return "judge_queries", self.judge_queries(inputs)
            if "samples" in inputs:
                return "judge_idattr", self.judge_idattr(inputs)
            specific = "supports or refutes" in inputs.get("task_definition", "")
            return "judge_task", {"score": 3 if specific else 1,
                                  "feedback": "ok" if specific else "The criterion is too generic."}
        if "guidance" in outputs:
            extra = "" if self.stubborn else f"\n- {GUIDANCE_MARK}"
            return "refine_guidance", {"guidance": (inputs.get("current_guidance", "") + extra).strip()
                                                   or "- Be precise."}
        if "role_and_process" in outputs:
            return "draft_role", {"role_and_process": "Synthesizer role: a researcher checking a claim.\n"
                                                      "Query extraction process: 1. pick a finding."}
        if "style_guide" in outputs:
            return "draft_style", {"style_guide": "Linguistic DNA: concise.\nNegative constraints: no copying."}
        if "instruction" in outputs and "golden_queries" in inputs:
            extra = "" if self.stubborn else f"\n{STYLE_MARK}"
            if not self.stubborn and COPYING in inputs.get("feedback", ""):
                extra += f"\n{PARAPHRASE_MARK}"
            return "refine_query", {"instruction": inputs.get("current_instruction", "") + extra}
        if "instruction" in outputs and "current_instruction" in inputs:
            extra = "" if self.stubborn else f"\n{LENIENT_MARK}"
            return "refine_annotation", {"instruction": inputs.get("current_instruction", "") + extra}
        if "instruction" in outputs:
            return "draft_annotation", {"instruction": "Label each candidate 0-3. Only a document that states "
                                                       "the exact claim word for word is relevant."}
        if outputs == {"feedback"}:
            return "explain_mismatches", {"feedback": "The instruction demands verbatim statements; accept "
                                                      "documents that report evidence on the claim."}
        if "new_instruction" in outputs:
            return "propose_instruction", self.propose_instruction(inputs)
        raise LookupError(f"SyntraBrain has no answer for outputs {sorted(outputs)}")

    # -- answers ---------------------------------------------------------------------------------------------
    @staticmethod
    def definition(refined: bool) -> dict[str, Any]:
        criterion = "it reports evidence that supports or refutes the claim" if refined else "it is about the claim"
        return {"query_type": "biomedical research claim", "doc_type": "scientific paper abstract",
                "relevance_definition": f"Given a query (biomedical research claim) and a document (scientific "
                                        f"paper abstract), the document is relevant if {criterion}.",
                "query_language": "en", "document_language": "en"}

    @staticmethod
    def extract(system: str, inputs: dict[str, str]) -> dict[str, Any]:
        words = [w for w in _WORD.findall(inputs.get("document", "")) if w.lower() not in _STOP][:6] or ["topic"]
        kind = "relationship" if GUIDANCE_MARK in system else "entity"
        identifiers = [{"kind": kind, "text": w} for w in dict.fromkeys(words)]
        attributes = [{"dimension": "specificity", "options": ["broad", "specific"]},
                      {"dimension": "stance", "options": ["supporting", "refuting"]}]
        return {"identifiers": identifiers, "attributes": attributes}

    def propose_instruction(self, inputs: dict[str, str]) -> dict[str, Any]:
        """GEPA's reflection: add the marker of the step the instruction belongs to (known by its base text)."""
        from syntra_dspy.signatures import (
            ExtractIdentifiersAndAttributes,
            GradeCandidateRelevance,
            JudgeCandidateRelevance,
            PlanQueryBlueprints,
            WriteQueriesFromBlueprints,
        )

        current = inputs.get("current_instruction", "")
        marks = ((ExtractIdentifiersAndAttributes, GUIDANCE_MARK), (PlanQueryBlueprints, STYLE_MARK),
                 (WriteQueriesFromBlueprints, STYLE_MARK), (JudgeCandidateRelevance, LENIENT_MARK),
                 (GradeCandidateRelevance, LENIENT_MARK))
        mark = next((m for sig, m in marks if sig.instructions.split("\n")[0] in current), "")
        if self.stubborn or not mark or mark in current:
            return {"new_instruction": current}
        return {"new_instruction": f"{current}\n{mark}"}

    def translate(self, inputs: dict[str, str]) -> dict[str, Any]:
        """Glossary terms of the text, translated, in the order they appear (the text unchanged without any)."""
        text = inputs.get("text", "")
        into_chinese = "Chinese" in inputs.get("target_language", "")
        pairs = self.glossary.items() if into_chinese else ((zh, en) for en, zh in self.glossary.items())
        lowered = text.lower()
        found = sorted((lowered.find(src.lower()), -len(src), dst) for src, dst in pairs if src.lower() in lowered)
        if not found:
            return {"translation": text}
        words, covered = [], -1
        for start, neg_len, dst in found:  # a longer term wins over one inside it ("soy milk" over "milk")
            if start > covered:
                words.append(dst)
                covered = start - neg_len - 1
        return {"translation": ("" if into_chinese else " ").join(words)}

    @staticmethod
    def judge_idattr(inputs: dict[str, str]) -> dict[str, Any]:
        ok = "[relationship]" in inputs.get("samples", "")
        return {"score": 3 if ok else 1, "feedback": "good" if ok else "Identifiers miss the stated findings."}

    @staticmethod
    def plan(inputs: dict[str, str]) -> dict[str, Any]:
        idents = re.findall(r"^\d+\. (.+)$", inputs.get("identifiers", ""), re.MULTILINE)
        dims = re.findall(r"^- ([^:]+): (.+)$", inputs.get("attributes", ""), re.MULTILINE)
        used = inputs.get("already_used", "")
        count = int(inputs.get("count", "1") or 1)
        plans = []
        for ident in idents:
            for flip in (0, 1):
                choices = [{"dimension": d, "option": opts.split(" | ")[flip % len(opts.split(' | '))]}
                           for d, opts in dims]
                label = f"identifier: {ident}; " + "; ".join(f"{c['dimension']} = {c['option']}" for c in choices)
                if label in used:
                    continue
                plans.append({"identifier": ident, "choices": choices})
                if len(plans) == count:
                    return {"blueprints": plans}
        return {"blueprints": plans}

    @staticmethod
    def write(system: str, inputs: dict[str, str]) -> dict[str, Any]:
        lines = re.findall(r"^(\d+)\. identifier: ([^;]+);(.*)$", inputs.get("blueprints", ""), re.MULTILINE)
        claim = STYLE_MARK in system
        queries = []
        for pos, ident, rest in lines:
            opts = " ".join(o.split(" = ")[1] for o in rest.split(";") if " = " in o)
            text = f"{ident} has {opts} effects" if claim else f"What is known about {ident} ({opts})?"
            queries.append({"blueprint": int(pos), "query": text})
        return {"queries": queries}

    @staticmethod
    def rewrite(inputs: dict[str, str]) -> dict[str, Any]:
        """``What is known about X (o)?`` becomes the claim ``X has o effects.``; a copied passage keeps its first
        three words and ends ``... in other words.``; anything else comes back as it was."""
        query = inputs.get("query", "").strip()
        found = re.fullmatch(r"What is known about (.+) \((.*)\)\?", query)
        if found:
            return {"rewritten": f"{found.group(1)} has {found.group(2)} effects."}
        problem = inputs.get("problem", "")
        if "word for word" in problem or "copies the document's words" in problem:
            return {"rewritten": " ".join(query.split()[:3]) + " in other words."}
        return {"rewritten": query}

    @staticmethod
    def write_copies(inputs: dict[str, str]) -> dict[str, Any]:
        """Claims made of the document's own words: blueprint n takes the n-th run of ``COPY_WORDS`` words."""
        words = inputs.get("document", "").split()
        numbers = [int(n) for n in re.findall(r"^(\d+)\. identifier:", inputs.get("blueprints", ""), re.MULTILINE)]
        return {"queries": [{"blueprint": n, "query": " ".join(words[COPY_WORDS * n:COPY_WORDS * (n + 1)])}
                            for n in numbers]}

    @staticmethod
    def judge_queries(inputs: dict[str, str]) -> dict[str, Any]:
        questions = len(re.findall(r"Query: .*\?$", inputs.get("pairs", ""), re.MULTILINE))
        return {"score": 1 if questions else 3,
                "feedback": "Queries are questions; the examples are claims." if questions else "good"}

    @staticmethod
    def rate_query(user: str) -> TokenDistribution:
        """The graded query verifier: a question peaks at 1, a claim of the brain's own claim template (``X has …
        effects``) at 3, any other statement (a copied passage, a rewrite) at 2."""
        query = re.search(r"^Query: (.*)$", user, re.MULTILINE)
        text = query.group(1).strip() if query else ""
        if text.endswith("?"):
            return _peaked(1)
        return _peaked(3 if re.fullmatch(r"\S+ has .+ effects\.?", text) else 2)

    @staticmethod
    def grade(system: str, user: str) -> TokenDistribution:
        query, document = grading_inputs(user)
        overlap = len(content_words(query) & content_words(document))
        return _peaked(min(3, overlap) if LENIENT_MARK in system else min(1, overlap))

    @staticmethod
    def annotate(system: str, inputs: dict[str, str]) -> dict[str, Any]:
        query = content_words(inputs.get("query", ""))
        docs = re.findall(r"\[doc_id (\d+)\] (.*?)(?=\n\n\[doc_id \d+\]|\Z)", inputs.get("candidates", ""), re.DOTALL)
        lenient = LENIENT_MARK in system
        labels = []
        for local, text in docs:
            overlap = len(query & content_words(text))
            score = (2 if lenient else 1) if overlap >= 2 else (1 if overlap else 0)
            labels.append({"doc_id": int(local), "score": score})
        return {"judgements": labels}


def _peaked(peak: int) -> TokenDistribution:
    """Digit-token probabilities peaked at ``peak``, falling off with distance; 2% on a token that is no digit."""
    weights = {str(k): (6.0 if k == peak else 1.0 / (1 + abs(k - peak))) for k in range(4)}
    total = sum(weights.values()) * 1.02
    return TokenDistribution({**{k: w / total for k, w in weights.items()}, "The": 0.02 / 1.02})


def scripted_lm(brain: SyntraBrain | None = None, **kwargs: Any) -> ScriptedLM:
    """A ``ScriptedLM`` answering with ``brain`` (a fresh ``SyntraBrain`` by default)."""
    return ScriptedLM(brain or SyntraBrain(), **kwargs)
