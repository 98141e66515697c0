"""Plan query blueprints and write one query per blueprint (production stages)."""

from __future__ import annotations

import dspy

from syntra_dspy.signatures.types import Blueprint, WrittenQuery


class PlanQueryBlueprints(dspy.Signature):
    """You plan search queries for a document without writing them yet.

    Produce exactly `count` blueprints. Each blueprint picks exactly one identifier, copied character for
    character from the identifier list, and exactly one option for every attribute dimension, copied from that
    dimension's options. Spread the blueprints over different identifiers and different options, and never
    repeat an identifier-and-options combination, including those listed as already used."""

    document: str = dspy.InputField()
    identifiers: str = dspy.InputField(desc="numbered identifier list")
    attributes: str = dspy.InputField(desc="dimension: options")
    count: int = dspy.InputField()
    already_used: str = dspy.InputField(desc="blueprints planned earlier for this document; may be empty")
    retry_note: str = dspy.InputField(desc="empty, or what was wrong with the previous answer")
    blueprints: list[Blueprint] = dspy.OutputField()


class WriteQueriesFromBlueprints(dspy.Signature):
    """You write search queries for a retrieval task, one per blueprint, in the blueprints' order.

    Each query targets its blueprint's identifier and visibly expresses every chosen attribute option, in the
    style of the example queries and the task's query instruction. Write as the searcher would, who has not
    seen the document: do not copy its sentences. Never change a blueprint, and never put the blueprint's
    labels into the query text."""

    document: str = dspy.InputField()
    blueprints: str = dspy.InputField(desc="numbered blueprints")
    language: str = dspy.InputField(desc="the language and the form every query must be written in")
    retry_note: str = dspy.InputField(desc="empty, or what was wrong with the previous answer")
    queries: list[WrittenQuery] = dspy.OutputField()


class RewriteRejectedQuery(dspy.Signature):
    """You rewrite one search query of a retrieval task that broke a rule, keeping what it asks about.

    Fix exactly the problem named, and answer with the query in the requested form. A query written as a question,
    where this task's queries never are, is restated: for a claim, state as a fact the finding the question asks
    about (a yes-or-no question becomes the statement it asks to confirm; a question about what or how becomes a
    statement of the relation it asks about). A query that repeats a passage of the document word for word is said
    in other words, as a searcher who has not read the document would put it: keep its subject and key terms, drop
    the document's phrasing and details a searcher could not know. Add no finding the query does not contain."""

    query: str = dspy.InputField(desc="the query as written")
    problem: str = dspy.InputField(desc="what is wrong with it")
    form: str = dspy.InputField(desc="the form every query must have, and example queries of the task")
    rewritten: str = dspy.OutputField(desc="the rewritten query, one line")
