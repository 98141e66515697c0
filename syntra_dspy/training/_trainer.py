"""The trainer subclass and progress callbacks (imports sentence-transformers, so loaded lazily)."""

from __future__ import annotations

import logging
import time
from typing import Any

from sentence_transformers import SentenceTransformerTrainer
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback

logger = logging.getLogger("syntra_dspy.training.train")


class Trainer(SentenceTransformerTrainer):
    """SentenceTransformerTrainer that reports through ``logging`` and writes no model card of its own.

    The step log goes to :class:`ProgressLog` instead of raw dicts on stdout; the progress bar stays
    (unless ``disable_tqdm``); :mod:`syntra_dspy.training.card` writes the model card.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.remove_callback(PrinterCallback)
        if self.pop_callback(ProgressCallback) is not None:
            self.add_callback(_BarOnly())

    def add_model_card_callback(self, default_args_dict: dict[str, Any]) -> None:
        return None


class _BarOnly(ProgressCallback):
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # The last step is always logged, so the report's final loss is the end of training, not the first
        # step's (a run shorter than ``logging_steps`` otherwise logs only step 1).
        if state.max_steps and state.global_step >= state.max_steps:
            control.should_log = True
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        return None


class ProgressLog(TrainerCallback):
    """Logs every logged step (loss, learning rate, elapsed seconds) through ``logging``; the last step is always
    logged."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        # The last step is always logged, so the report's final loss is the end of training, not the first
        # step's (a run shorter than ``logging_steps`` otherwise logs only step 1).
        if state.max_steps and state.global_step >= state.max_steps:
            control.should_log = True
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if logs and "loss" in logs:
            logger.info("step %d/%d  loss %.4f  lr %.2e  %.1fs", state.global_step, state.max_steps,
                        logs["loss"], logs.get("learning_rate", float("nan")), time.perf_counter() - self._start)
