"""``syntra train``: LoRA fine-tuning of an embedding model on exported training records."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from syntra_dspy.cli._child import in_child, rerun_in_child
from syntra_dspy.cli._args import rename
from syntra_dspy.training.config import (
    DEFAULT_QUERY_FORMAT,
    LOSSES,
    LR_SCHEDULERS,
    PRECISIONS,
    REPORTERS,
    TrainConfig,
)
from syntra_dspy.training.teachers import TEACHERS

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
_CHOICES = {"loss": LOSSES, "teacher": TEACHERS, "precision": PRECISIONS, "report_to": REPORTERS,
            "lr_scheduler": LR_SCHEDULERS}

# (flag, TrainConfig field, type, help); the default shown is TrainConfig's, so there is one source.
_OPTIONS = (
    ("--lora-rank", "lora_rank", int, "LoRA rank"),
    ("--lora-alpha", "lora_alpha", float, "LoRA alpha"),
    ("--lora-dropout", "lora_dropout", float, "LoRA dropout"),
    ("--target-modules", "target_modules", str,
     "layers that get adapters: all-linear, peft-default, or comma-separated names (e.g. query,value)"),
    ("--lr", "learning_rate", float, "peak learning rate"),
    ("--warmup-ratio", "warmup_ratio", float, "share of the steps spent warming up"),
    ("--epochs", "epochs", float, "passes over the records"),
    ("--max-steps", "max_steps", int, "stop after this many optimizer steps (-1: no limit)"),
    ("--batch-size", "batch_size", int, "queries per optimizer step"),
    ("--lr-scheduler", "lr_scheduler", str, "transformers learning-rate schedule"),
    ("--weight-decay", "weight_decay", float, "AdamW weight decay"),
    ("--seed", "seed", int, "seed for LoRA init, example building, batching and dropout"),
    ("--precision", "precision", str, "auto (bf16 on a capable GPU, else fp32), fp32, bf16 or fp16"),
    ("--num-negatives", "num_negatives", int,
     "hard negatives per query, repeated when a record has fewer (0: in-batch negatives only)"),
    ("--temperature", "temperature", float, "InfoNCE temperature (loss scale = 1/temperature)"),
    ("--loss", "loss", str, ("InfoNCE from the labels: cached-mnrl (bounded memory) or mnrl (the same loss, every "
                             "text of a step in one forward pass: several times the memory); or distillation from "
                             "the judge's grades the records carry: margin-mse (MarginMSELoss) or distill-kl "
                             "(DistillKLDivLoss)")),
    ("--teacher", "teacher", str, ("with a distillation loss, which judge score teaches: calibrated, expected (E), "
                                   "expected+bm25, label+bm25 (the judge's label, BM25 within it)")),
    ("--teacher-scale", "teacher_scale", float, "student cosine units per teacher unit (distillation losses)"),
    ("--infonce-weight", "infonce_weight", float,
     "weight of an InfoNCE term added to a distillation loss (0: distillation alone)"),
    ("--mini-batch-size", "mini_batch_size", int, ("texts per forward pass with --loss cached-mnrl (raise it "
                                                   "on a large GPU for speed, lower it if memory runs out)")),
    ("--max-seq-length", "max_seq_length", int, ("truncate texts to this many tokens while training "
                                                 "(default: the base model's limit)")),
    ("--device", "device", str, "torch device (default: automatic)"),
    ("--logging-steps", "logging_steps", int, "log the loss every N steps"),
    ("--report-to", "report_to", str, ("report the run's losses and learning rate through this transformers "
                                       "integration, passed to the trainer as report_to (tensorboard: event "
                                       "files in OUT/runs; the others need their own package and login)")),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``train`` subcommand."""
    p = subparsers.add_parser(
        "train",
        help="fine-tune an embedding model with LoRA on exported records",
        description="Fine-tune a sentence-transformers model with LoRA (in-batch + hard-negative InfoNCE) on "
                    "records written by `syntra export`; saves OUT/adapter, OUT/merged, a model card "
                    "(OUT/README.md) and OUT/training.json. Defaults follow the paper.",
    )
    p.add_argument("data", metavar="DATA",
                   help="exported records: a .jsonl file (with its .meta.json) or a datasets save_to_disk folder")
    p.add_argument("--encoder", required=True, metavar="MODEL",
                   help="the embedding model to fine-tune: all-MiniLM-L6-v2 (bundled), a model folder, or a Hugging "
                        "Face model id")
    rename(p, "--base", "--encoder")
    p.add_argument("--out", required=True, metavar="DIR", type=Path, help="output folder")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it already holds files")
    for flag, name, kind, text in _OPTIONS:
        default = _DEFAULTS[name]
        shown = "" if default is None else f" (default: {default})"
        metavar = {int: "N", float: "X"}.get(kind, "NAME")
        choices = _CHOICES.get(name)
        p.add_argument(flag, dest=name, type=kind, default=None, metavar=metavar if choices is None else None,
                       choices=choices, help=text + shown)
    rename(p, "--negatives", "--num-negatives")
    p.add_argument("--instruction-prefix", dest="query_format", nargs="?", const=DEFAULT_QUERY_FORMAT,
                   default=None, metavar="FORMAT",
                   help="prefix each query with its record's retrieval instruction; FORMAT names {instruction} "
                        f"and {{query}} (default when given without FORMAT: {DEFAULT_QUERY_FORMAT!r}); "
                        "off unless given")
    p.add_argument("--no-model-prompts", dest="use_model_prompts", action="store_false", default=None,
                   help="do not apply the base model's own query/document prompts while training")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig the command line asks for: TrainConfig's defaults for anything not given."""
    given = {name: getattr(args, name) for _, name, _, _ in _OPTIONS if getattr(args, name) is not None}
    if args.query_format is not None:
        # a shell passes "\n" literally; the reference template needs a real line break
        given["query_format"] = args.query_format.replace("\\n", "\n").replace("\\t", "\t")
    if args.use_model_prompts is not None:
        given["use_model_prompts"] = args.use_model_prompts
    if "target_modules" in given and given["target_modules"] not in ("all-linear", "peft-default"):
        given["target_modules"] = tuple(t.strip() for t in given["target_modules"].split(",") if t.strip())
    return TrainConfig(**given)


def run(args: argparse.Namespace) -> int:
    """Train in a child process (a kill for lack of memory then becomes an error naming the settings to lower),
    then print where the model went."""
    config = config_from_args(args)
    if not in_child() and getattr(args, "argv", None) is not None:
        lower = ("use --loss cached-mnrl (the same loss in bounded memory)" if config.loss == "mnrl" else
                 f"lower --mini-batch-size (now {config.mini_batch_size})")
        return rerun_in_child(args.argv, what="training", on_kill=(
            f"{lower} or --max-seq-length, or train on a machine with more memory; "
            "benchmarks/results/train_memory/README.md lists measured peaks"))
    from syntra_dspy.training import train_embedding_model

    result = train_embedding_model(args.data, base=args.encoder, out=args.out, config=config,
                                   overwrite=args.overwrite, progress=not args.no_progress)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        loss = f"{result.final_loss:.4f}" if result.final_loss is not None else "n/a"
        print(f"trained on {result.records} records ({result.examples} examples), {result.steps} steps "
              f"in {result.seconds:.1f}s, final loss {loss}")
        print(f"merged model: {result.merged_dir}")
        print(f"adapter:      {result.adapter_dir}")
        print(f"model card:   {result.card_path}")
    return 0
