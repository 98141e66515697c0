"""Train: LoRA fine-tuning of sentence-transformers models on exported SYNTRA records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.training.card import render_model_card
    from syntra_dspy.training.config import DEFAULT_QUERY_FORMAT, TrainConfig
    from syntra_dspy.training.data import (
        TrainingData,
        TrainingRecord,
        build_examples,
        build_train_dataset,
        load_training_data,
        records_from_dicts,
    )
    from syntra_dspy.training.train import TrainResult, train_embedding_model

__all__ = [
    "DEFAULT_QUERY_FORMAT",
    "TrainConfig",
    "TrainResult",
    "TrainingData",
    "TrainingRecord",
    "build_examples",
    "build_train_dataset",
    "load_training_data",
    "records_from_dicts",
    "render_model_card",
    "train_embedding_model",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "render_model_card": "syntra_dspy.training.card",
    "DEFAULT_QUERY_FORMAT": "syntra_dspy.training.config",
    "TrainConfig": "syntra_dspy.training.config",
    "TrainingData": "syntra_dspy.training.data",
    "TrainingRecord": "syntra_dspy.training.data",
    "build_examples": "syntra_dspy.training.data",
    "build_train_dataset": "syntra_dspy.training.data",
    "load_training_data": "syntra_dspy.training.data",
    "records_from_dicts": "syntra_dspy.training.data",
    "TrainResult": "syntra_dspy.training.train",
    "train_embedding_model": "syntra_dspy.training.train",
})
