"""``syntra index``: build (or reuse) the corpus index and optionally run diverse selection."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from syntra_dspy.cli._args import positive_int, positive_int_or_all, rename
from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.corpus import FORMATS
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
    p.add_argument("--corpus-format", choices=FORMATS, default=None,
                   help="corpus format (default: the task's, else beir)")
    rename(p, "--format", "--corpus-format")
    p.add_argument("--encoder", metavar="NAME", default=None,
                   help="sentence-transformers model name or folder (default: the task file's encoder, else "
                        "all-MiniLM-L6-v2, bundled)")
    p.add_argument("--device", default=None, help="torch device for encoding (default: automatic)")
    p.add_argument("--index-dir", metavar="DIR", type=Path, default=None,
                   help="the index folder (default: .syntra/index/<fingerprint> in this folder, where compile, "
                        "produce and eval look for it)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="encoder batch size (default: 32)")
    p.add_argument("--no-progress", action="store_true", help="hide the encoding progress bar")
    p.add_argument("--select", metavar="M", type=positive_int_or_all, default=False, nargs="?", const=None,
                   help="run diverse selection for up to M documents ('all' or no value: no limit)")
    p.add_argument("--tau", type=float, default=0.6, help="cosine threshold for neighbours (default: 0.6)")
    p.add_argument("--seed", type=int, default=42, help="shuffle seed for selection (default: 42)")
    p.add_argument("--out", metavar="FILE", type=Path, default=None,
                   help="with --select: write the selected ids, one per line (a new file)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out (never the corpus, the task file, the index or a run store)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _corpus_source(args: argparse.Namespace) -> tuple[Path, str, EncoderSpec | str | None]:
    """The corpus file, its format and the encoder: a task file's (its ``encoder`` setting unless --encoder), or
    --corpus with --encoder."""
    if args.task and args.corpus:
        raise ConfigError("give either TASK.yaml or --corpus, not both", field="corpus")
    if args.task:
        from syntra_dspy.task import load_task

        spec = load_task(args.task)
        return Path(spec.corpus.path), args.corpus_format or spec.corpus.format, spec.encoder_spec(args.encoder)
    if args.corpus:
        return Path(args.corpus), args.corpus_format or "beir", args.encoder
    raise ConfigError("nothing to index", hint="give a task file (syntra index task.yaml) or --corpus PATH")


def _check_out(args: argparse.Namespace, corpus: Path, index_dir: Path | None) -> None:
    """Refuse, before any encoding, an --out that is one of this command's inputs or a run store (or a file
    SQLite keeps beside one), and an existing file without --overwrite: the rules `syntra export` follows."""
    from syntra_dspy.outputs import Protected, check_output_file, named_output
    from syntra_dspy.production.owned import run_store_behind

    out = named_output(args.out, example="./selected.txt")
    protected = [Protected("corpus being indexed", corpus),
                 Protected("index folder", index_dir if index_dir is not None else DEFAULT_INDEX_ROOT)]
    if args.task:
        protected.append(Protected("task file", Path(args.task)))
    check_output_file(out, protected=protected, overwrite=args.overwrite)
    store = run_store_behind(out)
    if store is not None:
        raise ConfigError(f"this is the run store {store} or a file SQLite keeps beside it; refusing to write "
                          "over it", path=out, field="out", hint="choose another output path")


def run(args: argparse.Namespace) -> int:
    """Build/reuse the index, print counts; with --select, select and optionally write the ids."""
    from syntra_dspy.outputs import atomic_write_text, full_disk_is_clear
    from syntra_dspy.retrieval.corpus import read_corpus
    from syntra_dspy.retrieval.encoder import load_encoder
    from syntra_dspy.retrieval.index import CorpusIndex
    from syntra_dspy.retrieval.selection import select_diverse
    from syntra_dspy.retrieval.sources import default_index_dir

    if args.out is not None and args.select is False:
        raise ConfigError("--out writes the selected ids, so it needs --select", field="out")
    path, fmt, encoder_setting = _corpus_source(args)
    if args.out is not None:
        _check_out(args, path, args.index_dir)
    corpus = read_corpus(path, fmt)
    encoder = load_encoder(encoder_setting, device=args.device)
    # the folder compile, produce and eval use by default for this corpus and encoder
    index_dir = args.index_dir or default_index_dir(corpus, encoder, DEFAULT_INDEX_ROOT)

    started = time.perf_counter()
    with full_disk_is_clear(index_dir, inputs=f"the corpus {path}"):
        index = CorpusIndex.load_or_build(corpus, encoder, index_dir, batch_size=args.batch_size,
                                          progress=not args.no_progress)
    report = {"corpus": str(path), "corpus_format": fmt, "documents": len(corpus), "index_dir": str(index_dir),
              "vectors": len(index), "dims": index.dim, "encoder": encoder.id, "fingerprint": index.fingerprint,
              "seconds": round(time.perf_counter() - started, 1)}
    lines = [f"corpus: {len(corpus)} documents ({fmt}) from {path}",
             f"index: {len(index)} vectors x {index.dim} dims, encoder {encoder.id}, in {index_dir} "
             f"({report['seconds']:.1f}s)", f"fingerprint: {index.fingerprint}"]
    if args.select is not False:
        selected = select_diverse(index, target=args.select, tau=args.tau, seed=args.seed)
        report["selected"] = {"documents": len(selected), "tau": args.tau, "seed": args.seed,
                              "target": args.select, "out": None if args.out is None else str(args.out)}
        lines.append(f"selected: {len(selected)} documents (tau={args.tau}, seed={args.seed}, "
                     f"target={'all' if args.select is None else args.select})")
        if args.out is not None:
            with full_disk_is_clear(args.out, inputs=f"the corpus {path} and the index"):
                args.out.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(args.out, "".join(f"{doc_id}\n" for doc_id in selected))
            lines.append(f"wrote {args.out}")
    print(json.dumps(report, indent=2) if args.json else "\n".join(lines))
    return 0
