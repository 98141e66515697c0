"""The ``README.md`` dataset card every ``syntra export`` writes beside its records.

What a reader of the data needs before training on it, in one page: which artifact and generator made it, which
judge labelled it and how well that judge agreed with people on its calibration set (the artifact's calibration
summary), the ``--stats`` quality figures, the corpus, the counts and splits, the columns, and the exact command.
A folder export (``hf``, ``st``) holds it as ``README.md``, where the Hugging Face Hub and ``load_dataset`` look for
it; a JSONL export has it beside the file as ``<out>.README.md``. For ``st`` its YAML header names the Parquet
files of each split, so ``load_dataset(FOLDER)`` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Why ``st`` rows have exactly ``num_negatives`` negatives; the help and the card say the same.
ST_NEGATIVES_RULE = ("a record with fewer negatives repeats its own negatives in rank order until there are n "
                     "(FlagEmbedding's repetition, as syntra train does before it draws)")
ST_POSITIVE_RULE = "the record's first positive (best retrieval rank; with --positives source-first, the source)"


def _pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _num(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def judge_lines(judge: dict[str, Any], relabelled: dict[str, Any] | None) -> list[str]:
    """The judge and its measured agreement, from a run store's ``judge`` description (or the relabelling one)."""
    mode = judge.get("mode", "written")
    if mode != "graded":
        return [f"- Judge: the generator's written 0-3 labels (mode `{mode}`); no calibration against people "
                "is recorded for it."]
    calibration = judge.get("calibration") or {}
    feature = calibration.get("feature", "?")
    lines = [f"- Judge: graded (p(0..3) from the generator), calibrated score `{feature}`"
             + ("" if judge.get("calibrated", True) else " (uncalibrated)")]
    summary = calibration.get("summary") or {}
    if summary:
        cv = (summary.get("cv_binary_kappa") or {}).get(feature)
        lines.append(f"- Judge agreement with people on its calibration set ({summary.get('candidates')} candidates "
                     f"of {summary.get('queries')} queries): binary kappa {_num(summary.get('binary_kappa'))} "
                     f"in-sample, {_num(cv)} cross-validated; three-class kappa "
                     f"{_num(summary.get('three_class_kappa'))}; positive recall "
                     f"{_num(summary.get('positive_recall'))}, precision {_num(summary.get('positive_precision'))}")
    else:
        lines.append("- Judge agreement with people: not recorded in the run's judge calibration")
    if relabelled:
        lines.append(f"- Labels: relabelled from the stored grades with artifact `{relabelled.get('artifact')}` "
                     f"({relabelled.get('changed', 0)} of {relabelled.get('relabelled', 0)} labels changed)")
    return lines


def quality_lines(quality: dict[str, Any]) -> list[str]:
    """The ``syntra export --stats`` data-quality figures, as list items."""
    ranks, written = quality.get("source_ranks") or {}, quality.get("queries") or {}
    lines = [f"- Source document is the first dense hit for {_pct(ranks.get('dense_rank1'))} of queries"
             + (f", the first BM25 hit for {_pct(ranks.get('bm25_rank1'))} (in BM25's top 10 for "
                f"{_pct(ranks.get('bm25_top10'))})" if ranks.get("bm25_rank1") is not None else "")
             + "; a high share means easy queries that repeat their document's words"]
    if ranks.get("bm25_rank1_source_positive") is not None:
        lines.append(f"- The judge calls a query's own document relevant for "
                     f"{_pct(ranks.get('bm25_rank1_source_positive'))} of the queries BM25 finds it first for, "
                     f"{_pct(ranks.get('bm25_lower_source_positive'))} of the others")
    if written:
        lines.append(f"- {_pct(written.get('in_form'))} of queries have the task examples' form; "
                     f"{_pct(written.get('near_duplicates'))} nearly duplicate another query of their document")
    grades = quality.get("grades")
    if grades:
        lines.append(f"- {grades['candidates']} candidates graded, mean E {grades['mean_expected']}, "
                     f"mean label-token mass {grades['mean_label_mass']}")
    return lines


@dataclass(frozen=True)
class CardFacts:
    """What the card says about an export, known before its data is written: the run store's metadata, the judge
    that labelled the records (and the relabelling, if any), the ``--stats`` quality figures, the counts, the format
    and record options, the dev split and the command that made it."""

    meta: dict[str, Any]
    judge: dict[str, Any]
    relabelled: dict[str, Any] | None
    quality: dict[str, Any]
    counts: dict[str, Any]
    fmt: str
    options: dict[str, Any]
    command: str
    dev_split: dict[str, Any] | None


