"""SYNTRA's test mode: each instruction is adapted by its own generate → evaluate → refine loop."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from typing import Any

import dspy
from dspy.teleprompt import Teleprompter

from dspy.utils.exceptions import AdapterParseError

from syntra_dspy.candidates import with_lexical
from syntra_dspy.errors import ConfigError, LMOutputError
from syntra_dspy.optimizers import judge_stage as js
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.annotation_check import annotation_check
from syntra_dspy.optimizers.calibration import LabelledPair, calibration_check, run_calibration, with_texts
from syntra_dspy.optimizers.definition_check import example_specific_terms
from syntra_dspy.optimizers.loop import RefinementLoop, Reviewer, unevaluated
from syntra_dspy.optimizers.query_measures import measure_problems, measure_queries
from syntra_dspy.optimizers.query_rating import QueryRater
from syntra_dspy.optimizers.report import CompileReport, Evaluation, LoopReport
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.authoring import ROLE_OF, InstructionAuthor
from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.programs.judge_calibration import fit_calibration
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.query_form import tokens as query_tokens
from syntra_dspy.retrieval import LexicalSourceRank
from syntra_dspy.task import TaskDefinition

logger = logging.getLogger(__name__)

LOOPS = ("task_definition", "idattr", "query_instruction", "annotation_instruction")
_FENCE = re.compile(r"^```[a-zA-Z]*\n?|\n?```$")


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
    text = _FENCE.sub("", (text or "").strip()).strip()
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


def _score(value: Any) -> int:
    try:
        return max(0, min(3, int(value)))
    except (TypeError, ValueError):
        return 0


class SelfImprove(Teleprompter):
    """Adapts the task definition (when inferred), the extraction guidance, the query instruction and the
    annotation instruction of a ``SynthesisProgram``, each by its own loop, and records every attempt.

    LLM verifiers score identifier/attribute and query trials 0-3 (pass at ``pass_threshold``); the annotation
    loop passes when every few-shot positive is labelled positive among its retrieved candidates, or, when
    a ``calibration`` set of human-confirmed labels is given, when every confirmed label is matched.
    ``review`` is handed to every loop (see ``RefinementLoop``): the hook human calibration uses.
    """

    strategy = "self-improve"

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: InstructionAuthor | None = None, review: Reviewer | None = None,
                 calibration: Sequence[LabelledPair] | None = None) -> None:
        super().__init__()
        self.settings = settings or CompileSettings()
        self.lms = lms
        self.meter = meter
        self.author = author or InstructionAuthor()
        self.review = review
        self.calibration = tuple(calibration) if calibration else None
        self.report: CompileReport | None = None

    # -- the Teleprompter contract -----------------------------------------------------------------------
    def compile(self, student: SynthesisProgram, *, trainset: Sequence[FewShotPair], teacher: Any = None,
                valset: Any = None, documents: Sequence[tr.TrialDocument] = (),
                candidates: tr.CandidateSource | None = None) -> SynthesisProgram:
        """Compile ``student``; the report of every loop is left in ``self.report`` (``run`` returns both)."""
        if teacher is not None or valset is not None:
            raise ConfigError("SYNTRA's test mode takes no teacher and no valset: trials run on sampled corpus "
                              "documents and the few-shot examples (trainset)")
        program, self.report = self.run(student, trainset=trainset, documents=documents, candidates=candidates)
        return program

    def get_params(self) -> dict[str, Any]:
        return {"strategy": self.strategy, **self.settings.model_dump()}

    def compile_record(self) -> dict[str, Any]:
        """What the last compile's record adds about itself beyond history and usage (e.g. who reviewed it); it
        is no part of the program id."""
        return {}

    def run(self, student: SynthesisProgram, *, trainset: Sequence[FewShotPair],
            documents: Sequence[tr.TrialDocument], candidates: tr.CandidateSource | None
            ) -> tuple[SynthesisProgram, CompileReport]:
        """Compile and return the program together with a separate report of every loop."""
        if not trainset:
            raise ConfigError("test mode needs the task's few-shot examples")
        if candidates is None:
            raise ConfigError("test mode needs a candidate source for the annotation check")
        started = time.perf_counter()
        examples = tuple(trainset)
        loops: list[LoopReport] = []
        definition = student.state.task_definition
        if definition is None:
            definition, report = self.adapt_task_definition(examples)
            loops.append(report)
        program = SynthesisProgram(
            student.state.model_copy(update={"task_definition": definition, "examples": examples}),
            max_retries=student.max_retries, max_doc_chars=self.settings.max_doc_chars,
            near_duplicate=self.settings.near_duplicate,
        )
        program, features, report = self.adapt_extraction(program, documents)
        loops.append(report)
        program, report = self.adapt_query_instruction(program, features, candidates)
        loops.append(report)
        program, report = self.adapt_annotation_instruction(program, candidates)
        loops.append(report)
        total = self.meter.snapshot() if self.meter is not None else {}
        return program, CompileReport(self.strategy, self.get_params(), tuple(loops), total,
                                      time.perf_counter() - started)

    # -- helpers -----------------------------------------------------------------------------------------
    def _call(self, name: str, *, sample: int = 0, **inputs: Any) -> dspy.Prediction:
        """Run one authoring predictor on its role's LM; an unparsable answer is retried once, resampled.

        ``sample > 0`` asks for a sampled answer (temperature 0.7, a distinct rollout) instead of the greedy one.
        """
        lm = getattr(self.lms, ROLE_OF[name])
        predictor = getattr(self.author, name)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            for rollout in (sample, sample + 1):
                config = {"temperature": 0.7, "rollout_id": rollout} if rollout else {}
                try:
                    return predictor(**inputs, config=config)
                except (AdapterParseError, ValueError) as exc:
                    error = exc
                    logger.warning("%s: unusable answer (%s)", name, str(exc)[:200])
        raise LMOutputError(f"no usable answer after 2 tries: {str(error)[:300]}", stage=name)

    def _revise(self, name: str, field: str, current: str, **inputs: Any) -> str:
        """A refiner's rewrite of ``current``; an unchanged answer is resampled once, since at temperature 0
        the loop would otherwise evaluate the very same text again."""
        text = clean_text(getattr(self._call(name, **inputs), field))
        if " ".join(text.split()) == " ".join(current.split()):
            logger.info("%s returned the text unchanged; sampling another revision", name)
            text = clean_text(getattr(self._call(name, sample=2, **inputs), field))
        return text or current

    def _generating(self, fn, *args, **kwargs):
        with dspy.context(lm=self.lms.generator, adapter=dspy.JSONAdapter()):
            return fn(*args, **kwargs)

    def _loop(self, name: str, **kw: Any) -> RefinementLoop:
        s = self.settings
        return RefinementLoop(name, max_attempts=s.max_attempts, keep=s.keep, meter=self.meter,
                              review=self.review, **kw)

    def _stage(self, name: str):
        from contextlib import nullcontext

        return self.meter.stage(name) if self.meter is not None else nullcontext()

    # -- loop 0: task definition ---------------------------------------------------------------------------
    def infer_task_definition(self, examples: Sequence[FewShotPair]) -> TaskDefinition:
        pred = self._call("infer_task", examples=ctx.example_pairs(examples))
        return _definition_from(pred)

    def adapt_task_definition(self, examples: Sequence[FewShotPair]) -> tuple[TaskDefinition, LoopReport]:
        pairs = ctx.example_pairs(examples)
        with self._stage("task_definition"):
            initial = self.infer_task_definition(examples)

        def evaluate(definition: TaskDefinition, _: Any) -> Evaluation:
            pred = self._call("judge_task", examples=pairs, task_definition=ctx.task_definition_text(definition))
            score = _score(pred.score)
            feedback = clean_text(pred.feedback)
            specific = example_specific_terms(definition, examples)
            if specific:
                # A definition copied from one example is caught in code: small verifiers miss it.
                score = min(score, 1)
                feedback = (f"The definition names terms that belong to a single example ({', '.join(specific)}); "
                            "state the criterion so that it fits every example. " + feedback).strip()
            return Evaluation(score, score >= self.settings.pass_threshold, feedback, {"example_specific": specific})

        def refine(definition: TaskDefinition, _: Any, ev: Evaluation) -> TaskDefinition:
            inputs = {"examples": pairs, "task_definition": ctx.task_definition_text(definition),
                      "feedback": ev.feedback}
            for sample in (0, 2):  # an unchanged definition is resampled once, as for instructions
                try:
                    revised = _definition_from(self._call("refine_task", sample=sample, **inputs))
                except ValueError:
                    continue
                if revised != definition:
                    return revised
            return definition

        loop = self._loop("task_definition", generate=lambda d: None, evaluate=evaluate, refine=refine,
                          describe=ctx.task_definition_text, threshold=self.settings.pass_threshold)
        definition, _, report = loop.run(initial)
        return definition, report

    # -- loop 1: identifiers and attributes ------------------------------------------------------------------
    def adapt_extraction(self, program: SynthesisProgram, documents: Sequence[tr.TrialDocument]
                         ) -> tuple[SynthesisProgram, list[tr.FeatureTrial], LoopReport]:
        task = ctx.task_context(program.state.task_definition)

        def generate(guidance: str) -> list[tr.FeatureTrial]:
            return self._generating(tr.run_extraction, program.with_components(idattr_guidance=guidance), documents)

        def evaluate(_: str, trials: list[tr.FeatureTrial]) -> Evaluation:
            failed = sum(t.features is None for t in trials)
            if failed == len(trials):
                return Evaluation(0, False, "No document produced a valid extraction: give identifiers copied from "
                                  "the document and attribute dimensions with 2-4 options each.", {"failed": failed})
            pred = self._call("judge_idattr", task_context=task,
                              samples=tr.features_samples(trials, with_documents=True))
            score = _score(pred.score)
            return Evaluation(score, score >= self.settings.pass_threshold, clean_text(pred.feedback),
                              {"failed": failed})

        def refine(guidance: str, trials: list[tr.FeatureTrial], ev: Evaluation) -> str:
            return self._revise("refine_guidance", "guidance", guidance, task_context=task,
                                current_guidance=guidance, feedback=ev.feedback,
                                samples=tr.features_samples(trials, with_documents=False))

        if not self.evaluates:
            return program, [], unevaluated("idattr", program.state.idattr_guidance)
        guidance, trials, report = self._loop("idattr", generate=generate, evaluate=evaluate, refine=refine,
                                              threshold=self.settings.pass_threshold).run(program.state.idattr_guidance)
        return program.with_components(idattr_guidance=guidance), trials, report

    # -- loop 2: the query instruction --------------------------------------------------------------------------
    def draft_query_instruction(self, program: SynthesisProgram) -> str:
        task = ctx.task_context(program.state.task_definition)
        golden = ctx.example_queries(program.state.examples)
        role = clean_text(self._call("draft_role", task_context=task, example_queries=golden).role_and_process)
        style = clean_text(self._call("draft_style", task_context=task, example_queries=golden).style_guide)
        return f"{role}\n\n{style}".strip()

    def adapt_query_instruction(self, program: SynthesisProgram, features: list[tr.FeatureTrial],
                                candidates: tr.CandidateSource | None = None) -> tuple[SynthesisProgram, LoopReport]:
        """The query loop. An attempt passes when the verifier passes it and, measured in code on its trial queries,
        the writer kept the examples' form and at most ``bm25_top1_target`` of the queries find their own source
        document first under BM25 (only measured when ``candidates`` has a corpus)."""
        s = self.settings
        task = ctx.task_context(program.state.task_definition)
        golden = ctx.example_queries(program.state.examples)
        with self._stage("query_instruction"):
            initial = program.state.query_instruction or self.draft_query_instruction(program)
        if not self.evaluates:
            return program.with_components(query_instruction=initial), unevaluated("query_instruction", initial)
        lexical = self.lexical_ranker(program, candidates)
        form = program.query_form()

        def generate(instruction: str) -> list[tr.QueryTrial]:
            return self._generating(tr.run_queries, program.with_components(query_instruction=instruction),
                                    features, s.queries_per_doc)

        def evaluate(instruction: str, trials: list[tr.QueryTrial]) -> Evaluation:
            measures = measure_queries(trials, candidates=candidates, lexical=lexical)
            problems = measure_problems(measures, form, bm25_target=s.bm25_top1_target, form_target=s.form_target)
            details = {"queries": [q for t in trials for q in t.queries],
                       "failed_docs": sum(bool(t.error) for t in trials), "measures": measures.to_dict(),
                       "form": form.to_dict() if form else None}
            if measures.queries == 0:
                return Evaluation(0, False, " ".join(["No valid queries were produced.", *problems,
                                                      "Make the instruction simpler and state the required output "
                                                      "plainly."]), details)
            pred = self._call("judge_queries", task_context=task, golden_queries=golden,
                              query_instruction=instruction,
                              pairs=tr.query_pairs(trials, limit=s.judge_pairs, seed=s.seed))
            written = _score(pred.score)
            verdict: float = written
            rated = ""
            if s.query_verifier == "graded":
                ratings = self.query_rater().rate(golden, trials)
                details = {**details, "verifier_written": written, "ratings": ratings.to_dict()}
                if ratings.mean is not None:
                    verdict = round(ratings.mean, 4)
                    rated = ratings.feedback(s.pass_threshold)
            # A measured miss fails the attempt whatever the verifier says, and caps its score below the pass mark,
            # so keep="best" prefers an attempt that met every target (a graded score is scaled into the range
            # below the mark, so failed attempts still differ).
            cap = max(0, s.pass_threshold - 1)
            if not problems:
                score = verdict
            elif s.query_verifier == "graded":
                score = round(verdict * cap / 3, 4)
            else:
                score = min(verdict, cap)
            feedback = " ".join(part for part in [*problems, rated, clean_text(pred.feedback)] if part).strip()
            return Evaluation(score, verdict >= s.pass_threshold and not problems, feedback,
                              {**details, "verifier_score": verdict})

        def refine(instruction: str, trials: list[tr.QueryTrial], ev: Evaluation) -> str:
            return self._revise("refine_query", "instruction", instruction, task_context=task,
                                golden_queries=golden, current_instruction=instruction, feedback=ev.feedback,
                                pairs=tr.query_pairs(trials, limit=s.refine_pairs, seed=s.seed + 1))

        instruction, _, report = self._loop("query_instruction", generate=generate, evaluate=evaluate,
                                            refine=refine, threshold=s.pass_threshold).run(initial)
        return program.with_components(query_instruction=instruction), report

    def query_rater(self) -> QueryRater:
        """The graded query verifier, one per compile (a backend's refusal of log probabilities is noted once)."""
        rater = getattr(self, "_rater", None)
        if rater is None:
            rater = self._rater = QueryRater(self.author.rate_query, self.lms.verifier)
        return rater

    def lexical_ranker(self, program: SynthesisProgram, candidates: tr.CandidateSource | None
                       ) -> LexicalSourceRank | None:
        """BM25 over the candidate source's corpus, built once per compile: the query loop's difficulty measure and
        the hybrid judge's lexical witness (None: no corpus, or no BM25 tokeniser for the document language)."""
        corpus = getattr(candidates, "corpus", None)
        if corpus is None:
            return None
        cached = getattr(self, "_lexical", None)
        if cached is not None and cached[0] is corpus:
            return cached[1]
        try:
            ranker = LexicalSourceRank(corpus, language=program.state.task_definition.document_language)
        except ConfigError as exc:
            logger.info("no BM25 over the corpus: %s", exc)
            ranker = None
        self._lexical = (corpus, ranker)
        return ranker

    # -- loop 3: the annotation instruction ----------------------------------------------------------------------
    def draft_annotation_instruction(self, program: SynthesisProgram) -> str:
        task = ctx.task_context(program.state.task_definition)
        return clean_text(self._call("draft_annotation", task_context=task).instruction)

    def adapt_annotation_instruction(self, program: SynthesisProgram, candidates: tr.CandidateSource
                                     ) -> tuple[SynthesisProgram, LoopReport]:
        s = self.settings
        task = ctx.task_context(program.state.task_definition)
        if self.evaluates and s.judge == "graded":
            return self.adapt_graded_annotation(program, candidates, program.state.annotation_instruction)
        with self._stage("annotation_instruction"):
            initial = program.state.annotation_instruction or self.draft_annotation_instruction(program)
        if not self.evaluates:
            return (program.with_components(annotation_instruction=initial),
                    unevaluated("annotation_instruction", initial))
        confirmed = self.calibration_labels(program, candidates, initial)

        def generate(instruction: str) -> list[tr.LabelTrial] | list[Any]:
            annotator = program.with_components(annotation_instruction=instruction)
            if confirmed:
                return self._generating(run_calibration, annotator, confirmed, chunk_size=s.chunk_size)
            return self._generating(tr.run_labels, annotator, program.state.examples, candidates,
                                    k=s.annotation_candidates, chunk_size=s.chunk_size, seed=s.seed,
                                    controls=s.control_negatives)

        def evaluate(instruction: str, trials: list[Any]) -> Evaluation:
            def explain(text: str) -> str:
                return clean_text(self._call("explain_mismatches", task_context=task, instruction=instruction,
                                             mismatches=text).feedback)

            return calibration_check(trials, explain) if confirmed else annotation_check(trials, explain)

        def refine(instruction: str, _: Any, ev: Evaluation) -> str:
            return self._revise("refine_annotation", "instruction", instruction, task_context=task,
                                current_instruction=instruction, feedback=ev.feedback)

        instruction, _, report = self._loop("annotation_instruction", generate=generate, evaluate=evaluate,
                                            refine=refine, threshold=1.0).run(initial)
        return program.with_components(annotation_instruction=instruction), report

    def adapt_graded_annotation(self, program: SynthesisProgram, candidates: tr.CandidateSource, initial: str
                                ) -> tuple[SynthesisProgram, LoopReport]:
        """The annotation loop with the graded judge: the metric is agreement beyond chance on the calibration
        set (binary kappa and positive recall), and the kept attempt's fitted calibration joins the program.

        The first attempt grades with the task definition and the fixed scale alone (plus any instruction the
        task gives): no drafted instruction, which on SciFact made the 1.5B model's grades flatter. Refinements
        add task-specific guidance written from the mismatches."""
        s = self.settings
        task = ctx.task_context(program.state.task_definition)
        corpus = getattr(candidates, "corpus", None)
        material = js.calibration_set(program.state.examples, candidates, k=s.annotation_candidates,
                                      controls=max(1, s.control_negatives), seed=s.seed,
                                      labels=s.calibration_labels, label_queries=s.calibration_queries)
        material += self.confirmed_candidates(candidates, self.calibration_labels(program, candidates, initial))
        definition = program.state.task_definition
        lexical = self.lexical_ranker(program, candidates) if definition.query_language == \
            definition.document_language else None
        if lexical is not None:  # the hybrid judge's witness: BM25 scores are cheap next to a grade
            material = with_lexical(material, lexical)
        logger.info("annotation_instruction: graded judge, %d calibration candidates (%d queries)", len(material),
                    len({c.query for c in material}))

        def generate(instruction: str) -> list[Any]:
            return self._generating(js.grade_set, program.with_components(annotation_instruction=instruction),
                                    material, corpus)

        def evaluate(instruction: str, grades: list[Any]) -> Evaluation:
            return js.evaluate_graded(material, grades, corpus, feature=s.judge_feature,
                                      kappa_target=s.judge_kappa_target, recall_target=s.judge_recall_target)

        def refine(instruction: str, _: Any, ev: Evaluation) -> str:
            # The mismatches are explained here, not in evaluate: only an attempt that is refined needs the
            # explanation, and on a small CPU model it costs minutes.
            feedback = ev.feedback
            if ev.details.get("mismatches"):
                feedback = clean_text(self._call("explain_mismatches", task_context=task, instruction=instruction,
                                                 mismatches=feedback).feedback) or feedback
            return self._revise("refine_annotation", "instruction", instruction, task_context=task,
                                current_instruction=instruction, feedback=feedback)

        instruction, grades, report = self._loop("annotation_instruction", generate=generate, evaluate=evaluate,
                                                 refine=refine, threshold=s.judge_kappa_target).run(initial)
        samples = js.samples_of(material, grades)
        judge = fit_calibration(samples, feature=s.judge_feature) if any(x.gold == "positive" for x in samples) \
            else None
        return program.with_components(annotation_instruction=instruction, judge=judge), report

    @staticmethod
    def confirmed_candidates(candidates: tr.CandidateSource, pairs: Sequence[LabelledPair] | None) -> list[Any]:
        """Human-confirmed labels (given to the strategy, or asked for by the human one) as calibration candidates."""
        if not pairs:
            return []
        from syntra_dspy.candidates import JudgedCandidate

        encoder = candidates.encoder  # type: ignore[attr-defined]
        qvecs = encoder.encode_queries([p.query for p in pairs])
        dvecs = encoder.encode_documents([p.text or "" for p in pairs])
        return [JudgedCandidate(f"confirmed-{p.query[:40]}", p.query, p.doc_id, None, float(q @ d), p.label, "human",
                                text=p.text) for p, q, d in zip(pairs, qvecs, dvecs)]

    def calibration_labels(self, program: SynthesisProgram, candidates: tr.CandidateSource, instruction: str
                           ) -> tuple[LabelledPair, ...] | None:
        """The confirmed labels the annotation loop is checked against (None: the few-shot positive check).

        Document texts come from the candidate source's corpus when the labels do not carry them.
        """
        if not self.calibration:
            return None
        return with_texts(self.calibration, getattr(candidates, "corpus", None))

    evaluates = True


def _definition_from(pred: dspy.Prediction) -> TaskDefinition:
    return TaskDefinition(
        query_type=clean_text(pred.query_type),
        doc_type=clean_text(pred.doc_type),
        relevance_definition=clean_text(pred.relevance_definition),
        query_language=(clean_text(pred.query_language) or "en").lower()[:5],
        document_language=(clean_text(pred.document_language) or "en").lower()[:5],
    )
