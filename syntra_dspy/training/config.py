"""Training settings: one frozen dataclass with the paper's defaults, validated on construction."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

from syntra_dspy.errors import ConfigError
from syntra_dspy.training.teachers import TEACHERS, TeacherName

#: The reference implementation's query template (FlagEmbedding ``query_instruction_format``).
DEFAULT_QUERY_FORMAT = "Instruct: {instruction}\nQuery: {query}"

LossName = Literal["mnrl", "cached-mnrl", "margin-mse", "distill-kl"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
LOSSES = ("mnrl", "cached-mnrl", "margin-mse", "distill-kl")
#: The losses that learn from a teacher's scores (records exported with the judge's grades), not only labels.
DISTILL_LOSSES = ("margin-mse", "distill-kl")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: The learning-rate schedules of transformers (``SchedulerType``) that need no extra arguments.
LR_SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                 "inverse_sqrt", "cosine_with_min_lr", "cosine_warmup_with_min_lr", "warmup_stable_decay")
#: Where the transformers trainer can report the run (``report_to``): none, all that are installed, or one of the
#: integrations transformers knows (tensorboard writes OUT/runs; the others need their own package and setup).
REPORTERS = ("none", "all", "azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte",
             "kubeflow", "mlflow", "neptune", "swanlab", "tensorboard", "trackio", "wandb")


@dataclass(frozen=True)
class TrainConfig:
    """How to fine-tune an embedding model with LoRA on SYNTRA records.

    Defaults follow the paper's training recipe (LoRA rank 32, alpha 64, dropout 0.1, lr 1e-4, warmup 0.1,
    one epoch, seed 42, 16 queries per batch, one positive and seven hard negatives per query, InfoNCE at
    temperature 0.02), with the InfoNCE loss computed in bounded memory (``loss``). ``query_format`` is off by
    default: small symmetric models such as all-MiniLM-L6-v2 were never trained with instructions.
    """

    # LoRA
    lora_rank: int = 32
    lora_alpha: float = 64.0
    lora_dropout: float = 0.1
    #: ``"all-linear"`` (every linear layer of the transformer except a pooler / output head, as the paper's
    #: q/k/v/o/gate/up/down), ``"peft-default"`` (peft's per-architecture choice, e.g. BERT: query, value),
    #: or explicit module names.
    target_modules: str | tuple[str, ...] = "all-linear"
    # optimisation
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.1
    epochs: float = 1.0
    max_steps: int = -1  # > 0 stops after that many optimizer steps (smoke runs, timing)
    batch_size: int = 16
    lr_scheduler: str = "linear"
    weight_decay: float = 0.0
    seed: int = 42
    precision: Precision = "auto"
    # data and loss
    num_negatives: int = 7  # hard negatives per query (repeated when a record has fewer; 0: in-batch only)
    temperature: float = 0.02  # InfoNCE temperature; the loss scale is 1 / temperature
    #: ``cached-mnrl`` (GradCache) computes the same loss and gradients as ``mnrl`` a mini-batch of texts at a
    #: time. A 16-query step with 7 negatives on 2 CPU cores (benchmarks/results/train_memory/README.md):
    #: all-MiniLM-L6-v2 13.3 GB with ``mnrl``, 2.3 GB and less time with mini-batches of 8; EmbeddingGemma-300m killed
    #: at 22 GB with ``mnrl``, 6.3 GB with mini-batches of 4. On a large GPU a bigger ``mini_batch_size`` is faster.
    loss: LossName = "cached-mnrl"
    mini_batch_size: int = 8  # texts per forward pass, only for "cached-mnrl"
    #: Distillation from the judge's grades (``margin-mse``: sentence-transformers' MarginMSELoss, the student's
    #: cosine margins regressed on the teacher's; ``distill-kl``: DistillKLDivLoss, the student's softmax over a
    #: record's candidates at ``temperature`` pulled toward the teacher's). ``teacher``: which score of the judge
    #: (syntra_dspy.training.teachers); ``teacher_scale``: student cosine units per teacher unit;
    #: ``infonce_weight``: weight of an InfoNCE term (in-batch + hard negatives) added to the distillation loss.
    teacher: TeacherName = "calibrated"
    teacher_scale: float = 0.1
    infonce_weight: float = 0.0
    max_seq_length: int | None = None  # None: the base model's own limit
    query_format: str | None = None  # e.g. DEFAULT_QUERY_FORMAT; None: queries go in unchanged
    use_model_prompts: bool = True  # apply the base model's own "query"/"document" prompts when it has them
    # running
    device: str | None = None
    logging_steps: int = 10
    report_to: str = "none"  # a transformers reporting integration (REPORTERS); tensorboard logs go to OUT/runs

    def __post_init__(self) -> None:
        if isinstance(self.target_modules, list):
            object.__setattr__(self, "target_modules", tuple(self.target_modules))
        _positive_int(self, "lora_rank", "batch_size", "mini_batch_size", "logging_steps")
        _positive_number(self, "lora_alpha", "learning_rate", "epochs", "temperature")
        _in_range(self, "lora_dropout", 0.0, 1.0, right_open=True)
        _in_range(self, "warmup_ratio", 0.0, 1.0, right_open=True)
        _in_range(self, "weight_decay", 0.0, 1.0, right_open=False)
        if not isinstance(self.num_negatives, int) or self.num_negatives < 0:
            raise ConfigError(f"must be an integer >= 0, got {self.num_negatives!r}", field="num_negatives")
        if not isinstance(self.max_steps, int) or self.max_steps == 0 or self.max_steps < -1:
            raise ConfigError(f"must be -1 (no limit) or a positive integer, got {self.max_steps!r}",
                              field="max_steps")
        if self.max_seq_length is not None and (not isinstance(self.max_seq_length, int)
                                                or self.max_seq_length < 8):
            raise ConfigError(f"must be an integer >= 8 or None, got {self.max_seq_length!r}",
                              field="max_seq_length")
        if not isinstance(self.seed, int):
            raise ConfigError(f"must be an integer, got {self.seed!r}", field="seed")
        if self.loss not in LOSSES:
            raise ConfigError(f"unknown loss {self.loss!r}", field="loss", hint=f"one of {', '.join(LOSSES)}")
        if self.teacher not in TEACHERS:
            raise ConfigError(f"unknown teacher {self.teacher!r}", field="teacher",
                              hint=f"one of {', '.join(TEACHERS)}")
        _positive_number(self, "teacher_scale")
        _in_range(self, "infonce_weight", 0.0, math.inf, right_open=True)
        if self.distills and self.num_negatives < 1:
            raise ConfigError(f"the {self.loss} loss compares a record's candidates: it needs num_negatives >= 1",
                              field="num_negatives", hint="raise --negatives, or train with --loss cached-mnrl")
        if self.report_to not in REPORTERS:
            raise ConfigError(f"unknown reporting integration {self.report_to!r}", field="report_to",
                              hint=f"one of {', '.join(REPORTERS)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}", field="precision",
                              hint=f"one of {', '.join(PRECISIONS)}")
        targets = self.target_modules
        if isinstance(targets, str):
            if not targets.strip():
                raise ConfigError("must not be empty", field="target_modules",
                                  hint="'all-linear', 'peft-default' or module names such as query,value")
        elif not targets or not all(isinstance(t, str) and t.strip() for t in targets):
            raise ConfigError(f"must be a non-empty list of module names, got {targets!r}",
                              field="target_modules")
        if self.query_format is not None:
            check_query_format(self.query_format)

    @property
    def distills(self) -> bool:
        """Whether the loss learns from a teacher's scores (the records must carry the judge's grades)."""
        return self.loss in DISTILL_LOSSES

    @property
    def loss_text(self) -> str:
        """What training.json and the model card say the loss was."""
        names = {"cached-mnrl": "CachedMultipleNegativesRankingLoss", "mnrl": "MultipleNegativesRankingLoss",
                 "margin-mse": "MarginMSELoss", "distill-kl": "DistillKLDivLoss"}
        text = names[self.loss]
        if self.distills:
            text += f" (teacher {self.teacher}, scale {self.teacher_scale})"
            if self.infonce_weight:
                text += f" + {self.infonce_weight} x MultipleNegativesRankingLoss"
        return text

    @property
    def scale(self) -> float:
        """The similarity scale MultipleNegativesRankingLoss multiplies by (1 / temperature)."""
        return 1.0 / self.temperature

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if isinstance(self.target_modules, tuple):
            out["target_modules"] = list(self.target_modules)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown training setting(s): {', '.join(unknown)}",
                              hint=f"known settings: {', '.join(sorted(known))}")
        return cls(**data)


def check_schedule(steps: int, config: TrainConfig) -> None:
    """Refuse a run whose optimizer never leaves learning rate 0: with warmup the first step runs at lr 0
    (transformers' schedules start at 0), so a one-step run saves a model identical to its base."""
    warms_up = config.warmup_ratio > 0 and config.lr_scheduler != "constant"
    if warms_up and steps < 2:
        raise ConfigError(
            f"{steps} optimizer step with warmup (ratio {config.warmup_ratio}) trains at learning rate 0, so the "
            "saved model would equal its base; training needs at least 2 optimizer steps",
            field="max_steps" if config.max_steps > 0 else "epochs",
            hint="add records, raise --epochs or --max-steps, lower --batch-size, or pass --warmup-ratio 0")


def check_query_format(fmt: str) -> None:
    """A query template must name ``{query}`` and may name ``{instruction}``, nothing else."""
    import string

    try:
        names = {name for _, name, _, _ in string.Formatter().parse(fmt) if name is not None}
    except ValueError as exc:
        raise ConfigError(f"not a valid format string: {exc}", field="query_format") from None
    if "query" not in names:
        raise ConfigError(f"must contain {{query}}, got {fmt!r}", field="query_format",
                          hint=f"e.g. {DEFAULT_QUERY_FORMAT!r}")
    if names - {"query", "instruction"}:
        raise ConfigError(f"only {{instruction}} and {{query}} may appear, got {sorted(names)}",
                          field="query_format")


def _positive_int(cfg: TrainConfig, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"must be a positive integer, got {value!r}", field=name)


def _positive_number(cfg: TrainConfig, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                or value <= 0:
            raise ConfigError(f"must be a positive number, got {value!r}", field=name)


def _in_range(cfg: TrainConfig, name: str, low: float, high: float, *, right_open: bool) -> None:
    value = getattr(cfg, name)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value and (
        value < high if right_open else value <= high)
    if not ok:
        bracket = ")" if right_open else "]"
        raise ConfigError(f"must be in [{low}, {high}{bracket}, got {value!r}", field=name)
