"""LoRA fine-tuning of a sentence-transformers model on SYNTRA records.

One run: load and validate the records, build (anchor, positive, negative_1..n) examples, attach a LoRA
adapter to the base model's transformer, train with MultipleNegativesRankingLoss (InfoNCE over the
in-batch documents plus each query's hard negatives; batches never hold the same text twice), then
write::

    OUT/
      adapter/        the peft adapter, as a sentence-transformers folder (needs the base model to load)
      merged/         base + adapter folded together: a plain sentence-transformers model
      README.md       model card: data provenance and settings
      training.json   the same, machine-readable, plus steps, seconds and losses

The folder is assembled beside ``OUT`` and moved into place at the end, so a killed run never leaves a
half-written model behind.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syntra_dspy.retrieval.encoder import check_device
from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.training.card import render_model_card
from syntra_dspy.training.config import TrainConfig, check_schedule
from syntra_dspy.training.data import TrainingData, build_train_dataset, load_training_data
from syntra_dspy.training.lora import attach_lora, merge_adapter
from syntra_dspy.training.teachers import Teacher

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
REPORT_FILE, CARD_FILE, ADAPTER_DIR, MERGED_DIR = "training.json", "README.md", "adapter", "merged"
_DOC_PROMPTS = ("document", "passage", "corpus")  # the names syntra_dspy.retrieval.encoder looks for


@dataclass(frozen=True)
class TrainResult:
    """Where a trained model went and how the run went."""

    out_dir: Path
    adapter_dir: Path
    merged_dir: Path
    card_path: Path
    report_path: Path
    records: int
    examples: int
    steps: int
    seconds: float
    final_loss: float | None
    config: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out.update({k: str(v) for k, v in out.items() if isinstance(v, Path)})
        out["config"] = self.config.to_dict()
        return out


def train_embedding_model(data: TrainingData | str | Path, *, base: str, out: str | Path,
                          config: TrainConfig | None = None, overwrite: bool = False,
                          progress: bool = True) -> TrainResult:
    """Fine-tune ``base`` with LoRA on ``data`` and save adapter, merged model, card and report to ``out``.

    Args:
        data: exported records (a ``.jsonl`` file, a ``save_to_disk`` folder) or loaded :class:`TrainingData`.
        base: ``all-MiniLM-L6-v2`` (the bundled copy), a sentence-transformers folder, or a hub id.
        out: the output folder; it must not hold files unless ``overwrite``.
        config: the settings; :class:`TrainConfig` defaults (the paper's) when omitted.
        progress: show a progress bar (step losses are logged either way).

    Raises:
        InputError: bad records (file, line and field named) or an occupied ``out``.
        ConfigError: settings the base model cannot take (e.g. no layer matches ``target_modules``).
    """
    config = config or TrainConfig()
    uses_instruction = config.query_format is not None and "{instruction}" in config.query_format
    if not isinstance(data, TrainingData):
        data = load_training_data(data, require_negatives=config.num_negatives > 0,
                                  require_instruction=uses_instruction)
    else:
        _check_loaded(data, config, uses_instruction)
    check_schedule(_planned_steps(len(data), config), config)  # one example per record
    check_device(config.device)
    _check_reporter(config.report_to)
    out = Path(out).expanduser()
    _check_out(out, overwrite)
    precision = _precision(config)

    from transformers import set_seed

    from syntra_dspy.retrieval.encoder import load_encoder
    from syntra_dspy.training._trainer import ProgressLog, Trainer

    encoder = load_encoder(base, device=config.device)
    model = encoder.model
    base_max_len = model.max_seq_length
    if config.max_seq_length:
        model.max_seq_length = config.max_seq_length
    prompts, saved_query_prompt = _prompts(model, data, config)
    set_seed(config.seed)  # LoRA's A matrices are drawn when the adapter is attached
    lora_summary = attach_lora(model, config)
    dataset = build_train_dataset(data, num_negatives=config.num_negatives, seed=config.seed,
                                  query_format=config.query_format, teacher=_teacher(config))

    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        args = _training_args(config, staging / "checkpoints", precision=precision, progress=progress,
                              prompts=prompts, router_mapping=_router_mapping(model, dataset.column_names))
        from syntra_dspy.training.losses import build_loss

        trainer = Trainer(model=model, args=args, train_dataset=dataset, loss=build_loss(model, config),
                          callbacks=[ProgressLog()])
        logger.info("training %s on %d examples (%d hard negatives each), %d step(s)",
                    encoder.name, len(dataset), config.num_negatives, _planned_steps(len(dataset), config))
        started = time.perf_counter()
        output = trainer.train()
        seconds = time.perf_counter() - started
        history = [h for h in trainer.state.log_history if "loss" in h]
        final_loss = float(history[-1]["loss"]) if history else None
        if (staging / "checkpoints" / "runs").is_dir():  # tensorboard's event files: kept as OUT/runs
            os.replace(staging / "checkpoints" / "runs", staging / "runs")

        # the saved models keep the base model's inference length; the training length is in the card
        model.max_seq_length = base_max_len
        if saved_query_prompt is not None:
            model.prompts = {**(model.prompts or {}), "query": saved_query_prompt}
        _save_models(model, base, staging)
        report = _report(
            encoder=encoder, data=data, config=config, examples=len(dataset), lora=lora_summary,
            prompts=prompts, saved_query_prompt=saved_query_prompt,
            train_max_len=config.max_seq_length or base_max_len, precision=precision,
            device=str(model.device), steps=trainer.state.global_step, seconds=seconds,
            final_loss=final_loss, mean_loss=output.training_loss, history=history,
        )
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                           encoding="utf-8")
        card = render_model_card(report)
        for folder in (staging, staging / MERGED_DIR, staging / ADAPTER_DIR):
            (folder / CARD_FILE).write_text(card, encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("saved %s (adapter/, merged/, %s, %s) after %d step(s) in %.1fs, final loss %s",
                out, CARD_FILE, REPORT_FILE, report["steps"], seconds,
                f"{final_loss:.4f}" if final_loss is not None else "n/a")
    return TrainResult(
        out_dir=out, adapter_dir=out / ADAPTER_DIR, merged_dir=out / MERGED_DIR, card_path=out / CARD_FILE,
        report_path=out / REPORT_FILE, records=len(data), examples=len(dataset), steps=report["steps"],
        seconds=seconds, final_loss=final_loss, config=config,
    )


# --- pieces ----------------------------------------------------------------------------------------


def _training_args(config: TrainConfig, output_dir: Path, *, precision: str, progress: bool,
                   prompts: dict[str, str], router_mapping: dict[str, str] | None) -> Any:
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    return SentenceTransformerTrainingArguments(
        output_dir=str(output_dir),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_ratio,  # a float below 1 is a ratio of the total steps
        lr_scheduler_type=config.lr_scheduler,
        weight_decay=config.weight_decay,
        seed=config.seed,
        data_seed=config.seed,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=(config.device or "").startswith("cpu"),
        batch_sampler=BatchSamplers.NO_DUPLICATES,  # no text twice in a batch: no false in-batch negatives
        prompts=prompts or None,
        router_mapping=router_mapping,
        eval_strategy="no",
        save_strategy="no",
        report_to=config.report_to,
        logging_steps=config.logging_steps,
        logging_first_step=True,
        disable_tqdm=not progress,
        dataloader_num_workers=0,
        dataloader_pin_memory=_cuda_in_use(config),
    )


def _check_reporter(name: str) -> None:
    """Refuse a reporting integration whose package is not installed before anything is loaded."""
    if name in ("none", "all"):
        return
    from transformers.integrations import get_available_reporting_integrations

    if name not in get_available_reporting_integrations():
        from syntra_dspy.errors import DependencyError

        package = {"comet_ml": "comet-ml", "azure_ml": "azureml-core"}.get(name, name)
        raise DependencyError(f"--report-to {name}: its package is not installed", hint=f"pip install {package}")


def _save_models(model: SentenceTransformer, base: str, staging: Path) -> None:
    """``adapter/`` from the trained model; ``merged/`` = a fresh base with that adapter folded in."""
    from syntra_dspy.retrieval.encoder import load_encoder

    model.eval()
    model.save(str(staging / ADAPTER_DIR), create_model_card=False)
    merged = merge_adapter(load_encoder(base, device="cpu").model, staging / ADAPTER_DIR)
    merged.prompts = dict(model.prompts or {})
    merged.default_prompt_name = model.default_prompt_name
    merged.save(str(staging / MERGED_DIR), create_model_card=False)
    shutil.rmtree(staging / "checkpoints", ignore_errors=True)


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", path=out, field="out")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise InputError("already exists and is not empty", path=out, field="out",
                         hint="choose another --out, or pass --overwrite to replace it")


def _check_loaded(data: TrainingData, config: TrainConfig, uses_instruction: bool) -> None:
    for i, rec in enumerate(data.records, start=1):
        if config.num_negatives > 0 and not rec.neg:
            raise InputError(f"record {i} has no negatives", path=data.source, field="neg",
                             hint="or train with num_negatives=0 (in-batch negatives only)")
        if uses_instruction and not rec.instruction:
            raise InputError(f"record {i} has no instruction, but the query format uses {{instruction}}",
                             path=data.source, field="instruction")


def _prompts(model: SentenceTransformer, data: TrainingData,
             config: TrainConfig) -> tuple[dict[str, str], str | None]:
    """Column prompts for training, and the query prompt the saved model should carry (if it changes).

    The base model's own prompts (e.g. EmbeddingGemma's ``query``/``document``) are used as it defines
    them. An instruction template replaces the model's query prompt; when every record shares one
    instruction and the template ends in ``{query}``, the filled-in prefix becomes the saved model's
    ``query`` prompt, so encoding queries later applies it without the caller knowing.
    """
    own = dict(model.prompts or {}) if config.use_model_prompts else {}
    doc_prompt = next((own[name] for name in _DOC_PROMPTS if own.get(name)), None)
    query_prompt = own.get("query") or None
    prompts: dict[str, str] = {}
    if query_prompt and config.query_format is None:
        prompts["anchor"] = query_prompt
    if doc_prompt:
        prompts["positive"] = doc_prompt
        for k in range(1, config.num_negatives + 1):
            prompts[f"negative_{k}"] = doc_prompt
    saved_query_prompt = None
    fmt = config.query_format
    if fmt is not None:
        instructions = data.instructions
        if fmt.endswith("{query}") and fmt.count("{query}") == 1 and len(instructions) <= 1:
            saved_query_prompt = fmt[: -len("{query}")].format(instruction=instructions[0] if instructions else "")
        else:
            logger.warning("the records carry %d different instructions (or the query format does not end "
                           "in {query}): the saved model gets no query prompt, so prefix queries yourself "
                           "when encoding", len(instructions))
    return prompts, saved_query_prompt


def _router_mapping(model: SentenceTransformer, columns: list[str]) -> dict[str, str] | None:
    from sentence_transformers.base.modules.router import Router

    if not any(isinstance(m, Router) for m in model.children()):
        return None
    return {c: "query" if c == "anchor" else "document" for c in columns}


def _teacher(config: TrainConfig) -> Teacher | None:
    return Teacher(config.teacher, scale=config.teacher_scale) if config.distills else None


def _precision(config: TrainConfig) -> str:
    if config.precision == "fp16" and not _cuda_in_use(config):
        raise ConfigError("fp16 training needs a CUDA GPU", field="precision", hint="use bf16 or fp32")
    if config.precision != "auto":
        return config.precision
    import torch

    return "bf16" if _cuda_in_use(config) and torch.cuda.is_bf16_supported() else "fp32"


def _cuda_in_use(config: TrainConfig) -> bool:
    import torch

    return torch.cuda.is_available() and not (config.device or "").startswith("cpu")


def _planned_steps(examples: int, config: TrainConfig) -> int:
    if config.max_steps > 0:
        return config.max_steps
    return math.ceil(math.ceil(examples / config.batch_size) * config.epochs)


def _report(*, encoder: Any, data: TrainingData, config: TrainConfig, examples: int, lora: dict[str, Any],
            prompts: dict[str, str], saved_query_prompt: str | None, train_max_len: int | None,
            precision: str, device: str, steps: int, seconds: float, final_loss: float | None,
            mean_loss: float | None, history: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "syntra-embedding-model",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "base_model": {"name": encoder.name, "id": encoder.id},
        "data": data.provenance(),
        "settings": config.to_dict(),
        "effective": {
            "loss": config.loss_text,
            "loss_scale": config.scale,
            "negatives": "in-batch + per-query hard negatives" if config.num_negatives else "in-batch only",
            "batch_sampler": "no_duplicates",
            "max_seq_length": train_max_len,
            "training_prompts": prompts,
            "saved_query_prompt": saved_query_prompt,
            "precision": precision,
            "device": device,
            **lora,
        },
        "examples": examples,
        "steps": steps,
        "seconds": round(seconds, 3),
        "final_loss": final_loss,
        "mean_loss": mean_loss,
        "loss_history": [{"step": h.get("step"), "loss": h["loss"], "learning_rate": h.get("learning_rate")}
                         for h in history],
        "outputs": {"adapter": ADAPTER_DIR, "merged": MERGED_DIR},
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("syntra-dspy", "sentence-transformers", "transformers", "peft", "torch", "datasets"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "unknown"
    return out
