"""``syntra eval``: score a model or a run file on a dataset, or compare two runs."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from syntra_dspy.cli._args import positive_int, rename, warn_deprecated
from syntra_dspy.errors import ConfigError

logger = logging.getLogger(__name__)
COMPARE_MEASURE = "nDCG@10"

_EXAMPLES = """\
examples:
  syntra eval --encoder bm25 --dataset beir:data/scifact:train --exclude-queries task.yaml
  syntra eval --encoder runs/minilm-lora --dataset beir:data/scifact:train --run-out minilm.trec \\
              --per-query minilm.tsv --measures nDCG@10 'P(rel=1)@5' RR
  syntra eval --encoder bm25 --dataset neuclirtech:NeuCLIRTech:zho --corpus csl.jsonl
  syntra eval --run NeuCLIRTech/runs/plaidx_clir.trec --qrels NeuCLIRTech/data/qrels.gains.txt \\
              --measures nDCG@20 Judged@20
  syntra eval --compare bm25.trec minilm.trec --qrels qrels/train.tsv --measures nDCG@10

Queries a run does not rank score 0 (as ir_measures and trec_eval -c do); --missing skip averages over
the ranked queries only (plain trec_eval).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate a model or a run file, or compare two runs (ir_measures)",
        description="Retrieve with a dense model (exact FAISS) or BM25 and score with ir_measures; score an "
                    "existing TREC run; or compare two runs with a paired t-test and a bootstrap CI.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--encoder", metavar="DIR|NAME|bm25",
                      help="retrieve with this embedding model (a sentence-transformers folder or name) or with "
                           "'bm25', and score the ranking")
    what.add_argument("--run", metavar="RUN", help="score this TREC run file instead of retrieving")
    what.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                      help="compare two TREC runs (difference is B - A)")
    p.add_argument("--dataset", metavar="SPEC",
                   help="beir:PATH[:split] or neuclirtech:PATH[:eng|zho] (eng, cross-language, by default)")
    p.add_argument("--corpus", metavar="FILE", help="NeuCLIRTech only: the CSL documents JSONL")
    p.add_argument("--qrels", metavar="FILE",
                   help="qrels (TREC 'qid 0 docid gain' or BEIR TSV) for --run/--compare, instead of "
                        "--dataset")
    p.add_argument("--measures", nargs="+", metavar="MEASURE",
                   help="ir_measures measures (default: nDCG@10 nDCG@20 R@100 Judged@20; with --compare: the one "
                        f"measure it tests, default {COMPARE_MEASURE})")
    p.add_argument("-k", "--k", type=positive_int, default=1000, help="documents retrieved per query (default 1000)")
    p.add_argument("--exclude-queries", metavar="FILE",
                   help="query ids to leave out, one per line, or a task YAML (its few-shot queries)")
    p.add_argument("--run-out", metavar="FILE",
                   help="write the retrieved run here (TREC format, tag = model)")
    p.add_argument("--per-query", metavar="FILE", help="write per-query scores (.json, else TSV)")
    p.add_argument("--missing", choices=("zero", "skip"), default="zero",
                   help="queries without a ranking: score 0 (default) or leave out of the mean")
    p.add_argument("--language", help="document language for BM25 tokenisation (BEIR: detected)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="encoding batch size (default 32)")
    p.add_argument("--index-dir", metavar="DIR", default=None,
                   help="keep the encoded corpus in this index folder (default: .syntra/index/<fingerprint>, the "
                        "folder syntra index, compile and produce use for this corpus and encoder)")
    p.add_argument("--no-index-cache", action="store_true",
                   help="encode the corpus in memory and keep nothing on disk")
    p.add_argument("--index-root", default=None, help=argparse.SUPPRESS)  # deprecated: a root of index folders
    p.add_argument("--bootstrap", type=positive_int, default=10_000, help="bootstrap resamples for --compare")
    p.add_argument("--confidence", type=float, default=0.95, help="CI level for --compare (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--places", type=int, default=4, help="decimal places printed (default 4)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    rename(p, "--model", "--encoder")
    rename(p, "--measure", "--measures")
    p.set_defaults(func=run)


def _quiet(*modules: str) -> None:
    """bm25s and jieba set their loggers to DEBUG when imported (jieba with its own stderr handler);
    the command line lowers them to WARNING after importing them, unless -v is given."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        logging.getLogger(name).setLevel(logging.WARNING)


def _load_dataset(args: argparse.Namespace, *, load_corpus: bool):
    from syntra_dspy.evaluation import load_dataset

    if args.dataset is None:
        raise ConfigError("--dataset is required here", field="dataset",
                          hint="e.g. --dataset beir:data/scifact:train")
    ds = load_dataset(args.dataset, docs=args.corpus if load_corpus else None, load_corpus=load_corpus,
                      language=args.language if args.dataset.startswith("beir:") else None)
    if args.language and not args.dataset.startswith("beir:"):
        ds.language = args.language
    return ds


def _judgments(args: argparse.Namespace):
    """(qrels, query texts, name) from --qrels or --dataset."""
    from syntra_dspy.evaluation import read_qrels

    if args.qrels:
        if args.dataset:
            raise ConfigError("give --qrels or --dataset, not both", field="qrels")
        return read_qrels(args.qrels), {}, Path(args.qrels).name
    ds = _load_dataset(args, load_corpus=False)
    return ds.qrels, ds.queries, ds.name


def _index_cache(args: argparse.Namespace) -> dict[str, str | None]:
    """Where the encoded corpus is kept: ``index_dir`` (one folder) or ``index_root`` (the fingerprinted cache)."""
    if args.no_index_cache:
        return {"index_root": None, "index_dir": None}
    if args.index_root is not None:
        warn_deprecated("--index-root ROOT", "--index-dir DIR (one index folder) or --no-index-cache ('')")
        return {"index_root": args.index_root or None, "index_dir": None}
    return {"index_root": ".syntra/index", "index_dir": args.index_dir}


def _compare_measure(args: argparse.Namespace) -> str:
    if args.measures and len(args.measures) > 1:
        raise ConfigError(f"--compare tests one measure, got {len(args.measures)}", field="measures",
                          hint="give one, e.g. --measures nDCG@10, and run again for another")
    return args.measures[0] if args.measures else COMPARE_MEASURE


def run(args: argparse.Namespace) -> int:
    if args.encoder and args.encoder.strip().lower() == "bm25" and not getattr(args, "verbose", False):
        _quiet("bm25s", "jieba")
    from syntra_dspy.evaluation import parse_measures

    if args.compare:
        parse_measures(_compare_measure(args))  # fail on a bad measure before reading any file
        return _compare(args)
    if args.run_out and args.run:
        raise ConfigError("--run-out writes a retrieved run; --run already is one", field="run-out")
    from syntra_dspy.evaluation import (
        evaluate_model,
        evaluate_run,
        read_run,
        resolve_exclusions,
        write_per_query,
        write_run,
    )

    measures = parse_measures(" ".join(args.measures) if args.measures else None)
    if args.encoder:
        if args.qrels:
            raise ConfigError("--encoder needs --dataset (queries and corpus), not --qrels", field="qrels")
        ds = _load_dataset(args, load_corpus=True)
        result = evaluate_model(args.encoder, ds, measures, k=args.k, exclude=args.exclude_queries,
                                batch_size=args.batch_size, show_progress=not args.no_progress,
                                missing=args.missing, **_index_cache(args))
        if args.run_out:
            write_run(result.run, args.run_out, tag=Path(result.model).name or result.model)
            logger.info("wrote run %s", args.run_out)
    else:
        qrels, texts, name = _judgments(args)
        excluded = resolve_exclusions(args.exclude_queries, texts)
        result = evaluate_run(read_run(args.run), qrels, measures, exclude=excluded, name=Path(args.run).name,
                              dataset_name=name, missing=args.missing)
    if args.per_query:
        write_per_query(result, args.per_query)
        logger.info("wrote per-query scores %s", args.per_query)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(result.format_table(places=args.places))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from syntra_dspy.evaluation import compare_runs, read_run, resolve_exclusions

    qrels, texts, name = _judgments(args)
    excluded = resolve_exclusions(args.exclude_queries, texts)
    path_a, path_b = args.compare
    cmp = compare_runs(read_run(path_a), read_run(path_b), qrels, _compare_measure(args),
                       queries=[q for q in qrels if q not in excluded], missing=args.missing,
                       n_bootstrap=args.bootstrap, confidence=args.confidence, seed=args.seed)
    if args.json:
        print(json.dumps({"a": path_a, "b": path_b, "qrels": name, **cmp.to_dict()}, indent=2))
        return 0
    print(format_comparison(cmp, path_a, path_b, places=args.places))
    return 0


def format_comparison(cmp, name_a: str, name_b: str, *, places: int = 4) -> str:
    """A plain-text table of a :class:`~syntra_dspy.evaluation.Comparison`."""
    f = f"{{:+.{places}f}}"
    width = max(len(name_a), len(name_b))
    verdict = "significant" if cmp.significant else "not significant"
    return "\n".join([
        f"{cmp.measure} over {cmp.n} queries",
        f"  A  {name_a:<{width}}  {cmp.mean_a:.{places}f}",
        f"  B  {name_b:<{width}}  {cmp.mean_b:.{places}f}",
        (f"  B - A = {f.format(cmp.diff)}   {cmp.confidence:.0%} bootstrap CI [{f.format(cmp.ci_low)}, "
         f"{f.format(cmp.ci_high)}]   p = {cmp.p_value:.4g} ({cmp.test}; {verdict})"),
        (f"  B better on {cmp.wins} queries, worse on {cmp.losses}, tied on {cmp.ties}; "
         f"{cmp.n_bootstrap} bootstrap resamples, seed {cmp.seed}"),
    ])


if __name__ == "__main__":  # pragma: no cover
    from syntra_dspy.cli import main

    sys.exit(main(["eval", *sys.argv[1:]]))
