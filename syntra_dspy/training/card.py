"""The model card (README.md) of a trained model, rendered from its ``training.json`` report."""

from __future__ import annotations

import json
from typing import Any

_SETTING_LABELS = (
    ("lora_rank", "LoRA rank"),
    ("lora_alpha", "LoRA alpha"),
    ("lora_dropout", "LoRA dropout"),
    ("target_modules", "LoRA target modules (setting)"),
    ("learning_rate", "learning rate"),
    ("warmup_ratio", "warmup ratio"),
    ("lr_scheduler", "LR schedule"),
    ("weight_decay", "weight decay"),
    ("epochs", "epochs"),
    ("max_steps", "max steps"),
    ("batch_size", "batch size (queries per step)"),
    ("num_negatives", "hard negatives per query"),
    ("temperature", "temperature"),
    ("loss", "loss (setting)"),
    ("mini_batch_size", "mini-batch size (cached loss)"),
    ("teacher", "teacher (distillation losses)"),
    ("teacher_scale", "teacher scale (cosine per teacher deviation)"),
    ("infonce_weight", "InfoNCE weight added to distillation"),
    ("max_seq_length", "max sequence length (setting)"),
    ("query_format", "query instruction format"),
    ("use_model_prompts", "use the base model's prompts"),
    ("seed", "seed"),
    ("precision", "precision (setting)"),
)


def render_model_card(report: dict[str, Any]) -> str:
    """Markdown with a YAML header: what the model is, the data it saw, the settings, how it went."""
    data = report.get("data") or {}
    settings = report.get("settings") or {}
    eff = report.get("effective") or {}
    base = report.get("base_model") or {}
    version = data.get("artifact_version") or "unknown"
    lines = [
        "---",
        "library_name: sentence-transformers",
        "pipeline_tag: sentence-similarity",
        "tags:",
        "- sentence-transformers",
        "- feature-extraction",
        "- lora",
        "- syntra",
        f"syntra_artifact_version: {json.dumps(version)}",
        "---",
        "",
        f"# {base.get('name', 'embedding model')} + SYNTRA LoRA ({version})",
        "",
        (f"A LoRA fine-tune of `{base.get('name')}` on synthetic retrieval data produced by the SYNTRA "
        f"synthesis program of artifact version `{version}`. `merged/` is a plain sentence-transformers "
        "model; `adapter/` holds only the LoRA weights and loads on top of the base model."),
        "",
        "## Data",
        "",
        _table([
            ("artifact version", version),
            ("artifact checksum", data.get("artifact_checksum")),
            ("task", data.get("task")),
            ("run store", data.get("run_store")),
            ("export options", _compact(data.get("export_options"))),
            ("export counts", _compact(data.get("export_counts"))),
            ("training file", data.get("source")),
            ("file format", data.get("format")),
            ("file sha256", data.get("sha256")),
            ("records", data.get("records")),
            ("examples", report.get("examples")),
        ]),
        "",
        "## Training settings",
        "",
        _table([("base model", f"{base.get('name')} ({base.get('id')})")]
               + [(label, _compact(settings.get(key))) for key, label in _SETTING_LABELS if key in settings]),
        "",
        "As run:",
        "",
        _table([
            ("loss", f"{eff.get('loss')} (scale {_num(eff.get('loss_scale'))}), {eff.get('negatives')}"),
            ("batch sampler", eff.get("batch_sampler")),
            ("adapted layers", f"{eff.get('adapted_layers')} ({', '.join(eff.get('target_modules') or [])})"),
            ("trainable parameters", _count(eff.get("trainable_parameters"), eff.get("total_parameters"))),
            ("max sequence length", eff.get("max_seq_length")),
            ("training prompts", _compact(eff.get("training_prompts")) or "none"),
            ("precision / device", f"{eff.get('precision')} / {eff.get('device')}"),
        ]),
        "",
        "## Run",
        "",
        _table([
            ("optimizer steps", report.get("steps")),
            ("seconds", report.get("seconds")),
            ("final loss", _num(report.get("final_loss"))),
            ("mean loss", _num(report.get("mean_loss"))),
            ("created", report.get("created")),
            ("versions", _compact(report.get("versions"))),
        ]),
        "",
        "## Usage",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("path/to/merged")',
    ]
    saved_prompt = eff.get("saved_query_prompt")
    if saved_prompt:
        lines += [
            'queries = model.encode(["..."], prompt_name="query")  # adds the training instruction',
            "```",
            "",
            (f"Queries were trained with the instruction prefix {json.dumps(saved_prompt)}, saved as the "
            "model's `query` prompt."),
        ]
    elif settings.get("query_format"):
        lines += [
            "```",
            "",
            (f"Queries were trained with the template {json.dumps(settings['query_format'])} and several "
            "instructions: format queries the same way before encoding them."),
        ]
    else:
        lines += ['embeddings = model.encode(["a query", "a document"])', "```"]
    return "\n".join(lines) + "\n"


def _table(rows: list[tuple[str, Any]]) -> str:
    out = ["| | |", "|---|---|"]
    for key, value in rows:
        if value is None or value == "":
            value = "–"
        out.append(f"| {key} | {_cell(value)} |")
    return "\n".join(out)


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", "\\n")


def _compact(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, sort_keys=isinstance(value, dict)) if value else None
    return value


def _num(value: Any) -> Any:
    return f"{value:.4g}" if isinstance(value, float) else value


def _count(trainable: Any, total: Any) -> str | None:
    if not isinstance(trainable, int) or not isinstance(total, int) or not total:
        return None
    return f"{trainable:,} of {total:,} ({100 * trainable / total:.2f}%)"
