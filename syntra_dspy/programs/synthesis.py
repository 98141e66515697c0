"""The synthesis program: the four production steps and the instructions test mode adapts for them."""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import dspy

from syntra_dspy.copying import copy_guard_mark
from syntra_dspy.errors import BlueprintsIncomplete, LMOutputError, QueriesIncomplete
from syntra_dspy.languages import cjk_share, language_name, left_cjk_words
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.components import STEP_NAMES, ComponentState, ProgramComponents
from syntra_dspy.programs.compact_format import judged_as_recorded
from syntra_dspy.judging.grading import DigitLabelAdapter, Grade, ask_digit
from syntra_dspy.judging.judge import Candidate, RelevanceJudge
from syntra_dspy.judging.settings import DEFAULT_GRADE_ORDER, GradeOrder
from syntra_dspy.programs.narrowing import (
    blueprint_list_schema,
    identifier_list_schema,
    narrowed_outputs,
)
from syntra_dspy.programs.retry import (
    LAST_ANSWER_CHARS,  # noqa: F401 - re-exported
    answer_cut_off,
    call_with_repair,
    latest_answer,
)
from syntra_dspy.programs.step import Step
from syntra_dspy.programs.translation import QueryTranslator
from syntra_dspy.signatures import (
    Blueprint,
    CandidateLabel,
    ExtractIdentifiersAndAttributes,
    GradeCandidateRelevance,
    GradeCandidateRelevanceBriefly,
    JudgeCandidateRelevance,
    PlanQueryBlueprints,
    RewriteRejectedQuery,
    WriteQueriesFromBlueprints,
)
from syntra_dspy.query_form import QueryForm, question_as_claim, question_guard_mark, search_terms, shape
from syntra_dspy.programs.validation import (
    MAX_COPIED_WORDS,
    NEAR_DUPLICATE,
    Features,
    OutputRejected,
    QueriesRejected,
    QueryProblem,
    WriteTally,
    check_blueprints,
    check_labels,
    check_queries,
    clean_features,
    query_problem,
    repair_kind,
    without_copied_sentences,
    repair_note,
)

logger = logging.getLogger(__name__)

#: Rewrite calls a rejected query gets. Measured on the SciFact run's questions with the embedded 1.5B model
#: (experiments/rewrite_questions): 9 of 12 questions that a first rewrite had answered with pass once rewritten
#: again, so a second call rescues most of the blueprints a first one loses to form. Copied passages get one call:
#: in the run's log a second rewrite of a copy was a copy again (or a question) every time.
REWRITE_TRIES = 2
#: A query with at most this many Chinese/Japanese words left in it (each at most ``LEFT_WORD_CHARS`` characters)
#: has them translated one by one; one with more is rewritten whole.
MAX_LEFT_WORDS = 3
LEFT_WORD_CHARS = 8
#: A translated word longer than this many words is an explanation, not a translation.
MAX_TRANSLATED_WORDS = 6
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([?.,;:!)])")
T = TypeVar("T")

#: Steps added after artifacts were first committed: an older artifact lacks them and they derive from its components.
LATER_STEPS = frozenset({"grade"})


_LABEL = re.compile(r'"doc_id"\s*:\s*(\d+)\s*,\s*"score"\s*:\s*([0-3])')


def salvage_labels(text: str) -> list[CandidateLabel]:
    """Complete ``{"doc_id": n, "score": s}`` pairs from a truncated answer, the first per id."""
    seen: dict[int, int] = {}
    for doc_id, score in _LABEL.findall(text):
        seen.setdefault(int(doc_id), int(score))
    return [CandidateLabel(doc_id=d, score=s) for d, s in seen.items()]


def _base(signature: type[dspy.Signature]) -> str:
    return signature.instructions


