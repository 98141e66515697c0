"""Cross-language retrieval on the NeuCLIRTech fixture: English-only versus multilingual encoders.

For each encoder: where each of the task template's few-shot positives ranks for its English query among the 31
Chinese abstracts of ``tests/fixtures/neuclirtech/docs.jsonl``, and nDCG@20 / Judged@20 of the fixture's four
topics (English ``eng`` and Chinese ``zho`` queries) through the same evaluation path as ``syntra eval``. The
candidates a cross-language annotator sees come from such a ranking, so a positive at rank 19 of 31 means the
annotator mostly sees noise. Four topics and 31 documents: a sanity check, not a benchmark figure.

    python -m syntra_dspy.models install embeddinggemma-300m      # once
    python benchmarks/clir_example_ranks.py --out benchmarks/results/clir_example_ranks.md
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "neuclirtech"
TEMPLATE = REPO / "templates" / "neuclirtech-clir.yaml"
MEASURES = "nDCG@20 Judged@20"


def example_ranks(encoder, corpus, examples) -> list[int]:
    """1-based rank of each example's positive among every corpus document for the example's query."""
    from syntra_dspy.retrieval.index import CorpusIndex

    index = CorpusIndex.build(corpus, encoder, progress=False)
    hits = index.search(encoder.encode_queries([ex.query for ex in examples]), len(corpus))
    return [1 + [doc_id for doc_id, _ in found].index(ex.positive_id) for ex, found in zip(examples, hits)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", action="append", default=None,
                    help="encoder name or folder (repeatable; default: all-MiniLM-L6-v2 and embeddinggemma-300m)")
    ap.add_argument("--out", default=None, help="write the table here (Markdown) and a .json beside it")
    args = ap.parse_args()

    from syntra_dspy.retrieval.corpus import read_corpus
    from syntra_dspy.retrieval.encoder import load_encoder
    from syntra_dspy.evaluation import evaluate_model, load_neuclirtech
    from syntra_dspy.task import load_task

    task = load_task(TEMPLATE)
    corpus = read_corpus(task.corpus.path, task.corpus.format)
    rows = []
    for name in args.encoder or ["all-MiniLM-L6-v2", "embeddinggemma-300m"]:
        started = time.perf_counter()
        encoder = load_encoder(name)
        loaded = time.perf_counter() - started
        ranks = example_ranks(encoder, corpus, task.examples)
        scores = {}
        for lang in ("eng", "zho"):
            result = evaluate_model(encoder, load_neuclirtech(FIXTURE, lang), MEASURES)
            scores[lang] = result.aggregate
        rows.append({"encoder": encoder.id, "example_ranks": ranks, "scores": scores,
                     "load_s": round(loaded, 1), "total_s": round(time.perf_counter() - started, 1)})
        print(json.dumps(rows[-1]))

    lines = [f"Template examples' positive ranks (of {len(corpus)} documents) and fixture topics "
             f"({MEASURES}), `python benchmarks/clir_example_ranks.py`", "",
             "| encoder | example ranks | eng nDCG@20 | eng Judged@20 | zho nDCG@20 | zho Judged@20 |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        e, z = r["scores"]["eng"], r["scores"]["zho"]
        lines.append(f"| {r['encoder']} | {', '.join(map(str, r['example_ranks']))} | {e['nDCG@20']:.4f} | "
                     f"{e['Judged@20']:.4f} | {z['nDCG@20']:.4f} | {z['Judged@20']:.4f} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table + "\n", encoding="utf-8")
        out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
