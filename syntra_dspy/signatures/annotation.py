"""Build, apply, diagnose and revise the relevance-annotation instruction."""

from __future__ import annotations

import dspy

from syntra_dspy.signatures.types import CandidateLabel


class DraftAnnotationInstruction(dspy.Signature):
    """You write the system instruction for an annotator who labels candidate documents for a query of this task.

    The instruction must cover: the task context (what the queries are, what the documents are); the relevance
    criterion, stated as the conditions a document must meet for this task's queries; and the four-point scale
    with a task-specific test for each score: 3 meets every condition directly; 2 meets the conditions with
    weaker or partial support, still a correct answer; 1 looks related (same topic, same entities) but fails a
    required condition; 0 unrelated to the information need. Push the annotator to decide from the specific
    query-document relationship, not from shared words, and to judge every candidate independently of its
    position in the list. Most retrieved candidates share words with the query without meeting the
    criterion: 2 and 3 are for the documents that do. Output only the instruction text."""

    task_context: str = dspy.InputField()
    instruction: str = dspy.OutputField()


class JudgeCandidateRelevance(dspy.Signature):
    """Label every candidate document for the query on the 0-3 relevance scale defined above, one label per
    local doc_id shown, judging each candidate on its own merits."""

    query: str = dspy.InputField()
    candidates: str = dspy.InputField(desc="candidates, each introduced by its local doc_id")
    retry_note: str = dspy.InputField(desc="empty, or what was wrong with the previous answer")
    judgements: list[CandidateLabel] = dspy.OutputField()


class GradeCandidateRelevance(dspy.Signature):
    """Judge the one document below for the query on this scale:
    3 = the document reports evidence that directly meets the relevance criterion for this query;
    2 = the document bears on the query's specific information need, with partial or indirect support;
    1 = the document is on the same topic or names the same entities, but does not meet the criterion;
    0 = the document is about something else.
    Decide from what the document reports, not from words the two share. Your whole answer is the digit of your
    label."""

    query: str = dspy.InputField()
    document: str = dspy.InputField()
    label: int = dspy.OutputField(desc="one digit, 0-3")


class GradeCandidateRelevanceBriefly(dspy.Signature):
    """Grade the document for the query: 3 = evidence that directly meets this; 2 = partial or indirect evidence;
    1 = same topic or entities without meeting it; 0 = about something else. Answer with the digit alone."""

    query: str = dspy.InputField()
    document: str = dspy.InputField()
    label: int = dspy.OutputField(desc="one digit, 0-3")


class ExplainAnnotationMismatches(dspy.Signature):
    """An annotator following the instruction below made mistakes: it labelled documents known to be relevant
    as not relevant (or left them unlabelled), and/or labelled unrelated control documents, drawn at random
    from the corpus, as relevant. For each mismatch, explain which part of the instruction led to the wrong
    label (a condition that is too strict or too loose, a missing case, a misleading test) and what the
    instruction should say instead. Also state what should still separate a hard negative (related but failing a required
    condition) from an easy negative (unrelated). Be concrete and general: the advice must hold for other
    queries of this task."""

    task_context: str = dspy.InputField()
    instruction: str = dspy.InputField()
    mismatches: str = dspy.InputField(desc="query, known-relevant document, label given")
    feedback: str = dspy.OutputField()


class RefineAnnotationInstruction(dspy.Signature):
    """You revise the annotation instruction so that documents known to be relevant are labelled 2 or 3 and
    unrelated documents 0 or 1, following the diagnosis. Keep the task context and the 0-3 scale, keep what works, rewrite the relevance
    conditions the diagnosis shows to be wrong, and keep clear criteria for 1 (related but failing a required
    condition) versus 0 (unrelated). Output only the revised instruction text."""

    task_context: str = dspy.InputField()
    current_instruction: str = dspy.InputField()
    feedback: str = dspy.InputField()
    instruction: str = dspy.OutputField()
