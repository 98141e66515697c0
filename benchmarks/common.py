"""What the maintained benchmarks share: the repository's paths, the offline environment, JSONL records, the
SciFact claim pools and training sets of the downstream benchmarks, and the loopback server the production
benchmarks talk to. The downstream harness itself (train, score, compare) is the product's
(:mod:`syntra_dspy.comparison.downstream`), as ``syntra compare --downstream`` runs it.

A benchmark imports it as ``benchmarks.common`` when run as a module (``python -m benchmarks.NAME``, what the
Makefile's ``make bench-NAME`` does) and as ``common`` when run as a file (``python benchmarks/NAME.py``, whose
folder Python puts first on the path).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

from syntra_dspy.evaluation.exclude import normalize_query
from syntra_dspy.evaluation.retrieve import load_retriever
from syntra_dspy.production.store import RunStore

REPO = Path(__file__).resolve().parents[1]
#: Where each benchmark writes: ``results/<name>/``.
RESULTS = REPO / "benchmarks" / "results"
#: The mini task of the test suite (no model needed): what the production benchmarks compile and produce from.
MINI_TASK = REPO / "tests" / "fixtures" / "mini" / "task.yaml"
#: A loopback OpenAI-compatible server answering with the scripted SyntraBrain after ``argv[1]`` seconds, run in its
#: own process (``python -c FAKE_SERVER LATENCY``: it prints its address and serves until stdin closes). Its handler
#: gets TCP_NODELAY, as uvicorn (vLLM's server) sets it: without it, Nagle's algorithm and delayed ACKs add ~40 ms to
#: every response, which would measure the fake server, not production.
FAKE_SERVER = """
import sys
from syntra_dspy.lm import openai_server
from syntra_dspy.lm.openai_server import OpenAICompatibleServer
from syntra_dspy.testing import SyntraBrain
openai_server._Handler.disable_nagle_algorithm = True  # as uvicorn (vLLM) does
with OpenAICompatibleServer(SyntraBrain(), latency=float(sys.argv[1])) as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()
"""


#: The line a generated README ends its generated part with: what follows it is kept when the benchmark runs again.
GENERATED_END = "<!-- end of the generated report: what follows is kept when the script runs again -->"


def write_readme(out: Path, lines: list[str]) -> Path:
    """Write ``out/README.md``: the generated ``lines``, then whatever was written by hand below the marker line of the
    README already there (a reading of the figures survives a rerun)."""
    readme = out / "README.md"
    kept = ""
    if readme.exists() and GENERATED_END in (old := readme.read_text(encoding="utf-8")):
        kept = old.split(GENERATED_END, 1)[1]
    readme.write_text("\n".join([*lines, "", GENERATED_END]) + (kept or "\n"), encoding="utf-8")
    return readme


def open_store(path: Path, tmp: Path) -> RunStore:
    """A run store opened read-only; a ``.db.gz`` (how the repository keeps them) is read from a copy under ``tmp``."""
    return RunStore.open(plain_store(path, tmp), readonly=True)


def plain_store(path: Path, tmp: Path) -> Path:
    """The run store at ``path`` as a SQLite file: itself, or for a ``.db.gz`` its copy unpacked under ``tmp``."""
    if path.suffix != ".gz":
        return path
    plain = tmp / path.stem
    with gzip.open(path, "rb") as src, plain.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return plain


def offline_environment() -> None:
    """No network on a benchmark machine: LiteLLM's bundled cost map, the Hugging Face cache only, quiet tokenizers
    (set unless the caller set them)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# -- the SciFact downstream benchmarks' claim pools and training sets (downstream_scifact.py, teaching_signal.py);
