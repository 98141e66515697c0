"""A cross-language dev set from a monolingual known-item set: each title, machine-translated, becomes a query.

Where no human cross-language judgments exist (NeuCLIRTech's topics are out of reach offline), a BEIR folder whose
queries are the documents' own titles (``csl-zh``: Chinese titles, each judged against its own abstract) gives a
known-item set in another language once the generator translates the titles. What it can show: whether a model
finds a paper from a translated title of it, across the language gap (nDCG@20, MRR@10). What it cannot: graded
relevance, topics with several relevant papers, or how people phrase requests; and translations carry the
generator's errors. The provenance file says so, with the exact prompt and model.

The output is a BEIR folder (``queries.jsonl``, ``qrels/<split>.tsv``, ``corpus.jsonl`` linked to the source's) plus
``provenance.json``; translations are appended to ``translations.jsonl`` as they are made, so a rerun resumes.
"""

from __future__ import annotations

import json
import logging
import os
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dspy

from syntra_dspy.errors import ConfigError, InputError, LMOutputError
from syntra_dspy.evaluation.datasets import read_beir_queries
from syntra_dspy.evaluation.trec import read_qrels
from syntra_dspy.languages import language_name
# Upward, on purpose: a dev set's queries are translated by the same typed translation step production uses
# (one prompt, recorded in the provenance file), not by a second one written here.
from syntra_dspy.programs.translation import QueryTranslator

logger = logging.getLogger(__name__)

KIND = "syntra-dspy/translated-devset"
LOG_FILE, PROVENANCE_FILE = "translations.jsonl", "provenance.json"
WHAT_IT_IS = ("machine-translated, not human: each query is a document's own title translated by the generator "
              "named here, checked only for its script (language) in code; a known-item set with one relevant "
              "document per query")
CAN_SHOW = ("whether a retriever finds a paper from a translated title of it, across the language gap "
            "(nDCG@20, MRR@10 with one relevant document per query)")
CANNOT_SHOW = ("graded relevance, topics with several relevant papers, or how people phrase search requests; titles "
               "share wording with their abstracts, and translation errors are the generator's")


@dataclass
class DevSetSummary:
    """What a build wrote and what it left out (and why)."""

    out: Path
    queries: int = 0
    translated_now: int = 0  # titles sent to the generator by this call (the rest were in the log)
    excluded: list[str] = field(default_factory=list)  # query ids judged against a few-shot document
    failed: dict[str, str] = field(default_factory=dict)  # query id -> why its translation was refused


def few_shot_documents(task: str | Path) -> list[str]:
    """The corpus ids of a task file's few-shot positives (those given by id)."""
    from syntra_dspy.task import load_task

    return [ex.positive_id for ex in load_task(task).examples if ex.positive_id]


def rendered_prompt(translator: QueryTranslator) -> list[dict[str, str]]:
    """The messages the generator receives, with ``{title}`` where each title goes: the exact prompt."""
    signature = translator.translate.signature
    target = f"{language_name(translator.target_language)} ({translator.target_language})"
    return dspy.JSONAdapter().format(signature, demos=[],
                                     inputs={"text": "{title}", "target_language": target, "retry_note": ""})