def compose_instructions(state: ComponentState) -> dict[str, str]:
    """Full instruction text of every step, from the components (the only place instructions come from). Fixed
    text first, for prefix caching; a step with a whole-step instruction in the components sends that."""
    if state.task_definition is None:
        raise ValueError("a synthesis program needs a task definition before its instructions can be composed")
    task = "## Task\n" + ctx.task_context(state.task_definition)
    examples = "## Example queries for this task\n" + ctx.example_queries(state.examples)
    extract = _base(ExtractIdentifiersAndAttributes) + "\n\n" + task
    if state.idattr_guidance.strip():
        extract += "\n\n## Extraction guidance for this task\n" + state.idattr_guidance.strip()
    query_block = ""
    if state.query_instruction.strip():
        query_block = "\n\n## Query instruction for this task\n" + state.query_instruction.strip()
    plan = _base(PlanQueryBlueprints) + "\n\n" + task + "\n\n" + examples + query_block
    write = _base(WriteQueriesFromBlueprints) + "\n\n" + task + "\n\n" + examples + query_block
    annotation = state.annotation_instruction.strip() or ("## Task\n" + ctx.task_context(state.task_definition))
    annotate = annotation + "\n\n## Your answer\n" + _base(JudgeCandidateRelevance)
    # The graded judge always sees the task definition and the fixed 0-3 scale; compiled annotation text comes in
    # between as guidance, unless the components leave it out (``grade_guidance``). Measured on SciFact (1.5B): a
    # drafted instruction in place of the definition and the scale flattened E (AUC 0.69 on the few-shot candidates
    # against 0.78 for definition + scale).
    guidance = ("\n\n## Guidance for this task\n" + state.annotation_instruction.strip()
                if state.grade_guidance and state.annotation_instruction.strip() else "")
    grade = task + guidance + "\n\n## Your answer\n" + _base(GradeCandidateRelevance)
    if state.grade_prompt == "brief":  # ~half the instruction's tokens (experiments/judge_brief), never the guidance
        grade = ctx.brief_relevance(state.task_definition) + "\n" + _base(GradeCandidateRelevanceBriefly)
    composed = {"extract": extract, "plan": plan, "write": write, "annotate": annotate, "grade": grade}
    return {**composed, **state.step_instructions}


def step_adapter(name: str) -> dspy.Adapter:
    """How a step's prompt is formatted: JSON with a schema, except the one-digit grading call."""
    return DigitLabelAdapter() if name == "grade" else dspy.JSONAdapter()


def _guarded(field: str, document: str, words: int | None, questions: bool = False) -> dict[str, dict]:
    """The decoding guard marks for one output field: at most ``words`` copied words (production's ``--copy-guard
    N``; None: no copy guard), and no question where ``questions`` (``--question-guard``, for a task whose queries
    never are one)."""
    mark = {**(copy_guard_mark(document, min(words, MAX_COPIED_WORDS)) if words else {}),
            **(question_guard_mark() if questions else {})}
    return {field: mark} if mark else {}