def render_card(facts: CardFacts, *, splits: dict[str, int], files: dict[str, str],
                labels_included: bool | None) -> str:
    """The card's Markdown. ``files``: split -> data file pattern (relative to the card, for ``st``: the YAML
    ``configs`` that let ``load_dataset(FOLDER)`` read it); ``labels_included``: for ``st``, whether the rows carry
    the judge's scores in ``label``."""
    meta, judge, relabelled, quality, counts = facts.meta, facts.judge, facts.relabelled, facts.quality, facts.counts
    fmt, options, command, dev_split = facts.fmt, facts.options, facts.command, facts.dev_split
    artifact = meta.get("artifact") or {}
    generator = meta.get("generator") or {}
    corpus = (meta.get("settings") or {}).get("corpus") or {}
    definition = meta.get("task_definition") or {}
    front = ["---", "tags:", "- syntra", "- synthetic", "- retrieval", "task_categories:", "- sentence-similarity"]
    languages = sorted({definition.get("query_language", "en"), definition.get("document_language", "en")})
    front += ["language:", *(f"- {lang}" for lang in languages)]
    if fmt == "st":
        front += ["configs:", "- config_name: default", "  data_files:"]
        front += [f"  - split: {split}\n    path: {pattern}" for split, pattern in files.items()]
    front.append("---")
    n = options.get("num_negatives")
    lines = [
        *front, "",
        f"# Training records for `{artifact.get('task')}` (syntra export)", "",
        f"Synthetic queries written for documents of a corpus and judged by a language model, exported by "
        f"`syntra export` as `{fmt}`.", "",
        "## What made it", "",
        f"- Artifact: `{artifact.get('task')}/{artifact.get('version')}` (checksum `{artifact.get('checksum')}`)",
        f"- Generator: `{generator.get('model', 'unrecorded')}`",
        *judge_lines(judge, relabelled),
        f"- Corpus: `{corpus.get('path', 'unrecorded')}` ({corpus.get('documents', '?')} documents, fingerprint "
        f"`{str(corpus.get('fingerprint'))[:16]}`)",
        f"- Retrieval instruction: {meta.get('instruction') or 'n/a'}",
        "",
        "## Counts", "",
        f"- {counts['records']} records from {counts['queries']} stored queries; "
        + ", ".join(f"{split} {k}" for split, k in splits.items()),
        f"- {counts['positives']} positives, {counts['negatives']} negatives (before any repetition)",
        "- dropped: " + (", ".join(f"{k} {v}" for k, v in counts["dropped"].items()) or "none"),
        "- documents: " + ", ".join(f"{k} {v}" for k, v in counts["documents"].items()),
    ]
    if dev_split:
        lines.append(f"- dev split: {dev_split['documents']} of {dev_split['of_documents']} source documents "
                     f"(fraction {dev_split['fraction']}, seed {dev_split['seed']}); a document's queries are all in "
                     "one split")
    lines += ["", "## Quality (`syntra export --stats`)", "", *quality_lines(quality), "", "## Columns", ""]
    if fmt == "st":
        lines += [
            "One row per record, only text columns and `label`, in the order sentence-transformers losses read them "
            "(`SentenceTransformerTrainer` trains on it with no `map`):", "",
            "- `anchor`: the query (without the instruction; give it as a prompt to an instruction-tuned encoder)",
            f"- `positive`: {ST_POSITIVE_RULE}",
            f"- `negative_1` .. `negative_{n}`: the record's negatives in rank order; {ST_NEGATIVES_RULE}",
        ]
        if labels_included:
            lines.append(f"- `label`: the judge's calibrated scores of [positive, negative_1 .. negative_{n}] "
                         "(for MarginMSELoss or DistillKLDivLoss; MultipleNegativesRankingLoss ignores it). "
                         "The scores are in the judge's units: scale them for MarginMSELoss (syntra train uses "
                         "--teacher-scale)")
        else:
            lines.append("- no `label` column: not every record carries the judge's score of each text (a written "
                         "judge grades nothing); train with MultipleNegativesRankingLoss")
        lines += ["", "Query and document ids, grades and the other metadata are in the JSONL export "
                      "(`syntra export --format jsonl`)."]
    else:
        lines += ["One record per query: `query`, `instruction`/`prompt`, `pos`/`neg` texts with `pos_scores`/"
                  "`neg_scores` (FlagEmbedding's layout), `pos_ids`/`neg_ids`, `source_doc_id`, `query_id`, and "
                  "`labels`: a list of `{doc_id, rank, label, score, expected, probs, bm25, retrieval_score}` "
                  "for every judged candidate. See docs/export.md."]
    lines += ["", "## Loading", "", "```python"]
    if fmt == "st":
        data_files = ", ".join(f'"{split}": "FOLDER/{pattern}"' for split, pattern in files.items())
        lines += ["from datasets import load_dataset", "", 'ds = load_dataset("FOLDER")  # or:',
                  f'ds = load_dataset("parquet", data_files={{{data_files}}})']
    elif fmt == "hf":
        lines += ["from datasets import load_from_disk", "", 'ds = load_from_disk("FOLDER")']
    else:
        data_files = ", ".join(f'"{split}": "{name}"' for split, name in files.items())
        lines += ["from datasets import load_dataset", "",
                  f'ds = load_dataset("json", data_files={{{data_files}}})']
    lines += ["```", "", "## How it was made", "", "```", command, "```", "",
              "Export options: " + ", ".join(f"{k}={v}" for k, v in options.items()) + ".", ""]
    return "\n".join(lines)
