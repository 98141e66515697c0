"""``syntra devset translate-titles``: a cross-language known-item dev set from a BEIR folder of titles."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from syntra_dspy.cli._args import positive_int, positive_seconds
from syntra_dspy.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("devset", help="build evaluation sets (cross-language titles)",
                              description="Build evaluation sets from what is at hand.")
    sub = p.add_subparsers(dest="devset_command", metavar="ACTION")
    sub.required = True
    t = sub.add_parser(
        "translate-titles", help="translate a BEIR folder's title queries into another language",
        description="Each query of SOURCE (a BEIR folder whose queries are its documents' titles, e.g. csl-zh) is "
                    "translated by the generator, language-checked and retried; the result is a BEIR folder "
                    "(queries.jsonl, qrels/SPLIT.tsv, corpus.jsonl linked to SOURCE's) with provenance.json "
                    "(exact prompt, model, date; machine-translated, not human). Rerun the same command to resume.")
    t.add_argument("source", type=Path, help="BEIR folder: queries.jsonl (titles), qrels/SPLIT.tsv, corpus.jsonl")
    t.add_argument("--out", type=Path, required=True, help="folder for the dev set (new, or one this command wrote)")
    t.add_argument("--task", type=Path, default=None, metavar="TASK.yaml",
                   help="leave out the queries judged against this task's few-shot documents")
    t.add_argument("--exclude-docs", type=Path, default=None, metavar="FILE",
                   help="leave out the queries judged against these document ids (one per line)")
    t.add_argument("--target-language", default="en", help="language of the translated queries (default en)")
    t.add_argument("--split", default="test", help="qrels split of SOURCE (default test)")
    t.add_argument("--limit", type=positive_int, default=None, metavar="N",
                   help="translate a seeded sample of N queries (default: all)")
    t.add_argument("--seed", type=int, default=0, help="sample seed (default 0)")
    t.add_argument("--generator", metavar="MODEL[@API_BASE]", action="append", default=None,
                   help="the translating LM: 'embedded[:NAME]' (default) or a DSPy/LiteLLM model string, optionally "
                        "@ an OpenAI-compatible server")
    t.add_argument("--api-key-env", default=None, metavar="VAR", help="environment variable holding the server's key")
    t.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                   help="total time one request to a served generator may take (default 120)")
    t.add_argument("--no-progress", action="store_true", help="do not print progress")
    t.add_argument("--json", action="store_true", help="print the summary as JSON")
    t.set_defaults(func=run)


def excluded_documents(args: argparse.Namespace) -> list[str]:
    from syntra_dspy.evaluation.devset import few_shot_documents
    from syntra_dspy.evaluation.exclude import read_query_ids

    docs = few_shot_documents(args.task) if args.task else []
    if args.exclude_docs:
        docs += read_query_ids(args.exclude_docs)  # the same one-id-per-line format
    return docs


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.evaluation.devset import translate_titles
    from syntra_dspy.lm.roles import build_lm, describe_lm, parse_lm_flags, prepare_lm
    from syntra_dspy.task import LMSpec

    if not args.source.is_dir():
        raise ConfigError("the source BEIR folder does not exist", path=args.source)
    flag = parse_lm_flags(args.generator) if args.generator else LMSpec()
    spec = LMSpec.model_validate({**flag.model_dump(), "api_key_env": args.api_key_env,
                                  **({"timeout": args.timeout} if args.timeout is not None else {})})
    lm = build_lm(spec, role="generator")
    prepare_lm(lm)

    def progress(n: int, total: int) -> None:
        if not args.no_progress and (n == total or n % 10 == 0):
            print(f"  {n}/{total} titles", file=sys.stderr, flush=True)

    summary = translate_titles(args.source, args.out, lm=lm,
                               lm_description=describe_lm(lm, role="generator", spec=spec),
                               target_language=args.target_language, split=args.split,
                               exclude_docs=excluded_documents(args), limit=args.limit, seed=args.seed,
                               progress=progress)
    if args.json:
        print(json.dumps({"out": str(summary.out), "queries": summary.queries, "translated_now": summary.translated_now,
                          "excluded": len(summary.excluded), "failed": len(summary.failed), "split": args.split},
                         indent=2))
        return 0
    print(f"dev set {summary.out}: {summary.queries} translated queries "
          f"({summary.translated_now} asked of the generator this run), "
          f"{len(summary.excluded)} excluded (few-shot documents), {len(summary.failed)} failed the checks")
    print(f"evaluate: syntra eval --encoder MODEL --dataset beir:{summary.out}:{args.split} --measures nDCG@20 RR@10")
    return 0
