"""Build, check and revise the query instruction shared by blueprint planning and query writing."""

from __future__ import annotations

import dspy


class DraftQueryInstruction(dspy.Signature):
    """You design the instruction that will steer a writer of synthetic search queries for this task.

    From the task context and the example queries, write two sections in plain text:
    "Synthesizer role": who realistically issues these queries, what they are trying to find, and what they
    know (they have NOT read the target document);
    "Query extraction process": numbered steps for turning a document's identifier into such a query: which
    evidence to pick, how far to abstract from the document's wording, and what the query must leave out.
    Be specific to this task; no generic advice."""

    task_context: str = dspy.InputField()
    example_queries: str = dspy.InputField()
    role_and_process: str = dspy.OutputField()


class DraftQueryStyleGuide(dspy.Signature):
    """You distil the style of the example queries into a compact style guide for a query writer.

    Write three headed bullet lists in plain text:
    "Linguistic DNA": tone, syntax, typical length in words, vocabulary and register seen in the examples;
    "Relevance heuristics": which information in a query makes the intended document relevant under the task's
    relevance definition;
    "Negative constraints": phrasings and habits to avoid (copying the document's sentences, stacking details,
    questions when the examples are statements, and so on)."""

    task_context: str = dspy.InputField()
    example_queries: str = dspy.InputField()
    style_guide: str = dspy.OutputField()


class JudgeQueries(dspy.Signature):
    """You review synthetic queries written for a retrieval task, each shown with the document it was written from.

    Compare every query with the golden example queries and check: style (tone, length, vocabulary, structure),
    task alignment (a query of this task's type that this document answers under the relevance definition),
    naturalness (reads as written by a real person, not a template), producer authenticity (written from the
    searcher's perspective, without having read the document: it must not echo the document's sentences), and
    whether the instruction itself causes the problems.
    Score 0-3: 3 indistinguishable from the golden queries; 2 broadly right with isolated deviations; 1 a
    systematic problem across most queries; 0 off-task. The feedback generalises the problem into a rule for
    the instruction (cite pairs only as evidence; do not carry sample-specific facts into the rule)."""

    task_context: str = dspy.InputField()
    golden_queries: str = dspy.InputField()
    query_instruction: str = dspy.InputField()
    pairs: str = dspy.InputField(desc="numbered document / generated query pairs")
    score: int = dspy.OutputField(desc="0, 1, 2 or 3")
    feedback: str = dspy.OutputField()


class RateSyntheticQuery(dspy.Signature):
    """The example queries below were written by the people who search this collection. Rate whether the last
    query could be one more of theirs, judged by its form (claim, question or keywords), length, level of detail
    and wording:
    3 = it reads like one of the examples;
    2 = it is close, with one visible difference;
    1 = it differs in several ways, or reads like a passage of a paper rather than a searcher's query;
    0 = it is a different kind of text altogether.
    Your whole answer is the digit of your rating."""

    example_queries: str = dspy.InputField()
    query: str = dspy.InputField()
    rating: int = dspy.OutputField(desc="one digit, 0-3")


class RefineQueryInstruction(dspy.Signature):
    """You revise the query instruction that steers a synthetic query writer, using a reviewer's feedback.

    Keep the parts that work and the same sections (Synthesizer role, Query extraction process, Linguistic DNA,
    Relevance heuristics, Negative constraints). Fix every problem in the feedback with a specific rule (say
    exactly which tone, length or wording to use instead of "appropriate"). Sharpen the role or the process when
    the queries do not sound like the intended searcher. The feedback may report measurements: queries of another
    form or length than the examples, or queries whose own document is the first hit of a keyword search because
    they reuse its words. Those are facts, not opinions; fix them first. Output only the revised instruction as
    plain text with headings and bullets."""

    task_context: str = dspy.InputField()
    golden_queries: str = dspy.InputField()
    current_instruction: str = dspy.InputField()
    feedback: str = dspy.InputField()
    pairs: str = dspy.InputField(desc="document / query pairs produced by the current instruction")
    instruction: str = dspy.OutputField()
