"""Pydantic types for every structured LM output. Small, flat shapes: small models follow them best."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Identifier(BaseModel):
    """A document-grounded anchor a query can target: an entity or a relation stated in the document."""

    kind: Literal["entity", "relationship"]
    text: str = Field(description="copied or minimally condensed from the document")


class AttributeDimension(BaseModel):
    """A way queries can vary (e.g. specificity), with mutually exclusive options."""

    dimension: str
    options: list[str] = Field(description="2-4 mutually exclusive options")


class AttributeChoice(BaseModel):
    """One option picked for one attribute dimension."""

    dimension: str
    option: str


class Blueprint(BaseModel):
    """A planned information need: one identifier and one option for every attribute dimension."""

    identifier: str = Field(description="copied exactly from the identifier list")
    choices: list[AttributeChoice] = Field(description="one option for every attribute dimension")

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Identity of the combination, for the no-repeat rule."""
        return self.identifier.strip().lower(), tuple(
            sorted((c.dimension.strip().lower(), c.option.strip().lower()) for c in self.choices)
        )


class WrittenQuery(BaseModel):
    """A query realised from one blueprint (the blueprint is repeated so it can be checked)."""

    blueprint: int = Field(description="0-based position of the blueprint this query realises")
    query: str


class CandidateLabel(BaseModel):
    """A relevance judgement for one candidate, by its local id in the list shown."""

    doc_id: int = Field(description="the local id shown before the candidate")
    score: int = Field(ge=0, le=3,
                       description="3 fully relevant, 2 relevant, 1 related but fails the criterion, 0 unrelated")


def label_class(score: int) -> Literal["positive", "hard_negative", "easy_negative"]:
    """Map the 0-3 relevance scale to training roles: 3 and 2 positive, 1 hard negative, 0 easy negative."""
    if score >= 2:
        return "positive"
    if score == 1:
        return "hard_negative"
    return "easy_negative"
