"""``syntra produce ARTIFACT --store RUN.db``: turn a corpus into judged queries with a compiled artifact."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from syntra_dspy.retrieval.corpus import FORMATS
from syntra_dspy.errors import ConfigError
from syntra_dspy.cli._args import positive_int, positive_int_or_all, positive_seconds, temperature


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "produce", help="produce training data from a compiled artifact into a resumable run store",
        description="Production mode: load a compiled artifact unchanged (refused if it does not verify), select "
                    "diverse documents and run each through extraction, blueprint planning, query writing, "
                    "top-K retrieval and chunked annotation. Every document is committed to the SQLite run store "
                    "in one transaction; rerun the same command to resume after any interruption.")
    p.add_argument("artifact", type=Path, help="artifact directory (artifacts/<task>/<version>)")
    p.add_argument("--store", required=True, type=Path, metavar="RUN.db", help="SQLite run store (created or resumed)")
    p.add_argument("--corpus", default=None, help="corpus file (default: the one the artifact was compiled on)")
    p.add_argument("--corpus-format", choices=FORMATS, default=None, help="corpus format (default: the artifact's)")
    p.add_argument("--docs", type=positive_int_or_all, default=None, metavar="N",
                   help="documents to select (default 'all': every document the diverse selection keeps); "
                        "a later run may raise it")
    p.add_argument("--queries-per-doc", type=positive_int, default=4, metavar="k", help="queries per document (default 4)")
    p.add_argument("--top-k", type=positive_int, default=20, metavar="K", help="candidates retrieved per query (default 20)")
    p.add_argument("--chunk-size", type=positive_int, default=None, metavar="c",
                   help="candidates per annotation call (default: the artifact's setting)")
    p.add_argument("--concurrency", type=positive_int, default=4, metavar="C", help="LM calls in flight (default 4)")
    p.add_argument("--generator", metavar="MODEL[@API_BASE]", default=None, action="append",
                   help="generator LM: 'embedded[:NAME]' or a DSPy/LiteLLM model string, optionally @ an "
                        "OpenAI-compatible server (e.g. hosted_vllm/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1); "
                        "repeat MODEL@URL to balance over several servers of one model, with failover; "
                        "default: the artifact's generator")
    p.add_argument("--api-key-env", default=None, metavar="VAR", help="environment variable holding the server's key")
    p.add_argument("--artifact-key-env", default=None, metavar="VAR",
                   help="accept only an artifact signed with the team key in this environment variable "
                        "(`syntra artifacts sign`)")
    p.add_argument("--encoder", default=None,
                   help="use this encoder instead of the artifact's (only when you mean to: records will differ)")
    p.add_argument("--index-dir", type=Path, default=None, help="where the corpus index is cached")
    p.add_argument("--candidates", choices=("dense", "bm25-translated"), default=None,
                   help="where each query's candidates come from: dense (the encoder's index) or bm25-translated "
                        "(BM25 in the documents' language; a cross-language task's queries are first translated "
                        "by the generator, once each); default: the task file's setting, else dense")
    p.add_argument("--retry-failed", action="store_true",
                   help="also redo documents whose LM output stayed invalid, and partially annotated ones")
    p.add_argument("--timeout", type=positive_seconds, default=None, metavar="SECONDS",
                   help="total time one request to a served generator may take, however slowly the server answers "
                        "(default 120; connect is bounded at 10 s)")
    p.add_argument("--retries", type=int, choices=range(0, 21), default=None, metavar="N",
                   help="retries of a failed request to a served generator, with capped, logged waits (default 3)")
    p.add_argument("--retry-temperature", type=temperature, default=0.7, metavar="T",
                   help="sampling temperature for --retry-failed documents, so the retry gets fresh answers (default 0.7)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="spread the documents over a Ray cluster (needs the extra: pip install 'syntra-dspy[ray]'): "
                        "ADDRESS is HOST:PORT of `ray start --head`, or 'auto'; without it Ray uses $RAY_ADDRESS, a "
                        "cluster on this machine, or starts one. This process alone writes the store; "
                        "--concurrency counts the calls in flight across all workers. Give --ray after ARTIFACT, or "
                        "with an address, so it does not take ARTIFACT for one")
    p.add_argument("--ray-workers", type=positive_int, default=None, metavar="N",
                   help="Ray document workers (default: one per CPU of the cluster, at most --concurrency)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from syntra_dspy.production import RayOptions, produce

    if args.ray_workers is not None and args.ray is None:
        raise ConfigError("--ray-workers needs --ray", field="ray_workers", hint="add --ray [ADDRESS]")
    ray = RayOptions(address=args.ray or None, workers=args.ray_workers) if args.ray is not None else None
    summary = produce(args.artifact, args.store, corpus=args.corpus, corpus_format=args.corpus_format,
                      docs=args.docs, queries_per_doc=args.queries_per_doc, top_k=args.top_k,
                      chunk_size=args.chunk_size, concurrency=args.concurrency, generator=args.generator,
                      api_key_env=args.api_key_env, encoder=args.encoder, index_dir=args.index_dir,
                      retry_failed=args.retry_failed, retry_temperature=args.retry_temperature,
                      progress=not args.no_progress, artifact_key_env=args.artifact_key_env,
                      timeout=args.timeout, retries=args.retries, ray=ray, candidates=args.candidates)
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
        return 0
    d = summary.documents
    print(f"session {summary.session_id} {summary.status}: {summary.processed} documents in {summary.seconds:.1f} s, "
          f"{summary.calls} LM calls")
    print(f"run store {summary.store} (artifact {summary.artifact_version}): {d['done']} done, {d['partial']} partial, "
          f"{d['failed']} failed, {d['pending']} pending of {d['planned']} planned")
    print(f"{summary.queries} queries, {summary.records} exportable records (default export options)")
    if summary.failures_by_stage:
        print("failures by stage: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.failures_by_stage.items()))
              + f"  (details: syntra export {summary.store} --stats)")
    return 0
