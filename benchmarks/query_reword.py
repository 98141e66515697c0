"""Can one extra call make an easy query harder? Probes of rewording a production query whose source document is
BM25's first hit, before building any of them into production.

Our SciFact queries find their own document first under BM25 for ~92% of queries; people's SciFact claims for ~55%.
What separates them is measurable in code: people's claims share about one rare term (document frequency <= 20)
with their abstract, ours about two, and once a claim shares two or more, BM25 finds its abstract first almost
always. Each variant below gets the query, the rare document terms it repeats (``document_terms``, rarest first)
and the one term to keep (the blueprint's identifier when the query contains it, else the rarest):

* ``reword``: one call restates the query in a searcher's words, the listed terms said otherwise;
* ``reword-demos``: the same with a stricter instruction ("none of the listed terms may remain") and three worked
  examples written for this probe (invented biology, not SciFact text);
* ``describe``: one call per listed term (at most two) asks for a plain two-to-six-word description of it, and code
  puts the description in the term's place;
* ``hidden``: no rewording: the write step writes the blueprint's query again, from a view of the document in which
  code has replaced every rare word not in the blueprint's identifier by "…", so the writer cannot copy those
  terms (production's write call, its checks and rewrites, on that view);
* ``hidden-all``: as ``hidden``, but the identifier is hidden too (in the view and in the blueprint, which shows
  "…" in its place), so the writer sees no rare word of the document at all and must name the subject in common
  words: does a query without the document's rare terms still ask about its document?
* ``sample-3``: no rewording either: the write step writes the blueprint's query three more times, sampled
  (temperature 0.7, as production's retries), and code keeps the valid one whose source document BM25 ranks lowest
  (fewest copied words on a tie): a hardest-of-k selection, costing k write calls per blueprint.

For each: how many reworded queries pass the write step's checks (form, length, language, copying), the share of
those whose source is still BM25's first hit and the dense index's first hit, the shares of copied and rare shared
words, and the judge's expected grade E of the source document for the old and the new query (does the query still
ask about its document?).

    python benchmarks/query_reword.py --artifact artifacts/scifact/22e653baa2bb \\
        --store ~/syntra-runs/scifact-hybrid.db --queries 12
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import time
from pathlib import Path
from statistics import mean
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import dspy  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "query_reword"
VARIANTS = ("reword", "reword-demos", "describe", "hidden", "hidden-all", "sample-3")
SAMPLES = 3  # writes per blueprint for ``sample-3``
RARE_DF = 20  # a term in at most this many documents is rare


class RewordQuery(dspy.Signature):
    """You restate one search query of a retrieval task in the words of a searcher who has not read the document it
    came from.

    That searcher knows the finding they want to check but not the document's vocabulary. Keep the query's meaning,
    its form and the term to keep. Put each listed document term in other words: its more common name, the broader
    class it belongs to, or a short description. Reword the rest freely, and add no detail the query does not
    contain."""

    query: str = dspy.InputField(desc="the query as written")
    keep: str = dspy.InputField(desc="the one term the searcher would use as written")
    document_terms: str = dspy.InputField(desc="terms the query takes from its document, to say in other words")
    form: str = dspy.InputField(desc="the form every query must have, and example queries of the task")
    reworded: str = dspy.OutputField(desc="the reworded query, one line")


class RewordQueryStrictly(dspy.Signature):
    """You restate one search query of a retrieval task the way a searcher would write it who has not read the
    document it came from.

    That searcher knows the finding they want to check but not the document's vocabulary. Keep the query's finding,
    its form and the term to keep, written as it is. None of the listed document terms may appear in your query:
    put each in plain words, as its everyday name, the kind of thing it is, or what it does. Add no detail the query
    does not contain."""

    query: str = dspy.InputField(desc="the query as written")
    keep: str = dspy.InputField(desc="the one term the searcher would use as written")
    document_terms: str = dspy.InputField(desc="terms the query takes from its document; none may remain")
    form: str = dspy.InputField(desc="the form every query must have, and example queries of the task")
    reworded: str = dspy.OutputField(desc="the reworded query, one line")


class DescribeTermPlainly(dspy.Signature):
    """You explain one technical term of a search query in plain words, for a searcher who does not know the term.

    Answer with a short noun phrase of two to six words that could stand in the query in the term's place. Do not
    use the term itself or any word of it."""

    query: str = dspy.InputField(desc="the query the term appears in")
    term: str = dspy.InputField()
    plain: str = dspy.OutputField(desc="two to six plain words")


#: Worked examples for ``reword-demos`` (invented for this probe).
DEMOS = [
    dspy.Example(query="Knockdown of TMEM16A in HEK293 cells abolishes calcium-activated chloride currents.",
                 keep="TMEM16A", document_terms="HEK293, calcium-activated, chloride", form="",
                 reworded="Without TMEM16A, cultured human cells lose the anion flow that calcium switches on."),
    dspy.Example(query="Metformin reduces hepatic gluconeogenesis via AMPK activation in db/db mice.",
                 keep="Metformin", document_terms="hepatic gluconeogenesis, AMPK, db/db", form="",
                 reworded="Metformin lowers the liver's glucose output through an energy-sensing kinase in obese "
                          "diabetic mice."),
    dspy.Example(query="Daphnia magna exposed to polystyrene microplastics show reduced fecundity.",
                 keep="microplastics", document_terms="Daphnia magna, polystyrene, fecundity", form="",
                 reworded="Water fleas exposed to microplastics have fewer offspring."),
]


class DocumentTerms:
    """Document frequencies over the corpus: which of a query's words are rare terms of its document."""

    def __init__(self, corpus: Any) -> None:
        from syntra_dspy.query_form import tokens

        self._tokens = tokens
        self.df: dict[str, int] = {}
        for doc in corpus:
            for token in set(tokens(doc.content)):
                self.df[token] = self.df.get(token, 0) + 1

    def hide_rare(self, document: str, keep: str) -> str:
        """``document`` with every rare word whose tokens are not all in ``keep`` replaced by "…"."""
        kept = set(self._tokens(keep))

        def hide(match: re.Match) -> str:
            toks = self._tokens(match.group(0))
            rare = toks and min(self.df.get(t, 0) for t in toks) <= RARE_DF
            return "…" if rare and not all(t in kept for t in toks) else match.group(0)

        return re.sub(r"[\w\-()]+", hide, document)

    def rare_shared(self, query: str, document: str) -> list[str]:
        """The query's words (as written) whose tokens all occur in ``document`` and are rare, rarest first."""
        in_doc = set(self._tokens(document))
        found: dict[str, int] = {}
        for word in re.findall(r"[\w\-()]+", query):
            toks = self._tokens(word)
            if toks and all(t in in_doc for t in toks):
                df = min(self.df.get(t, 0) for t in toks)
                if df <= RARE_DF:
                    found.setdefault(word, df)
        return sorted(found, key=lambda w: (found[w], w))


