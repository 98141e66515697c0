"""LoRA on a sentence-transformers model: which layers get adapters, attaching them, merging them back.

Target modules. ``"all-linear"`` (the default) puts an adapter on every linear layer of the transformer,
as the paper does for Qwen3 (q/k/v/o/gate/up/down), except poolers and output heads the embedding never
passes through. For BERT-style models such as all-MiniLM-L6-v2 that is, per layer,
``attention.self.{query,key,value}``, ``attention.output.dense``, ``intermediate.dense`` and
``output.dense`` (36 adapters, 1.33 M trainable parameters at rank 32, against 22.7 M in the model); for
Gemma3 (EmbeddingGemma) ``q/k/v/o_proj`` and ``gate/up/down_proj``. ``"peft-default"`` defers to
peft's per-architecture table (BERT and Gemma: attention query and value only).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syntra_dspy.errors import ConfigError

if TYPE_CHECKING:
    from peft import LoraConfig
    from sentence_transformers import SentenceTransformer

    from syntra_dspy.training.config import TrainConfig

logger = logging.getLogger(__name__)

# Submodules whose linear layers never reach a sentence embedding (ST pools token states itself).
_UNUSED_HEADS = ("pooler", "lm_head", "classifier", "score")


def lora_config(hf_model: Any, config: TrainConfig) -> LoraConfig:
    """The peft ``LoraConfig`` for ``hf_model`` (a transformers ``PreTrainedModel``) under ``config``."""
    from peft import LoraConfig

    targets: str | list[str] | None
    exclude: list[str] | None = None
    spec = config.target_modules
    if spec == "all-linear":
        targets = "all-linear"
        exclude = _unused_linear_layers(hf_model) or None
    elif spec == "peft-default":
        targets = None
    elif isinstance(spec, str):
        targets = [t.strip() for t in spec.split(",") if t.strip()]
    else:
        targets = list(spec)
    return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, exclude_modules=exclude, bias="none")


def attach_lora(model: SentenceTransformer, config: TrainConfig) -> dict[str, Any]:
    """Add a fresh LoRA adapter to the model's transformer and freeze everything else.

    Parameters outside the transformer (e.g. EmbeddingGemma's Dense projections) are frozen too, so the
    adapter alone holds what training changed and the merged model is exactly base + adapter.
    """
    hf_model = model.transformers_model
    if hf_model is None or not model.has_peft_compatible_model():
        raise ConfigError("LoRA needs a sentence-transformers model built on a transformers model",
                          field="base", hint="static-embedding and ONNX models cannot be fine-tuned with LoRA")
    peft_cfg = lora_config(hf_model, config)
    try:
        model.add_adapter(peft_cfg)
    except ValueError as exc:  # peft: no module matched the targets
        raise ConfigError(f"cannot attach LoRA: {exc}".splitlines()[0], field="target_modules",
                          hint=f"linear layers in this model: {', '.join(linear_layer_names(hf_model))}") from None
    for name, param in model.named_parameters():
        if "lora_" not in name:
            param.requires_grad_(False)
    adapted = sorted(name for name, module in hf_model.named_modules() if hasattr(module, "lora_A"))
    summary = {
        "target_modules": sorted({name.rsplit(".", 1)[-1] for name in adapted}),
        "adapted_layers": len(adapted),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "total_parameters": sum(p.numel() for p in model.parameters()),
    }
    logger.info("LoRA r=%d alpha=%g on %d layers (%s): %s of %s parameters trainable", config.lora_rank,
                config.lora_alpha, len(adapted), ", ".join(summary["target_modules"]),
                f"{summary['trainable_parameters']:,}", f"{summary['total_parameters']:,}")
    return summary


def merge_adapter(model: SentenceTransformer, adapter_dir: str | Path) -> SentenceTransformer:
    """Load the adapter saved in ``adapter_dir`` onto ``model`` (a fresh base) and fold it into the weights."""
    from peft import PeftModel

    module = model[0]
    if not hasattr(module, "model"):
        raise ConfigError(f"cannot merge into a {type(module).__name__} module", field="base")
    with warnings.catch_warnings():  # peft calls a transformers method that transformers deprecates
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
        peft_model = PeftModel.from_pretrained(module.model, str(adapter_dir))
    module.model = peft_model.merge_and_unload()
    return model


def linear_layer_names(hf_model: Any) -> list[str]:
    """Distinct short names of the linear layers in a model (what ``target_modules`` may name)."""
    import torch

    return sorted({name.rsplit(".", 1)[-1] for name, m in hf_model.named_modules()
                   if isinstance(m, torch.nn.Linear)})


def _unused_linear_layers(hf_model: Any) -> list[str]:
    import torch

    return [name for name, m in hf_model.named_modules()
            if isinstance(m, torch.nn.Linear) and any(part in _UNUSED_HEADS for part in name.split("."))]
