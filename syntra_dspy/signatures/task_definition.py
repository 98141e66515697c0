"""Infer, check and repair the task definition from the few-shot examples."""

from __future__ import annotations

import dspy


class InferTaskDefinition(dspy.Signature):
    """You characterise a retrieval task from a handful of labelled examples, each a query with a document
    that is relevant to it.

    Study the examples and decide:
    - query_type: a 2-5 word phrase for what the queries are (their form, intent and domain), e.g. "biomedical
      research claim" or "keyword web search";
    - doc_type: a 2-5 word phrase for what the relevant documents are, e.g. "scientific paper abstract";
    - relevance_definition: one sentence of the form "Given a query (<query_type>) and a document (<doc_type>),
      the document is relevant if <criterion>", where the criterion states exactly what makes each example's
      document the right one for its query, not merely that they share a topic;
    - query_language and document_language: ISO 639-1 codes (en, zh, ...) of the examples' queries and documents.
    Ground every choice in the examples; do not describe a generic search task. The definition must fit every
    example, not just one: never name a topic, entity or finding that belongs to a single example."""

    examples: str = dspy.InputField(desc="numbered query / relevant-document pairs")
    query_type: str = dspy.OutputField()
    doc_type: str = dspy.OutputField()
    relevance_definition: str = dspy.OutputField()
    query_language: str = dspy.OutputField()
    document_language: str = dspy.OutputField()


class JudgeTaskDefinition(dspy.Signature):
    """You check a proposed retrieval-task definition against the labelled examples it was derived from.

    Go through the examples one by one: does each query fit query_type, does each document fit doc_type, and
    would the relevance_definition, used as a filter, accept each example's document for its query while still
    rejecting documents that merely share the topic? Penalise definitions that are generic (could describe any
    search task), too narrow (fit only one example), or state a criterion the examples do not support. A
    definition that names the subject of one example (a particular disease, gene, place or finding) is too
    narrow: score it 1 or lower.
    Score 0-3: 3 precise and ready to use; 2 usable with small issues; 1 systematic mismatch with the examples;
    0 wrong task. The feedback names each problem and the concrete rewrite that fixes it."""

    examples: str = dspy.InputField(desc="numbered query / relevant-document pairs")
    task_definition: str = dspy.InputField(desc="the proposed definition")
    score: int = dspy.OutputField(desc="0, 1, 2 or 3")
    feedback: str = dspy.OutputField()


class RefineTaskDefinition(dspy.Signature):
    """You repair a retrieval-task definition that a reviewer found flawed.

    Rewrite it so that every problem in the feedback is fixed, every claim is supported by at least one example,
    query_type and doc_type stay 2-5 word phrases, and relevance_definition stays one sentence of the form
    "Given a query (<query_type>) and a document (<doc_type>), the document is relevant if <criterion>".
    Keep the language codes unless the feedback shows they are wrong."""

    examples: str = dspy.InputField(desc="numbered query / relevant-document pairs")
    task_definition: str = dspy.InputField(desc="the current definition")
    feedback: str = dspy.InputField(desc="the reviewer's findings")
    query_type: str = dspy.OutputField()
    doc_type: str = dspy.OutputField()
    relevance_definition: str = dspy.OutputField()
    query_language: str = dspy.OutputField()
    document_language: str = dspy.OutputField()