def reword(variant: str, query: str, keep: str, terms: list[str], form: str) -> str:
    """The variant's reworded query ('' when the model gave nothing usable)."""
    if variant == "describe":
        text = query
        for term in terms[:2]:
            pred = dspy.Predict(DescribeTermPlainly)(query=query, term=term, config={"max_tokens": 30})
            plain = " ".join(str(pred.plain or "").split()).strip().strip('".')
            if plain and term.lower() not in plain.lower():
                text = re.sub(re.escape(term), plain, text, count=1, flags=re.IGNORECASE)
        return text
    step = dspy.Predict(RewordQuery if variant == "reword" else RewordQueryStrictly)
    if variant == "reword-demos":
        step.demos = DEMOS
    pred = step(query=query, keep=keep or "(none)", document_terms=", ".join(terms) or "(none)", form=form,
                config={"max_tokens": 120})
    return " ".join(str(pred.reworded or "").split()).strip().strip('"')


def hardest_of(program: Any, lm: Any, doc: str, doc_id: str, blueprint: str, lexical: Any) -> str:
    """Of ``SAMPLES`` sampled writes of the blueprint's query, the one BM25 finds its source lowest for."""
    from syntra_dspy.errors import LMOutputError
    from syntra_dspy.query_form import copied_share
    from syntra_dspy.signatures.types import Blueprint

    written = []
    for n in range(1, SAMPLES + 1):
        with dspy.context(lm=lm.copy(temperature=0.7, rollout_id=100 + n)):
            try:
                written += program.write_queries(doc, [Blueprint.model_validate(json.loads(blueprint))])
            except LMOutputError:
                pass
    if not written:
        return ""
    def rank(q: str) -> int:
        found = lexical.rank(q, doc_id)
        return 10**6 if found is None else found  # not among BM25's hits at all: the hardest

    return max(written, key=lambda q: (rank(q), -copied_share(q, doc)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--store", required=True, help="a production run store of the artifact (recorded BM25 ranks)")
    parser.add_argument("--queries", type=int, default=12, help="first N queries (by id) whose source is BM25 rank 1")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out-name", default="query_reword", help="file stem of the JSON and Markdown results")
    args = parser.parse_args()

    from syntra_dspy.query_form import copied_share
    from judge_agreement import load  # the artifact's inputs and its own generator, loaded once
    from syntra_dspy.retrieval import IndexCandidates, LexicalSourceRank
    from syntra_dspy.errors import LMOutputError
    from syntra_dspy.programs.validation import query_problem
    from syntra_dspy.signatures.types import Blueprint

    inputs, lm = load(args.artifact)
    program, corpus = inputs.artifact.program, inputs.corpus
    lexical = LexicalSourceRank(corpus)
    dense = IndexCandidates(corpus, inputs.encoder, inputs.index)
    terms_of = DocumentTerms(corpus)
    form = program.query_form()
    form_text = program.rewrite_form()
    rows = sqlite3.connect(args.store).execute(
        "SELECT q.text, q.doc_id, q.blueprint FROM queries q JOIN query_ranks r USING (query_id) "
        "WHERE r.bm25_source_rank = 0 ORDER BY q.query_id LIMIT ?", (args.queries,)).fetchall()

    def dense_first(text: str, doc_id: str) -> bool:
        top = dense.candidates(text, 1)
        return bool(top) and top[0][0] == doc_id

    summary: dict[str, Any] = {"artifact": inputs.artifact.version, "queries": len(rows), "variants": {}}
    old_e: dict[str, float | None] = {}
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for variant in args.variants:
            results = []
            started = time.perf_counter()
            for text, doc_id, blueprint in rows:
                doc = corpus[doc_id].content
                identifier = json.loads(blueprint).get("identifier", "")
                rare = terms_of.rare_shared(text, doc)
                keep = identifier if identifier and identifier.lower() in text.lower() else (rare[0] if rare else "")
                terms = [w for w in rare if w.lower() not in keep.lower()]
                try:
                    if variant == "hidden":
                        (new,) = program.write_queries(terms_of.hide_rare(doc, identifier),
                                                       [Blueprint.model_validate(json.loads(blueprint))])
                    elif variant == "hidden-all":
                        shown = {**json.loads(blueprint), "identifier": "…"}
                        (new,) = program.write_queries(terms_of.hide_rare(doc, ""), [Blueprint.model_validate(shown)])
                    elif variant == "sample-3":
                        new = hardest_of(program, lm, doc, doc_id, blueprint, lexical)
                    else:
                        new = reword(variant, text, keep, terms, form_text)
                except (ValueError, dspy.utils.exceptions.AdapterParseError, LMOutputError):
                    new = ""
                problem = query_problem(new, language="en", document=doc, form=form) if new else ("no answer", 0)
                if text not in old_e:
                    old_e[text] = program.grade_candidate(text, doc).expected
                results.append({
                    "query": text, "keep": keep, "terms": terms, "reworded": new,
                    "problem": problem[0] if problem else None, "changed": new != text,
                    "bm25_rank": lexical.rank(new, doc_id) if new else None,
                    "dense_first_old": dense_first(text, doc_id),
                    "dense_first": dense_first(new, doc_id) if new else None,
                    "copied_old": round(copied_share(text, doc), 3),
                    "copied": round(copied_share(new, doc), 3) if new else None,
                    "rare_old": len(rare), "rare": len(terms_of.rare_shared(new, doc)) if new else None,
                    "E_old": old_e[text], "E": program.grade_candidate(new, doc).expected if new else None})
                print(variant, json.dumps(results[-1], ensure_ascii=False), flush=True)
            valid = [r for r in results if not r["problem"]]

            def avg(key: str, rows: list[dict] = valid) -> float | None:
                values = [float(r[key]) for r in rows if r[key] is not None]
                return round(mean(values), 3) if values else None

            summary["variants"][variant] = {
                "valid": len(valid), "changed": sum(r["changed"] for r in valid),
                "bm25_first": round(mean(r["bm25_rank"] == 0 for r in valid), 3) if valid else None,
                "dense_first_old": avg("dense_first_old"), "dense_first": avg("dense_first"),
                "copied_old": avg("copied_old"), "copied": avg("copied"), "rare_old": avg("rare_old"),
                "rare": avg("rare"), "E_old": avg("E_old"), "E": avg("E"),
                "seconds_per_query": round((time.perf_counter() - started) / max(1, len(rows)), 1), "rows": results}
    lines = ["# Rewording easy queries: one extra call per query", "",
             f"Artifact `{summary['artifact']}` (its own generator and judge), the first {len(rows)} queries of run "
             f"store `{Path(args.store).name}` whose source document is BM25's first hit (so the old BM25 share is "
             "100%).", "",
             "| variant | valid | changed | BM25 first | dense first (old → new) | copied words (old → new) | "
             "rare shared terms (old → new) | judge E of source (old → new) | s/query |",
             "|---|---:|---:|---:|---|---|---|---|---:|"]
    for name, v in summary["variants"].items():
        lines.append(f"| {name} | {v['valid']}/{len(rows)} | {v['changed']} | {v['bm25_first']} | "
                     f"{v['dense_first_old']} → {v['dense_first']} | {v['copied_old']} → {v['copied']} | "
                     f"{v['rare_old']} → {v['rare']} | {v['E_old']} → {v['E']} | {v['seconds_per_query']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{args.out_name}.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    (args.results / f"{args.out_name}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