def _read_log(path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            done[str(row["query_id"])] = row
        except (ValueError, KeyError, TypeError):
            raise InputError("not a translation record", path=path, line=lineno,
                             hint="delete the file to translate again") from None
    return done


def translate_titles(source: str | Path, out: str | Path, *, lm: dspy.LM, lm_description: dict[str, Any],
                     target_language: str = "en", split: str = "test", exclude_docs: Iterable[str] = (),
                     limit: int | None = None, seed: int = 0,
                     progress: Callable[[int, int], None] | None = None) -> DevSetSummary:
    """Translate the titles of the BEIR folder ``source`` (its queries) into ``target_language`` with ``lm`` and write
    the dev set to ``out``. Queries judged against a document in ``exclude_docs`` (a task's few-shot positives) are
    left out; ``limit`` takes a seeded sample of the rest. A title whose translation stays invalid after the
    translator's retries is left out and listed in the provenance file with its error."""
    src, dest = Path(source), Path(out)
    queries = read_beir_queries(src / "queries.jsonl")
    qrels = read_qrels(src / "qrels" / f"{split}.tsv")
    corpus = src / "corpus.jsonl"
    if not corpus.is_file():
        raise InputError("the source has no corpus.jsonl", path=corpus, hint="give a BEIR folder")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be at least 1, got {limit}", field="limit")
    banned = set(exclude_docs)
    judged = sorted(q for q in qrels if q in queries)
    excluded = [q for q in judged if banned & set(qrels[q])]
    pool = [q for q in judged if q not in set(excluded)]
    chosen = sorted(random.Random(seed).sample(pool, limit)) if limit is not None and limit < len(pool) else pool
    if not chosen:
        raise ConfigError("no judged query is left to translate", path=src, hint="check the split and exclusions")
    if dest.exists() and not (dest / LOG_FILE).is_file() and any(dest.iterdir()):
        raise ConfigError("exists and is not a dev set this command wrote; refusing to write into it", path=dest,
                          hint="give a new or empty folder")
    (dest / "qrels").mkdir(parents=True, exist_ok=True)
    translator = QueryTranslator(target_language)
    log_path = dest / LOG_FILE
    done = _read_log(log_path)
    made_by = {"target_language": target_language, "instructions_sha256": translator.describe()["instructions_sha256"],
               "model": lm_description.get("model")}
    other = next((row for row in done.values() if {k: row.get(k) for k in made_by} != made_by), None)
    if other is not None:
        raise ConfigError(f"{LOG_FILE} holds translations made with another model, prompt or language "
                          f"(query {other['query_id']}); they are not reused", path=dest, hint="give a new --out")
    summary = DevSetSummary(out=dest, excluded=excluded)
    with log_path.open("a", encoding="utf-8") as log, dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for n, qid in enumerate(chosen, 1):
            if qid not in done:
                row: dict[str, Any] = {"query_id": qid, "source": queries[qid], **made_by}
                try:
                    row["text"] = translator(queries[qid])
                except LMOutputError as exc:
                    row["error"] = exc.message
                log.write(json.dumps(row, ensure_ascii=False) + "\n")
                log.flush()
                done[qid] = row
                summary.translated_now += 1
            if progress is not None:
                progress(n, len(chosen))
    kept = [q for q in chosen if "text" in done[q]]
    summary.failed = {q: done[q]["error"] for q in chosen if "text" not in done[q]}
    summary.queries = len(kept)
    _write_beir(dest, kept, done, qrels, corpus, split)
    provenance = {
        "kind": KIND, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "what": WHAT_IT_IS, "can_show": CAN_SHOW, "cannot_show": CANNOT_SHOW,
        "source": {"path": str(src.resolve()), "split": split, "judged_queries": len(judged),
                   "query_language": "the source's (titles)", "target_language": target_language},
        "model": lm_description,
        "translation": {**translator.describe(), "prompt_messages": rendered_prompt(translator),
                        "checks": "syntra_dspy.programs.translation.check_translation: one line, non-empty, the "
                                  "target language's script, at most 3x the title's length",
                        "retries": translator.max_retries},
        "selection": {"limit": limit, "seed": seed, "chosen": len(chosen)},
        "excluded": {"documents": sorted(banned), "queries": excluded},
        "failed": summary.failed,
        "queries": len(kept),
    }
    (dest / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def _write_beir(dest: Path, kept: Sequence[str], done: dict[str, dict[str, Any]], qrels: dict[str, dict[str, int]],
                corpus: Path, split: str) -> None:
    lines = [json.dumps({"_id": q, "text": done[q]["text"], "source_text": done[q]["source"]}, ensure_ascii=False)
             for q in kept]
    _atomic_write(dest / "queries.jsonl", "".join(f"{line}\n" for line in lines))
    rows = [f"{q}\t{d}\t{g}\n" for q in kept for d, g in sorted(qrels[q].items())]
    _atomic_write(dest / "qrels" / f"{split}.tsv", "query-id\tcorpus-id\tscore\n" + "".join(rows))
    link = dest / "corpus.jsonl"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(corpus.resolve(), link)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
