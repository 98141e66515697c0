"""``syntra index``: build (or reuse) the corpus index and optionally run diverse selection."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from syntra_dspy.cli._args import positive_int_or_all
from syntra_dspy.errors import ConfigError
from syntra_dspy.task import EncoderSpec

DEFAULT_INDEX_ROOT = Path(".syntra") / "index"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``index`` subcommand."""
    p = subparsers.add_parser(
        "index",
        help="build or reuse the corpus index; optionally select diverse documents",
        description="Encode a corpus into a FAISS index cached by corpus + encoder fingerprint, "
                    "and optionally run diversity-aware document selection (Algorithm 1).",
    )
    p.add_argument("task", nargs="?", metavar="TASK.yaml", help="task file whose corpus to index")
    p.add_argument("--corpus", metavar="PATH", help="corpus file (instead of a task file)")
    p.add_argument("--format", choices=("beir", "neuclir", "tsv"), default=None,
                   help="corpus format (default: the task's, else beir)")
    p.add_argument("--encoder", metavar="NAME", default=None,
                   help="sentence-transformers model name or folder (default: the task file's encoder, else "
                        "all-MiniLM-L6-v2, bundled)")
    p.add_argument("--device", default=None, help="torch device for encoding (default: automatic)")
    p.add_argument("--index-dir", metavar="DIR", type=Path, default=None,
                   help="where to keep the index (default: .syntra/index/<fingerprint> in this folder)")
    p.add_argument("--batch-size", type=int, default=32, help="encoder batch size (default: 32)")
    p.add_argument("--no-progress", action="store_true", help="hide the encoding progress bar")
    p.add_argument("--select", metavar="M", type=positive_int_or_all, default=False, nargs="?", const=None,
                   help="run diverse selection for up to M documents ('all' or no value: no limit)")
    p.add_argument("--tau", type=float, default=0.6, help="cosine threshold for neighbours (default: 0.6)")
    p.add_argument("--seed", type=int, default=42, help="shuffle seed for selection (default: 42)")
    p.add_argument("--out", metavar="FILE", type=Path, default=None,
                   help="with --select: write the selected ids, one per line")
    p.set_defaults(func=run)


def _corpus_source(args: argparse.Namespace) -> tuple[Path, str, EncoderSpec | str | None]:
    """The corpus file, its format and the encoder: a task file's (its ``encoder`` setting unless --encoder), or
    --corpus with --encoder."""
    if args.task and args.corpus:
        raise ConfigError("give either TASK.yaml or --corpus, not both", field="corpus")
    if args.task:
        from syntra_dspy.task import load_task

        spec = load_task(args.task)
        return Path(spec.corpus.path), args.format or spec.corpus.format, spec.encoder_spec(args.encoder)
    if args.corpus:
        return Path(args.corpus), args.format or "beir", args.encoder
    raise ConfigError("nothing to index", hint="give a task file (syntra index task.yaml) or --corpus PATH")


def run(args: argparse.Namespace) -> int:
    """Build/reuse the index, print counts; with --select, select and optionally write the ids."""
    from syntra_dspy.retrieval.corpus import read_corpus
    from syntra_dspy.retrieval.encoder import load_encoder
    from syntra_dspy.retrieval.index import CorpusIndex, index_fingerprint
    from syntra_dspy.retrieval.selection import select_diverse

    if args.batch_size < 1:
        raise ConfigError(f"--batch-size must be at least 1, got {args.batch_size}", field="batch-size")
    if args.out is not None and args.select is False:
        raise ConfigError("--out writes the selected ids, so it needs --select", field="out")
    path, fmt, encoder_setting = _corpus_source(args)
    corpus = read_corpus(path, fmt)
    encoder = load_encoder(encoder_setting, device=args.device)
    fingerprint = index_fingerprint(corpus, encoder)
    index_dir = args.index_dir or DEFAULT_INDEX_ROOT / fingerprint[:12]

    started = time.perf_counter()
    index = CorpusIndex.load_or_build(corpus, encoder, index_dir, batch_size=args.batch_size,
                                      progress=not args.no_progress)
    print(f"corpus: {len(corpus)} documents ({fmt}) from {path}")
    print(f"index: {len(index)} vectors x {index.dim} dims, encoder {encoder.id}, "
          f"in {index_dir} ({time.perf_counter() - started:.1f}s)")
    print(f"fingerprint: {index.fingerprint}")

    if args.select is not False:
        selected = select_diverse(index, target=args.select, tau=args.tau, seed=args.seed)
        print(f"selected: {len(selected)} documents (tau={args.tau}, seed={args.seed}, "
              f"target={'all' if args.select is None else args.select})")
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.out.with_name(args.out.name + ".tmp")
            tmp.write_text("".join(f"{doc_id}\n" for doc_id in selected), encoding="utf-8")
            tmp.replace(args.out)
            print(f"wrote {args.out}")
    return 0
