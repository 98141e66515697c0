"""How much of the grading calls' prompts a prefix cache serves, by the order the judge's prompt shows query and
document, replayed from a run store: no LM call.

The graded judge asks about one candidate a call: the instruction, then the query and the document, or the document
and the query (``JudgeCalibration.grade_order``; production asks about one candidate for all of a document's
queries in a row when the document comes first). Which tokens of those prompts a server must compute and which it can
take from a cache depends on the order and on what the cache keeps:

- ``last prompt`` is the embedded engine: it keeps one saved state per step (``PromptStateCache``), so a grading
  call reuses what it shares with the previous grading call, on the engine's 8-token grid (``reuse_end``);
- ``prefix cache`` is a served model with automatic prefix caching (vLLM's, on by default in its V1 engine): blocks
  of 16 tokens, each kept under the hash of everything before it, least recently used first out, here with room for
  a given number of tokens (unbounded, or about what one GPU leaves for a 7B model's cache).

Every grading call of the store's queries is replayed in production's order (documents by their position; each
document's calls query by query, or candidate by candidate with document first), its prompt built by the judge's own
adapter and the model's chat template and tokenized with the embedded model's tokenizer (the Qwen2.5 family's). What
it measures is tokens, which on a served model is what prefill costs and what a bill with discounted cached input
counts; not seconds.

    python -m benchmarks.prefix_replay          # make bench-prefix-replay: the committed SciFact store

Writes ``benchmarks/results/prefix_replay/README.md`` (the generated part; what follows its end marker is kept) and
``prefix_replay.json``. Takes a minute on 2 cores (tokenizing ~5,000 prompts).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from functools import cache, partial
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.grading import DigitLabelAdapter
from syntra_dspy.judging.settings import GRADE_ORDERS, GradeOrder
from syntra_dspy.lm.llamacpp.prompt_states import grid_floor, reuse_end, shared_prefix
from syntra_dspy.models.install import ensure_gguf
from syntra_dspy.production.pipeline import grouped_by_candidate
from syntra_dspy.production.store import RunStore
from syntra_dspy.programs import context as ctx
from syntra_dspy.retrieval.corpus import read_corpus

try:  # python -m benchmarks.prefix_replay (make bench-prefix-replay)
    from benchmarks.common import REPO, RESULTS, open_store, write_readme
except ModuleNotFoundError:  # python benchmarks/prefix_replay.py: this folder is first on the path
    from common import REPO, RESULTS, open_store, write_readme  # type: ignore

#: vLLM's default KV block size: a prefix is cached and found in whole blocks.
BLOCK = 16
#: Prefix cache sizes replayed, in tokens (None: unbounded). 1M is about what an 80 GB GPU leaves for the KV cache of
#: a 7B model with grouped-query attention (Qwen2.5-7B: 56 KiB a token), 100k a much smaller share, 37k what the
#: embedded engine's 1 GiB of saved prompt states holds of the 1.5B model (28 KiB a token).
CAPACITIES: tuple[int | None, ...] = (None, 1_000_000, 100_000, 37_000)

Call = tuple[str, str]  # (query text, candidate document id)


def grading_calls(run: RunStore) -> list[list[Call]]:
    """Each document's grading calls in query-first order (its queries by position, each query's candidates by
    rank), documents in the order production took them. A candidate the judge's cascade skipped (``judge_skips``)
    was never asked about, so it is no call."""
    skipped = ("LEFT JOIN judge_skips s ON s.query_id = c.query_id AND s.rank = c.rank WHERE s.query_id IS NULL "
               if run.has_table("judge_skips") else "")
    docs: dict[str, list[Call]] = {}
    for doc_id, query, candidate in run.rows(
            "SELECT d.doc_id, q.text, c.doc_id FROM documents d JOIN queries q ON q.doc_id = d.doc_id "
            f"JOIN candidates c ON c.query_id = q.query_id {skipped}ORDER BY d.position, q.position, c.rank"):
        docs.setdefault(doc_id, []).append((query, candidate))
    return list(docs.values())


def in_order(calls: Sequence[Call], order: GradeOrder) -> list[Call]:
    """A document's calls as production asks them: as listed, or grouped by candidate when the document comes first
    (:func:`~syntra_dspy.production.pipeline.grouped_by_candidate`)."""
    return list(calls) if order == "query-first" else grouped_by_candidate(calls, lambda call: call[1])


class PromptTokens:
    """The token ids of a grading call's prompt, as the embedded engine sends them: the judge's adapter, the model's
    own chat template, its tokenizer."""

    def __init__(self, program: Any, texts: Callable[[str], str], model_path: Path) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.program, self.texts = program, texts
        self.llama = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
        meta = self.llama.metadata
        vocab = self.llama._model
        self.formatter = Jinja2ChatFormatter(
            template=meta["tokenizer.chat_template"],
            eos_token=vocab.token_get_text(vocab.token_eos()), bos_token=vocab.token_get_text(vocab.token_bos()))

    def __call__(self, call: Call, order: GradeOrder) -> list[int]:
        query, candidate = call
        fields = ("document", "query") if order == "document-first" else None
        document = ctx.clip(self.texts(candidate), self.program.max_doc_chars)
        messages = DigitLabelAdapter(fields).format(self.program.grade.signature, [],
                                                    {"query": query, "document": document})
        prompt = self.formatter(messages=messages).prompt
        return self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)


class LastPrompt:
    """The embedded engine: one saved state of the step, the previous grading prompt; the next call keeps what it
    shares with it, on the prompt-evaluation grid."""

    name = "last prompt (embedded engine)"

    def __init__(self) -> None:
        self.previous: list[int] = []

    def serve(self, tokens: list[int]) -> int:
        kept = reuse_end(shared_prefix(self.previous, tokens), len(tokens), grid_floor(len(self.previous)))
        self.previous = tokens
        return kept


class PrefixCache:
    """A served model's automatic prefix cache: whole ``BLOCK``-token blocks keyed by their prefix, least recently
    used out first once ``capacity`` tokens are held (None: never). A prompt is served up to its first block not
    held; its own blocks are then held (as a server keeps a finished request's blocks until it needs the room)."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.name = "prefix cache, " + ("unbounded" if capacity is None else f"{capacity:,} tokens")

    def serve(self, tokens: list[int]) -> int:
        keys, key = [], 0
        for end in range(BLOCK, len(tokens) + 1, BLOCK):  # a block's key chains its parent's, as vLLM's does
            key = hash((key, tuple(tokens[end - BLOCK:end])))
            keys.append(key)
        served = 0
        for key in keys:
            if key not in self.blocks:
                break
            served += BLOCK
        for key in keys:
            self.blocks[key] = None
            self.blocks.move_to_end(key)
        if self.capacity is not None:
            while len(self.blocks) * BLOCK > self.capacity:
                self.blocks.popitem(last=False)
        return min(served, len(tokens) - 1)  # the last token is always computed: its logits are the answer


def replay(docs: Sequence[Sequence[Call]], order: GradeOrder, cache: LastPrompt | PrefixCache,
           tokens: Callable[[Call, GradeOrder], list[int]]) -> dict[str, Any]:
    """Prompt tokens and those the cache served, in all, for each half of the run's documents (a cache that keeps
    more serves more as the run goes on), and for the calls about a candidate asked about before in the run (what
    a call costs once a run has met most of the corpus)."""
    half = len(docs) // 2
    parts = {"all": [0, 0, 0], "first half": [0, 0, 0], "second half": [0, 0, 0], "candidate met before": [0, 0, 0]}
    met: set[str] = set()
    for i, calls in enumerate(docs):
        for call in in_order(calls, order):
            prompt = tokens(call, order)
            served = cache.serve(prompt)
            again = ("candidate met before",) if call[1] in met else ()
            met.add(call[1])
            for part in ("all", "first half" if i < half else "second half", *again):
                parts[part][0] += 1
                parts[part][1] += len(prompt)
                parts[part][2] += served
    return {part: {"calls": n, "prompt_tokens": p, "served": s, "computed": p - s} for part, (n, p, s) in parts.items()}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    artifact = load_artifact(args.artifact)
    corpus = read_corpus(args.corpus, "beir")
    with tempfile.TemporaryDirectory() as tmp, open_store(args.store, Path(tmp)) as run:
        docs = grading_calls(run)
    # each prompt is built and tokenized once, and replayed through every cache
    tokens = cache(PromptTokens(artifact.program, lambda doc_id: corpus[doc_id].content, ensure_gguf(args.model)))
    caches: list[Callable[[], LastPrompt | PrefixCache]] = [LastPrompt, *(partial(PrefixCache, c) for c in CAPACITIES)]
    results = []
    for make in caches:
        for order in GRADE_ORDERS:
            fresh = make()
            results.append({"cache": fresh.name, "order": order, **replay(docs, order, fresh, tokens)})
    calls = [call for doc in docs for call in doc]
    return {"artifact": f"{artifact.task}/{artifact.version}", "store": _shown(args.store), "model": args.model or
            "embedded default", "documents": len(docs), "queries": len({(d, q) for d, doc in enumerate(docs)
                                                                         for q, _ in doc}),
            "calls": len(calls), "candidates": len({c for _, c in calls}),
            "pairs": len({(d, c) for d, doc in enumerate(docs) for _, c in doc}), "results": results}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        "# Grading prompts a prefix cache serves, by grade order (replayed, no LM call)", "",
        (f"Generated by `python -m benchmarks.prefix_replay` (`make bench-prefix-replay`) from the run store "
         f"`{Path(result['store']).name}` (artifact `{result['artifact']}`): {result['documents']} documents, "
         f"{result['queries']} queries, {result['calls']:,} grading calls about {result['candidates']:,} distinct "
         f"candidates ({result['pairs']:,} distinct document-candidate pairs). Prompts built by the judge's adapter "
         f"and the chat template, tokenized with the {result['model']} model's tokenizer; production's order. "
         "Computed: prompt tokens the model evaluates (a served model's prefill), the rest served from the cache."),
        "",
        "| cache | order | prompt tokens a call | computed a call | served from the cache | computed, document "
        "first / query first | second half of the run: computed a call | a candidate met before: calls, computed "
        "a call |",
        "|---|---|---:|---:|---:|---:|---:|---:|"]
    by = {(r["cache"], r["order"]): r for r in result["results"]}
    for r in result["results"]:
        whole, late, again = r["all"], r["second half"], r["candidate met before"]
        base = by[(r["cache"], "query-first")]["all"]["computed"]
        ratio = f"{whole['computed'] / base:.2f}" if r["order"] == "document-first" and base else "—"
        lines.append(f"| {r['cache']} | {r['order']} | {whole['prompt_tokens'] / whole['calls']:,.0f} | "
                     f"{whole['computed'] / whole['calls']:,.0f} | {whole['served'] / whole['prompt_tokens']:.0%} | "
                     f"{ratio} | {late['computed'] / max(1, late['calls']):,.0f} | "
                     f"{again['calls'] / whole['calls']:.0%}, {again['computed'] / max(1, again['calls']):,.0f} |")
    return lines


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, default=REPO / "benchmarks" / "runs" / "scifact-hybrid-v2.db.gz")
    ap.add_argument("--artifact", type=Path, default=REPO / "artifacts" / "scifact" / "22e653baa2bb")
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl")
    ap.add_argument("--model", default=None, help="embedded model whose tokenizer counts (default: the default's)")
    ap.add_argument("--out", type=Path, default=RESULTS / "prefix_replay")
    args = ap.parse_args(list(argv) if argv is not None else None)
    result = measure(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prefix_replay.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = report(result)
    write_readme(args.out, lines)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
