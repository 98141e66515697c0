"""Extract identifiers (what a query can be about) and attributes (how queries can vary) from a document."""

from __future__ import annotations

import dspy

from syntra_dspy.signatures.types import AttributeDimension, Identifier


class ExtractIdentifiersAndAttributes(dspy.Signature):
    """You prepare a document for diverse query generation by producing two things.

    1. Identifiers: 3-8 information anchors taken from the document itself. An entity identifier is a concrete
       thing the document is about (a method, a finding, a population, a measured result); a relationship
       identifier is a link the document states between such things (X increases Y in Z). Copy or minimally
       condense the document's wording; add no outside knowledge; skip incidental details a searcher would
       never ask about; no two identifiers may say the same thing.
    2. Attributes: 3-5 independent dimensions along which a query about this document could vary without
       changing which facts it targets (for example specificity, the kind of answer sought, the searcher's
       expertise), each with 2-4 mutually exclusive options that fit the task below. Dimensions must not
       overlap and every option must be something a query can visibly express."""

    document: str = dspy.InputField()
    retry_note: str = dspy.InputField(desc="empty, or what was wrong with the previous answer")
    identifiers: list[Identifier] = dspy.OutputField()
    attributes: list[AttributeDimension] = dspy.OutputField()


class JudgeIdentifiersAndAttributes(dspy.Signature):
    """You review identifiers and attributes extracted from sample documents for a retrieval task.

    Check, across the samples: grounding (every identifier is stated in its document, nothing invented);
    usefulness (identifiers are what a searcher of this task would look for, not incidental details);
    redundancy (no near-duplicate identifiers or overlapping dimensions); and variation (the attribute
    dimensions and options are independent, fit the task's queries and can be expressed in a query).
    Score 0-3: 3 ready for production; 2 acceptable with minor issues; 1 systematic problems; 0 unusable.
    The feedback states task-level problems and how extraction should change, without repeating facts that
    belong to one sample."""

    task_context: str = dspy.InputField()
    samples: str = dspy.InputField(desc="documents with their extracted identifiers and attributes")
    score: int = dspy.OutputField(desc="0, 1, 2 or 3")
    feedback: str = dspy.OutputField()


class RefineExtractionGuidance(dspy.Signature):
    """You write reusable guidance that will be appended to the extraction instruction for every document of
    this task. Revise the current guidance so that the problems in the feedback stop occurring: keep what
    works, add concrete rules (what to extract, what to skip, which dimensions suit this task's queries), and
    stay general, since the guidance must fit documents you have not seen. Output 60-200 words of bullet
    points, no preamble."""

    task_context: str = dspy.InputField()
    current_guidance: str = dspy.InputField(desc="empty on the first revision")
    feedback: str = dspy.InputField()
    samples: str = dspy.InputField(desc="the extractions the feedback refers to")
    guidance: str = dspy.OutputField()