class SynthesisProgram(dspy.Module):
    """Identifiers and attributes → blueprints → queries → relevance labels, driven by task-adapted instructions.

    Every public step validates the LM's answer in code and retries with a repair note; what still fails
    raises ``LMOutputError`` naming the stage, for the caller to record.
    """

    def __init__(self, state: ComponentState | None = None, *, max_retries: int = 2, max_doc_chars: int = 1500,
                 near_duplicate: float = NEAR_DUPLICATE) -> None:
        super().__init__()
        self.components = ProgramComponents(state)
        # Token budgets per step: generous for valid answers, short enough that a degenerate one is cut early.
        self.extract = Step(ExtractIdentifiersAndAttributes, max_tokens=600)
        self.plan = Step(PlanQueryBlueprints, max_tokens=900)
        self.write = Step(WriteQueriesFromBlueprints, max_tokens=700)
        self.annotate = Step(JudgeCandidateRelevance, max_tokens=600)
        self.grade = Step(GradeCandidateRelevance, max_tokens=1)
        self.max_retries = max_retries
        self.max_doc_chars = max_doc_chars
        self.near_duplicate = near_duplicate  # token-set Jaccard above which two queries of a document are one
        if state is not None and state.task_definition is not None:
            self._apply_instructions()

    # -- state -------------------------------------------------------------------------------------------
    @property
    def state(self) -> ComponentState:
        return self.components.state

    @property
    def grade_order(self) -> GradeOrder:
        """Which of query and document the grading prompt shows first: the calibration's order (its cut points hold
        for grades made in it), the compile's order where there is no calibration yet."""
        judge = self.state.judge
        return judge.grade_order if judge is not None else DEFAULT_GRADE_ORDER

    def with_components(self, **changes: Any) -> "SynthesisProgram":
        """A copy with some components replaced and every instruction recomposed (the only way to adapt)."""
        clone = self.deepcopy()
        clone.components.state = self.state.model_copy(update=changes)
        clone._apply_instructions()
        return clone

    def _apply_instructions(self) -> None:
        for name, text in compose_instructions(self.state).items():
            step: Step = getattr(self, name)
            step.signature = step.signature.with_instructions(text)

    def load_state(self, state: dict[str, Any], **kwargs: Any) -> None:
        """DSPy's load, also for program.json files saved before the ``grade`` step existed: that step's
        instruction is then composed from the saved annotation instruction, as a fresh compile would."""
        if "grade" in state or "annotate" not in state:  # "grade" is the one LATER_STEPS entry
            return super().load_state(state, **kwargs)
        super().load_state({**state, "grade": self.grade.dump_state()}, **kwargs)
        if self.state.task_definition is not None:
            self.grade.signature = self.grade.signature.with_instructions(compose_instructions(self.state)["grade"])
        return None

    def instructions(self) -> dict[str, str]:
        return {name: getattr(self, name).signature.instructions for name in STEP_NAMES}

    def freeze(self) -> "SynthesisProgram":
        for name in STEP_NAMES:
            getattr(self, name).freeze()
        object.__setattr__(self, "_frozen", True)
        return self

    @property
    def frozen(self) -> bool:
        return self.__dict__.get("_frozen", False)

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("_frozen", False) and name in (*STEP_NAMES, "components"):
            from syntra_dspy.errors import FrozenProgramError

            raise FrozenProgramError(f"cannot replace '{name}' of a program loaded from an artifact")
        super().__setattr__(name, value)

    def __deepcopy__(self, memo: dict) -> "SynthesisProgram":
        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key != "_frozen":
                clone.__dict__[key] = copy.deepcopy(value, memo)
        return clone

    # -- validated steps ---------------------------------------------------------------------------------
    def _retrying(self, stage: str, call: Callable[[str, dict], T], retries: int | None = None) -> T:
        """Call, validate, and on a rejected answer call again with a repair note (:func:`call_with_repair`), at
        most ``retries`` times (default: the program's ``max_retries``)."""
        return call_with_repair(stage, call, max_retries=self.max_retries if retries is None else retries)

    def extract_features(self, document: str, *, max_identifiers: int | None = None) -> Features:
        """The document's identifiers and attribute dimensions. ``max_identifiers`` (production's
        ``--max-identifiers``) keeps the first that many; an engine that narrows schemas is held to them while it
        decodes (the prompt is the artifact's), since a long list costs generated tokens that the few blueprints a
        document gets never use."""
        doc = ctx.clip(document, self.max_doc_chars)
        narrowing = {"identifiers": identifier_list_schema(max_identifiers)} if max_identifiers else {}

        def call(note: str, config: dict) -> Features:
            with narrowed_outputs(narrowing):
                pred = self.extract(document=doc, retry_note=note, config=config)
            identifiers, attributes = list(pred.identifiers or []), list(pred.attributes or [])
            if answer_cut_off():
                # Cut at the token limit: the last item of the list written last may be cut mid-word (the JSON
                # repair closed it); drop it rather than plan queries around a fragment.
                text = latest_answer() or ""
                if attributes and text.rfind('"attributes"') > text.rfind('"identifiers"'):
                    attributes = attributes[:-1]
                elif identifiers:
                    identifiers = identifiers[:-1]
            features = clean_features(identifiers, attributes, query_language=self.query_language())
            if max_identifiers and len(features.identifiers) > max_identifiers:  # a route that sent no bound
                features = Features(features.identifiers[:max_identifiers], features.attributes)
            return features

        return self._retrying("extract", call)

    def plan_blueprints(
        self, document: str, features: Features, count: int, already: Sequence[Blueprint] = (), *,
        retries: int | None = None,
    ) -> list[Blueprint]:
        """Exactly ``count`` valid, non-repeating blueprints (fewer only if the combinations run out).

        ``retries`` (default: the program's ``max_retries``) bounds the repair calls. When the valid blueprints stay
        too few, ``BlueprintsIncomplete`` carries those the planner did get right. A backend that enforces JSON
        schemas decodes the answer from this document's lists (:mod:`syntra_dspy.programs.narrowing`); the prompt
        is the artifact's either way."""
        doc = ctx.clip(document, self.max_doc_chars)
        limit = len(features.identifiers)
        for dim in features.attributes:
            limit *= len(dim.options)
        count = min(count, limit - len(already))
        kept: list[Blueprint] = []

        def call(note: str, config: dict) -> list[Blueprint]:
            need = count - len(kept)
            used = [*already, *kept]
            with narrowed_outputs({"blueprints": blueprint_list_schema(features, need)}):
                pred = self.plan(
                    document=doc,
                    identifiers=ctx.identifiers_text(features.identifiers),
                    attributes=ctx.attributes_text(features.attributes),
                    count=need,
                    already_used=ctx.blueprints_text(used) if used else "",
                    retry_note=note,
                    config={**config, "max_tokens": 80 + 160 * need},
                )
            good, problems = check_blueprints(pred.blueprints or [], features, already=used)
            kept.extend(good[:need])
            if len(kept) < count:
                detail = "; ".join(problems[:4]) or f"only {len(good)} blueprints given"
                raise OutputRejected(f"{count - len(kept)} more blueprints needed ({detail})")
            return kept

        if count <= 0:
            return []
        try:
            return self._retrying("plan", call, retries)
        except LMOutputError as exc:
            raise BlueprintsIncomplete(exc.message, kept=list(kept), stage="plan",
                                       last_answer=exc.last_answer) from None

    def write_queries(
        self, document: str, blueprints: Sequence[Blueprint], *, avoid: Sequence[str] = (),
        tally: WriteTally | None = None, rewrite: bool = True, hide_copied: bool = False,
        copy_guard: int | None = None, question_guard: bool = False,
    ) -> list[str]:
        """One query per blueprint, in the blueprints' order, each in the examples' form and unlike the others.

        A rejected answer keeps its valid queries: the retry shows only the blueprints still missing. When some
        stay missing after every try, ``QueriesIncomplete`` carries the valid ones. ``tally`` (optional) counts
        every query text checked and those of another form or length than the examples. ``rewrite``: a query rejected
        for a problem one short call can fix (a question where the examples are claims, a copied passage) is
        rewritten and kept (production); compile trials turn it off, so an instruction is judged on what the writer
        itself wrote. ``hide_copied``: a write call after an answer that copied the document shows the document
        without the sentences copied (:func:`without_copied_sentences`); the copy check still reads all of it.
        ``copy_guard`` (N): an engine that narrows schemas decodes the write and rewrite answers without repeating
        more than N (at most ``MAX_COPIED_WORDS``) consecutive words of the document
        (:class:`~syntra_dspy.copying.CopyGuard`; greedy calls only: the first write call and the rewrites, not the
        sampled retries). ``question_guard``: the rewrites decode no question where the examples are never
        questions (:class:`~syntra_dspy.query_form.QuestionGuard`); nothing for a task whose queries are. Not the
        write calls: kept from asking, the embedded 1.5B writer copies the document's sentences instead (7 of 8
        guarded first answers on two SciFact documents), and a copy is harder to repair than a question."""
        doc = ctx.clip(document, self.max_doc_chars)
        lang = self.query_language()
        form = self.query_form()
        no_questions = question_guard and form is not None and form.restates_questions
        kept: dict[int, str] = {}
        rule = self.query_rule()
        copied: list[str] = []

        def call(note: str, config: dict) -> list[str]:
            numbers = [n for n in range(len(blueprints)) if n not in kept]
            asked = [blueprints[n] for n in numbers]
            shown = without_copied_sentences(doc, copied, MAX_COPIED_WORDS) if hide_copied and copied else doc
            with narrowed_outputs({}, _guarded("queries", doc, copy_guard)):
                pred = self.write(
                    document=shown,
                    blueprints=ctx.blueprints_text(asked, numbers),
                    language=rule,
                    retry_note=note,
                    config={**config, "max_tokens": 60 + 120 * len(asked)},
                )
            written = pred.queries or []
            if written and answer_cut_off():
                # Cut at the token limit: the JSON repair closed the last query mid-sentence. Drop it; its
                # blueprint is asked again like any missing one.
                logger.info("write answer cut at the token limit; its last query %r is dropped", written[-1].query)
                written = written[:-1]
            try:
                found = check_queries(written, asked, language=lang, avoid=[*avoid, *kept.values()], document=doc,
                                      numbers=numbers, form=form, near_duplicate=self.near_duplicate)
            except QueriesRejected as exc:
                if tally is not None:
                    tally.add(exc.checked, exc.off_form, str(exc))
                    for slot, outcome in exc.outcomes.items():
                        tally.check(slot, "write", outcome)
                kept.update(exc.kept)
                copied.extend(query for slot, (query, _) in exc.repairs.items() if exc.outcomes.get(slot) == "copy")
                for slot, (query, fix) in (exc.repairs.items() if rewrite else ()):
                    rewritten = self._rewrite(query, fix, lang=lang, document=doc, form=form,
                                              earlier=[*avoid, *kept.values()], copy_guard=copy_guard,
                                              question_guard=no_questions,
                                              checked=partial(tally.check, slot) if tally is not None else None)
                    if rewritten is not None:
                        kept[slot] = rewritten
                        if tally is not None:
                            tally.restated[slot] = query
                if all(n in kept for n in numbers):
                    return [kept[n] for n in range(len(blueprints))]
                if not kept:
                    raise
                done = ", ".join(map(str, sorted(kept)))
                raise OutputRejected(f"{exc}. The queries for blueprint {done} are accepted: write only the "
                                     "queries for the blueprints listed now") from None
            if tally is not None:
                tally.add(len(written))
                for slot in numbers:
                    tally.check(slot, "write", "kept")
            kept.update(zip(numbers, found))
            return [kept[n] for n in range(len(blueprints))]

        try:
            return self._retrying("write", call)
        except LMOutputError as exc:
            if not kept:
                raise
            raise QueriesIncomplete(exc.message, kept=dict(kept), stage="write", last_answer=exc.last_answer) from None

    def _rewrite(self, query: str, fix: str, *, lang: str, document: str, form: QueryForm | None,
                 earlier: Sequence[str], checked: Callable[[str, str], None] | None = None,
                 copy_guard: int | None = None, question_guard: bool = False) -> str | None:
        """A rejected query rewritten by a short call to fix what was wrong (a question where the task's queries
        are claims; a passage copied from the document), or None when every rewrite breaks a rule too. A small writer
        often repeats such a mistake however often it is told, yet rewrites one query readily; a whole new write
        call costs ten times as much. A rewrite that still has the wrong form is rewritten once more, with its own
        problem (``REWRITE_TRIES``). Fixes that need no rewrite come first, for the query and for every rewrite
        (:meth:`_fixed_in_code`): a question restated in code where that is safe, and the few Chinese words a
        cross-language writer left in an English query translated one by one. ``checked(step, outcome)`` is told
        what became of each try (:attr:`WriteTally.checks`). ``copy_guard``, ``question_guard``: as
        :meth:`write_queries` (the caller has checked that the task's queries are never questions)."""
        checks = {"lang": lang, "document": document, "form": form, "earlier": earlier}
        checked = checked or (lambda step, outcome: None)
        fixed, text = self._fixed_in_code(query, **checks)
        if fixed is not None:
            checked("code", "kept")
            return fixed
        if text != query:  # its words are translated now; what is left is another problem, for the rewrite
            problem = self._problem(text, **checks)
            kind = repair_kind(problem) if problem is not None else None
            if kind is None:
                return None
            query, fix = text, repair_note(kind, text, document, MAX_COPIED_WORDS, form, lang)
        for _ in range(REWRITE_TRIES):
            try:
                with narrowed_outputs({}, _guarded("rewritten", document, copy_guard, question_guard)):
                    pred = dspy.Predict(RewriteRejectedQuery)(query=query, problem=fix, form=self.rewrite_form(),
                                                               config={"max_tokens": 120})
            except (ValueError, dspy.utils.exceptions.AdapterParseError) as exc:
                logger.info("rewriting %r failed: %s", query, exc)
                checked("rewrite", "unparsed")
                return None
            text = " ".join(str(pred.rewritten or "").split()).strip().strip('"').strip()
            if answer_cut_off():  # a rewrite that ran to the token limit is a passage, and what is left is cut
                logger.info("rewriting %r: the answer was cut at the token limit", query)
                checked("rewrite", "cut")
                return None
            problem = self._problem(text, **checks)
            if problem is None:
                checked("rewrite", "kept")
                return text
            checked("rewrite", problem.kind)
            fixed, translated = self._fixed_in_code(text, **checks)
            if fixed is not None:
                checked("code", "kept")
                return fixed
            if translated != text:
                text = translated
                problem = self._problem(text, **checks) or problem
            why, off_form, _ = problem
            logger.info("rewritten query %r rejected: %s", text, why)
            if not text or text == query or not off_form:
                # Only a rewrite of the wrong form (a question again) is rewritten again: that is what a second
                # call fixes; a passage copied again stays copied (SciFact run: every second try failed).
                return None
            query, fix = text, why
        return None

    def _problem(self, text: str, *, lang: str, document: str, form: QueryForm | None,
                 earlier: Sequence[str]) -> QueryProblem | None:
        """What is wrong with one query, with this program's near-duplicate threshold (:func:`query_problem`)."""
        return query_problem(text, language=lang, document=document, form=form, earlier=earlier,
                             near_duplicate=self.near_duplicate)

    def _fixed_in_code(self, query: str, *, lang: str, document: str, form: QueryForm | None,
                       earlier: Sequence[str]) -> tuple[str | None, str]:
        """(the query fixed without a rewrite call, or None; the query with its left Chinese words translated, or
        as it was). A question is restated (:meth:`_question_restated`); an English query holding a few Chinese
        words ("sources of PM10 in厦门") gets them translated (:meth:`_left_words_translated`), then is kept if it
        passes every check, or restated if it is a question. Rewriting such a query whole does not work: in the
        CSL run the 1.5B writer copied the word into every rewrite (5 of 5 for one document's query)."""
        checks = {"lang": lang, "document": document, "form": form, "earlier": earlier}
        restated = self._question_restated(query, lang=lang, document=document, form=form, earlier=earlier)
        if restated is not None:
            return restated, query
        translated = self._left_words_translated(query, lang)
        if translated is None:
            return None, query
        if self._problem(translated, **checks) is None:
            logger.info("query %r kept with its Chinese words translated: %r", query, translated)
            return translated, translated
        restated = self._question_restated(translated, lang=lang, document=document, form=form, earlier=earlier)
        return restated, translated

    def _left_words_translated(self, query: str, lang: str) -> str | None:
        """``query`` with the Chinese/Japanese words left in it translated into ``lang`` one at a time, or None.

        Each word gets a short ``TranslateSearchText`` call, and its translation one back into the documents'
        language; the translation is kept only when the way back shares at least half of the word's characters.
        Out of context the 1.5B model mistranslates some words, names most of all (厦门 -> "Shanghai" -> 上海;
        肿块 -> "Bulge" -> 膨脹: both refused), and a query naming the wrong place is worse than no query. None also
        when the task's queries are in such a language, the query holds none of them, too many or too long ones,
        or is mostly made of them (then it is untranslated: it is rewritten whole)."""
        words = left_cjk_words(query, lang)
        if (not words or len(words) > MAX_LEFT_WORDS or max(map(len, words)) > LEFT_WORD_CHARS
                or cjk_share(query) > 0.5):
            return None
        definition = self.state.task_definition
        back_lang = definition.document_language if definition is not None else "zh"
        if back_lang == lang:
            back_lang = "zh"
        forth = QueryTranslator(lang, max_retries=1, max_tokens=24)
        back = QueryTranslator(back_lang, max_retries=1, max_tokens=24)
        text = query
        for word in sorted(words, key=len, reverse=True):  # a word inside a longer one is not cut out of it
            try:
                term = forth(word)
                again = back(term) if len(term.split()) <= MAX_TRANSLATED_WORDS else ""
            except LMOutputError as exc:
                logger.info("translating %r of query %r failed: %s", word, query, exc.message)
                return None
            if sum(ch in again for ch in set(word)) * 2 < len(set(word)):
                logger.info("translation %r of %r in query %r refused: it translates back as %r", term, word,
                            query, again)
                return None
            text = text.replace(word, f" {term} ")
        return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(text.split()))

    def _question_restated(self, query: str, *, lang: str, document: str, form: QueryForm | None,
                           earlier: Sequence[str]) -> str | None:
        """A question restated in the task's form in code, when the cut passes every check; None otherwise: plain
        search terms for tasks whose queries are such terms (:func:`search_terms`), the claim a yes/no question
        asks about for tasks whose queries are claims or statements (:func:`question_as_claim`)."""
        if form is None or shape(query) != "question":
            return None
        if form.kind == "plain":
            restated, as_what = search_terms(query), "the search terms"
        elif form.kind in ("claim", "statement"):
            restated, as_what = question_as_claim(query), "the claim"
        else:
            return None
        if restated is None or self._problem(restated, lang=lang, document=document, form=form,
                                             earlier=earlier) is not None:
            return None
        logger.info("question %r kept as %s %r", query, as_what, restated)
        return restated

    def query_form(self) -> QueryForm | None:
        """The form written queries must have, read off the task's example queries (None without examples)."""
        return QueryForm.from_examples([ex.query for ex in self.state.examples])

    def query_language(self) -> str:
        """The language queries are written in (the task definition's; English without one)."""
        return self.state.task_definition.query_language if self.state.task_definition else "en"

    def query_rule(self) -> str:
        """The language and the examples' form, as the write step states them in the call itself: a small writer
        follows a rule next to its answer that it ignores in the fixed instruction (see ``QueryForm.rule``)."""
        form = self.query_form()
        return f"Write every query in {language_name(self.query_language())}" + \
            (f", {form.rule()}." if form is not None else ".")

    def rewrite_form(self) -> str:
        """What a rewrite of a rejected query is told about the form: the write step's rule and the examples."""
        examples = "\n".join(f"- {ex.query}" for ex in self.state.examples)
        return f"{self.query_rule()}\nExample queries:\n{examples}"

    def label_candidates(self, query: str, candidates: Sequence[str]) -> list[int]:
        """One 0-3 score per candidate text, in the order given (local ids are positions)."""
        shown = ctx.candidates_text(candidates, self.max_doc_chars)

        def call(note: str, config: dict) -> list[int]:
            # The token budget grows with the candidates: a model looping inside the list is cut early, and
            # the labels it completed before the loop are recovered from the raw text.
            try:
                with judged_as_recorded():
                    pred = self.annotate(query=query, candidates=shown, retry_note=note,
                                         config={**config, "max_tokens": 40 + 30 * len(candidates)})
                judgements = pred.judgements or []
            except dspy.utils.exceptions.AdapterParseError as exc:
                judgements = salvage_labels(exc.lm_response or "")
                if not judgements:
                    raise
            return check_labels(judgements, len(candidates))

        return self._retrying("annotate", call)

    def label_all(self, query: str, candidates: Sequence[str], *, chunk_size: int) -> list[int | None]:
        """Every candidate of a query labelled 0-3 by the annotate step, ``chunk_size`` per call; a chunk whose
        answer stays unusable after its retries gives ``None``s (the one labelling loop: trials, GEPA and
        calibration all call it)."""
        judge = RelevanceJudge(self, mode="written", chunk_size=chunk_size)
        judged = judge.judge_all(query, [Candidate(text) for text in candidates])
        return [None if j is None else j.label for j in judged]

    def grade_candidate(self, query: str, document: str, *, logprobs: bool = True,
                        order: GradeOrder = DEFAULT_GRADE_ORDER) -> Grade:
        """One candidate judged with a one-digit answer; ``logprobs`` asks for the label tokens' probabilities;
        ``order``: which of the two the prompt shows first (:data:`~syntra_dspy.judging.settings.GradeOrder`).

        An answer with neither a label digit nor usable probabilities is retried (sampled) like any step."""
        doc = ctx.clip(document, self.max_doc_chars)
        fields = ("document", "query") if order == "document-first" else None

        def call(note: str, config: dict) -> Grade:
            grade = ask_digit(self.grade, logprobs=logprobs, config=config, order=fields, query=query, document=doc)
            if grade.probs is None and grade.written is None:
                raise OutputRejected("the answer is not a label digit 0-3")
            return grade

        return self._retrying("annotate", call)

    def forward(self, document: str, count: int = 2) -> dspy.Prediction:
        """Document → features, blueprints and queries (annotation needs a retriever, so it is separate)."""
        features = self.extract_features(document)
        blueprints = self.plan_blueprints(document, features, count)
        queries = self.write_queries(document, blueprints)
        return dspy.Prediction(features=features, blueprints=blueprints, queries=queries)
