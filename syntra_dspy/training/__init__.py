"""Train: LoRA fine-tuning of sentence-transformers models on exported SYNTRA records."""

from __future__ import annotations

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