# the harness that trains, scores and compares is the product's, syntra_dspy.comparison.downstream -------------
INDEX_ROOT = ".syntra/index"


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def write_jsonl(rows: list[dict[str, Any]], path: Path, meta: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    path.with_name(path.name + ".meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return path


def excluded_claims(artifact: Any, queries: dict[str, str]) -> tuple[set[str], dict[str, int]]:
    """Claims that shaped the artifact: its few-shot examples and its judge's calibration queries (by text)."""
    state = artifact.program.state
    few_shot = {normalize_query(e.query) for e in state.examples}
    summary = state.judge.summary if state.judge is not None else None
    calibration = {normalize_query(q) for q in (summary.query_texts if summary else ())}
    ids = {"few_shot": set(), "calibration": set()}
    for qid, text in queries.items():
        key = normalize_query(text)
        if key in few_shot:
            ids["few_shot"].add(qid)
        elif key in calibration:
            ids["calibration"].add(qid)
    return ids["few_shot"] | ids["calibration"], {k: len(v) for k, v in ids.items()}


def claim_pool(dataset: Any, excluded: set[str], seed: int) -> list[str]:
    """The judged claims that did not shape the artifact, in the seeded order whose head is the reserved human
    pool, then the development split, then the evaluation claims."""
    pool = sorted(q for q in dataset.judged_queries if q not in excluded)
    random.Random(seed).shuffle(pool)
    return pool


def candidate_depth(records: list[dict[str, Any]]) -> int:
    """How many candidates the run judged per query (positives plus negatives), for human pairs of the same depth."""
    return max((len(r["neg"]) + len(r["pos"]) for r in records), default=8)


def source_only_records(store_path: Path, judged: list[dict[str, Any]], num_negatives: int) -> list[dict[str, Any]]:
    """The judged records' queries, labelled without a judge: pos = the source document, neg = the other
    retrieved candidates in rank order."""
    wanted = {r["query_id"]: r for r in judged}
    rows = []
    with RunStore.open(store_path, readonly=True) as store:
        for row in store.iter_queries():
            record = wanted.get(row["query_id"])
            if record is None:
                continue
            source = row["doc_id"]
            negs = [doc_id for _, doc_id, _ in row["candidates"] if doc_id != source][:num_negatives]
            texts = store.texts([source, *negs])
            rows.append({"query": record["query"], "instruction": record["instruction"], "pos": [texts[source]],
                         "neg": [texts[d] for d in negs], "pos_ids": [source], "neg_ids": negs,
                         "source_doc_id": source, "query_id": row["query_id"],
                         "artifact_version": record["artifact_version"]})
    return rows


def human_records(dataset: Any, qids: list[str], depth: int, num_negatives: int, instruction: str
                  ) -> list[dict[str, Any]]:
    """Claims with their qrels positives (human judgments) and the base encoder's best-ranked other documents.

    Each candidate's ``labels`` entry carries its qrels label (2 positive, 1 the unjudged negatives) and its BM25
    score for the claim, so a teacher that needs no LLM grade (``label+bm25``) can score people's pairs too."""
    from syntra_dspy.retrieval.sources import LexicalSourceRank

    corpus = dataset.require_corpus()
    retriever = load_retriever("all-MiniLM-L6-v2", corpus, index_root=INDEX_ROOT)
    run = retriever.search({q: dataset.queries[q] for q in qids}, k=depth + 10)
    lexical = LexicalSourceRank(corpus)
    rows = []
    for q in qids:
        positives = [d for d, g in dataset.qrels[q].items() if g > 0 and d in corpus]
        ranked = sorted(run.get(q, {}).items(), key=lambda kv: -kv[1])
        negs = [d for d, _ in ranked if d not in dataset.qrels[q]][:min(depth - 1, num_negatives)]
        if not positives or not negs:
            continue
        bm25 = lexical.scores(dataset.queries[q], positives + negs)
        labels = [{"doc_id": d, "label": 2 if i < len(positives) else 1, "bm25": b, "source": "qrels"}
                  for i, (d, b) in enumerate(zip(positives + negs, bm25, strict=True))]
        rows.append({"query": dataset.queries[q], "instruction": instruction,
                     "pos": [corpus[d].content for d in positives], "neg": [corpus[d].content for d in negs],
                     "pos_ids": positives, "neg_ids": negs, "source_doc_id": None, "query_id": q,
                     "artifact_version": None, "labels": labels})
    return rows
