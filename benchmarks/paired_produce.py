"""Production before and after a setting, on the same documents with the same artifact: records per LM-hour, LM calls,
prompt and generated tokens per record, grading calls the judge skipped, and the labels and records that differ.

Each side runs ``syntra produce`` in this process into a fresh run store (same artifact, same selected documents,
DSPy's cache off) and is exported with the default options. The sides take turns, one document at a time, the first
side first on odd documents and last on even ones, so a drift of the machine's speed weighs on both
(``--one-side-at-a-time`` runs each side whole, as ``cascade_grades=@before`` needs). LM time is what the run store's
``usage`` table says the calls took. The generator is:

* ``scripted`` (default): the bundled scripted brain behind a loopback OpenAI-compatible server that answers after
  ``--latency`` seconds, as a vLLM server would be reached (``hosted_vllm/...@URL``), with the mini task compiled by
  the scripted brain with a graded judge (or ``--artifact``). The ratios are what a served model's user saves in
  calls and tokens; the seconds are the set latency's.
* ``embedded[:NAME]``: the embedded model in this process, e.g. with the SciFact artifact: about 2 minutes a
  document on 2 cores, so 8 documents take ~35 minutes a side.
* ``MODEL@URL``: any served model.

    python -m benchmarks.paired_produce --after judge_cascade=lossless \\
        --after judge_cascade=margin,cascade_grades=@before
    python -m benchmarks.paired_produce --generator embedded --artifact artifacts/scifact/22e653baa2bb \\
        --docs 8 --queries-per-doc 2 --top-k 8 --concurrency 1 \\
        --after judge_cascade=margin,cascade_grades=benchmarks/runs/scifact-hybrid-v2.db \\
        --out benchmarks/results/paired_produce/scifact-embedded

``--before`` and each ``--after`` are ``SETTING=VALUE[,SETTING=VALUE]`` of ``syntra produce`` (``ProduceConfig``
field names); ``cascade_grades=@before`` names the first run's store, whose grades then teach a margin;
``engine_build=portable|auto|NAME`` picks the build of the embedded engine's libraries a side loads (each turn then
runs in a child process). Every row is compared with the first (before) run: its labels on the candidates both runs
judged (same query text, same document), and its exported records byte for byte. Writes ``README.md`` (generated
part; what follows its end marker is kept), ``paired_produce.json`` and ``documents.txt`` (the documents drawn, for a
later run's ``--exclude-docs``) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

try:  # python -m benchmarks.paired_produce (make bench-paired-produce)
    from benchmarks.common import (
        FAKE_SERVER,
        MINI_TASK,
        RESULTS,
        offline_environment,
        parse_value,
        write_readme,
    )
except ModuleNotFoundError:  # python benchmarks/paired_produce.py: this folder is first on the path
    from common import FAKE_SERVER, MINI_TASK, RESULTS, offline_environment, parse_value, write_readme  # type: ignore

offline_environment()


def settings_of(text: str) -> dict[str, Any]:
    """``judge_cascade=margin,cascade_coverage=0.9`` -> ``{"judge_cascade": "margin", "cascade_coverage": 0.9}``."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise SystemExit(f"a setting is SETTING=VALUE, got {part!r}")
        out[key.strip().replace("-", "_")] = parse_value(value.strip())
    return out


def compile_mini(root: Path, feature: str) -> Path:
    """The mini task compiled with the scripted brain for every role and a graded judge of score ``feature``.

    Scored by E alone, the first annotation instruction misses the compile's kappa target, so the loop refines it and
    the scripted judge then grades by the words a candidate shares with the query (production finds positives); the
    calibration is then refitted with ``feature`` on the grades the artifact keeps (``syntra artifacts recalibrate``,
    no call), which also lets a margin cascade learn from them. Compiled once per ``root``: a rerun with the same
    ``--work`` takes the same artifact, so the stores made from it resume."""
    marker = root / f"artifact-{feature}.txt"
    if marker.is_file() and Path(marker.read_text(encoding="utf-8").strip()).is_dir():
        return Path(marker.read_text(encoding="utf-8").strip())
    from syntra_dspy.compiler import compile_task
    from syntra_dspy.lm.roles import LMRoles
    from syntra_dspy.optimizers import CompileSettings
    from syntra_dspy.production.recalibrate import recalibrate_artifact
    from syntra_dspy.testing import scripted_lm

    lm = scripted_lm()
    settings = CompileSettings(sample_docs=3, selection_target=20, judge="graded", judge_feature="expected")
    path = compile_task(MINI_TASK, out=root / "artifacts", lms=LMRoles(generator=lm, verifier=lm, refiner=lm),
                        index_dir=root / "index", settings=settings).path
    if feature != "expected":
        path = recalibrate_artifact(path, root / "artifacts", feature=feature)
    marker.write_text(f"{path}\n", encoding="utf-8")
    return path


@contextmanager
def generator_for(name: str, latency: float, artifact: Path) -> Iterator[Any]:
    """What ``produce`` is given as its generator, and for ``scripted`` the loopback server that answers. A served
    model is reached without DSPy's cache (``build_lm`` leaves it off for an ``api_base``); the embedded one is built
    here with the artifact's sampling settings and the cache off, so neither side answers from the other's calls."""
    if name != "scripted":
        if name.startswith("embedded"):
            from syntra_dspy.artifacts import load_artifact
            from syntra_dspy.lm.roles import build_lm
            from syntra_dspy.production.setup import resolve_generator_spec

            spec = resolve_generator_spec(load_artifact(artifact).meta, name)
            yield build_lm(spec, role="generator", cache=False)
        else:
            yield [name]
        return
    server = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        yield [f"hosted_vllm/scripted@{server.stdout.readline().strip()}"]  # type: ignore[union-attr]
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=10)


def held_out_corpus(corpus: Path, stores: Sequence[Path], work: Path, listed: set[str] = frozenset()) -> Path:
    """A copy of the JSONL ``corpus`` under ``work`` without the documents the run ``stores`` plan (gzipped or not)
    and those ``listed``."""
    import gzip
    import shutil

    planned: set[str] = set(listed)
    for store in stores:
        db = store
        if store.suffix == ".gz":
            db = work / store.stem
            with gzip.open(store, "rb") as src, db.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            planned |= {doc_id for (doc_id,) in conn.execute("SELECT doc_id FROM documents")}
    out = work / "held-out-corpus.jsonl"
    kept = [line for line in corpus.read_text(encoding="utf-8").splitlines()
            if line.strip() and str(json.loads(line)["_id"]) not in planned]
    out.write_text("\n".join(kept) + "\n", encoding="utf-8")
    print(f"held-out corpus: {len(kept)} documents ({len(planned)} left out)", flush=True)
    return out


def _stem(side: int, label: str) -> str:
    """The side's store name: its place and label, one file name (a path in the label, e.g. ``artifact=``, is
    flattened)."""
    flat = label.replace(' ', '_').replace('=', '-').replace(',', '_').replace('/', '_').replace('\\', '_')
    return f"{side}-{flat[:60]}"


def run_side(side: int, label: str, settings: dict[str, Any], artifact: Path, work: Path, generator: Any,
             common: dict[str, Any]) -> dict[str, Any]:
    """One production run into its store under ``work``, exported: its counts and costs. The store is named by the
    side's place, so the same command with the same ``--work`` resumes an interrupted side (its finished documents
    are kept) and counts the LM time of every session."""
    from syntra_dspy.production import produce

    store = work / f"{_stem(side, label)}.db"
    wall = time.perf_counter()
    produce(side_artifact(settings, artifact), store, generator=generator, progress=False, **common,
            **produce_settings(settings))
    return side_row(label, settings, store, wall=time.perf_counter() - wall)


def _planned(store: Path) -> int:
    """How many documents a side's store plans (0: no store yet)."""
    if not store.is_file():
        return 0
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])


#: A side setting that is not ``produce``'s: which build of the embedded engine's libraries the side loads
#: (``portable``, ``auto`` or a variant's name: syntra_dspy/lm/llamacpp/variants.py). A process loads one build, so
#: when a side names one, every side's turns run in child processes (the others with ``auto``, production's default).
ENGINE_BUILD = "engine_build"
#: A side setting that is not ``produce``'s either: the artifact that side produces from (default ``--artifact``), for a
#: change that lives in the artifact, e.g. a judge calibrated for another grade order.
ARTIFACT = "artifact"
_NOT_PRODUCE = (ENGINE_BUILD, ARTIFACT)


def side_artifact(settings: dict[str, Any], default: Path) -> Path:
    """The artifact a side produces from: its ``artifact=`` setting, else ``default``."""
    return Path(settings[ARTIFACT]) if ARTIFACT in settings else default


def produce_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A side's settings that ``produce`` takes (without :data:`ENGINE_BUILD` and :data:`ARTIFACT`)."""
    return {key: v for key, v in settings.items() if key not in _NOT_PRODUCE}


def run_in_turn(sides: list[tuple[str, dict[str, Any]]], artifact: Path, work: Path,
                generator: Callable[[], AbstractContextManager[Any]], common: dict[str, Any],
                child: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every side one document at a time, in turn, the first side first on odd documents and last on even ones
    (ABBA): a machine that slows down or speeds up during the run (6-7% between the halves of one SciFact run, on the
    same calls) then weighs on both sides alike, not on the side that ran second. Each side's store plans one more
    document each turn (the diverse selection of k+1 documents starts with that of k); an interrupted run resumes.
    ``child`` (the generator's name and latency): each turn runs in a child process with its side's engine build."""
    from syntra_dspy.production import produce

    stores = [work / f"{_stem(side, label)}.db" for side, (label, _) in enumerate(sides, start=1)]
    walls = [0.0] * len(sides)
    for k in range(1, int(common["docs"]) + 1):
        order = range(len(sides)) if k % 2 else reversed(range(len(sides)))
        for i in order:
            kwargs = {**common, "docs": max(k, _planned(stores[i])), **produce_settings(sides[i][1])}
            used = side_artifact(sides[i][1], artifact)
            started = time.perf_counter()
            if child is not None:
                run_turn_in_child(used, stores[i], kwargs, build=str(sides[i][1].get(ENGINE_BUILD, "auto")), **child)
            else:
                with generator() as lm:
                    produce(used, stores[i], generator=lm, progress=False, **kwargs)
            walls[i] += time.perf_counter() - started
        print(f"document {k} of {common['docs']} done on every side", flush=True)
    return [side_row(label, settings, store, wall=wall)
            for (label, settings), store, wall in zip(sides, stores, walls)]


def run_turn_in_child(artifact: Path, store: Path, kwargs: dict[str, Any], *, build: str, generator: str,
                      latency: float) -> None:
    """One side's turn in a child process that loads ``build`` of the engine's libraries (``--turn``)."""
    import os

    from syntra_dspy.lm.llamacpp import variants

    env = {key: v for key, v in os.environ.items() if key != variants.LIB_PATH_ENV}
    env[variants.CHOICE_ENV] = build
    turn = {"artifact": str(artifact), "store": str(store), "kwargs": kwargs, "generator": generator,
            "latency": latency, "build": build}
    subprocess.run([sys.executable, "-m", "benchmarks.paired_produce", "--turn", json.dumps(turn, default=str)],
                   env=env, check=True)


def turn(spec: str) -> int:
    """``--turn``: run one side's turn as :func:`run_turn_in_child` asked, refusing a build other than the one named."""
    from syntra_dspy.lm.llamacpp import engine_check
    from syntra_dspy.production import produce

    turn = json.loads(spec)
    artifact = Path(turn["artifact"])
    with generator_for(turn["generator"], float(turn["latency"]), artifact) as lm:
        engine = getattr(lm, "engine", None)
        if engine is not None and hasattr(engine, "load"):
            engine.load()  # chooses the build now, so a fallback is caught before any call
            used = engine_check.loaded_build()
            if turn["build"] != "auto" and used != turn["build"]:
                raise SystemExit(f"asked for the {turn['build']} engine build, loaded {used}")
            print(f"engine build: {used}", flush=True)
        produce(artifact, Path(turn["store"]), generator=lm, progress=False, **turn["kwargs"])
    return 0


def side_row(label: str, settings: dict[str, Any], store: Path, *, wall: float | None = None) -> dict[str, Any]:
    """A side's figures, all read from its run store (exported again with the default options): what the report
    says of it, so a report can be made again from the stores alone (``--report-only``)."""
    from syntra_dspy.copying import longest_copy
    from syntra_dspy.production import compute_stats, export_records
    from syntra_dspy.production.store import RunStore

    out = store.with_suffix(".jsonl")
    exported = export_records(store, out, overwrite=True)
    with RunStore.open(store, readonly=True) as run:
        calls = run.judge_skips()
        usage = run.usage()  # every session's, an interrupted side's earlier ones included
        checks = run.write_checks()
        per_document = {doc: {"status": status, "seconds": seconds, "queries": n}
                        for doc, status, seconds, n in run.rows(
                            "SELECT doc_id, status, seconds, n_queries FROM documents WHERE status != 'pending' "
                            "ORDER BY position")}
        written = run.rows("SELECT q.text, t.content FROM queries q JOIN texts t USING (doc_id) ORDER BY q.query_id")
    copied = sorted(longest_copy(query, text)[1] for query, text in written)  # how close to its abstract
    for row in (json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()):
        doc = row.get("source_doc_id")
        if doc in per_document:
            per_document[doc]["records"] = per_document[doc].get("records", 0) + 1
    seconds = sum(u["seconds"] for u in usage.values())
    records = exported.records
    per = (lambda v: v / records) if records else (lambda v: None)
    stats = compute_stats(store)
    documents = sum(d["status"] in ("done", "partial") for d in per_document.values())
    return {
        "label": label, "settings": settings, "store": str(store), "export": str(out),
        "documents": documents, "queries": stats["queries"],
        "records": records, "lm_seconds": seconds, "wall_seconds": wall,
        "records_per_lm_hour": records / (seconds / 3600) if seconds else None,
        "calls": sum(u["calls"] for u in usage.values()),
        "calls_per_record": per(sum(u["calls"] for u in usage.values())),
        "prompt_tokens_per_record": per(sum(u["prompt_tokens"] for u in usage.values())),
        "evaluated_prompt_tokens_per_record": per(sum(evaluated_tokens(u) for u in usage.values())),
        "generated_tokens_per_record": per(sum(u["completion_tokens"] for u in usage.values())),
        "by_step": {stage: {k: u.get(k, 0) for k in ("calls", "prompt_tokens", "cached_prompt_tokens",
                                                     "completion_tokens", "seconds")}
                    for stage, u in usage.items()},
        "grading_calls": calls, "judge": stats["quality"]["judge"].get("cascade"),
        "writing": checks, "per_document": per_document,
        "bm25_rank1": stats["quality"]["source_ranks"].get("bm25_rank1"), "copied_words": copied,
    }


def paired_documents(before: dict[str, Any], after: dict[str, Any], *, resamples: int = 2000,
                     seed: int = 0) -> dict[str, Any]:
    """Per-document wall seconds (the store's; LM time at concurrency 1) after/before, over the documents both
    sides finished: the ratio of the sums, its bootstrap 95% interval over documents, and a Wilcoxon signed-rank test
    of the per-document differences (a document is the unit that was drawn; one side's total alone hides how much
    one document moves it)."""
    import numpy as np

    a, b = before.get("per_document") or {}, after.get("per_document") or {}
    docs = [d for d in a if d in b and a[d]["seconds"] is not None and b[d]["seconds"] is not None]
    if len(docs) < 2:
        return {"documents": len(docs)}
    x = np.array([a[d]["seconds"] for d in docs], dtype=float)
    y = np.array([b[d]["seconds"] for d in docs], dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(docs), size=(resamples, len(docs)))
    ratios = y[picks].sum(axis=1) / x[picks].sum(axis=1)
    out: dict[str, Any] = {
        "documents": len(docs), "seconds_before": float(x.sum()), "seconds_after": float(y.sum()),
        "ratio": float(y.sum() / x.sum()), "ratio_ci95": [float(np.quantile(ratios, 0.025)),
                                                          float(np.quantile(ratios, 0.975))],
        "records_before": sum(a[d].get("records", 0) for d in docs),
        "records_after": sum(b[d].get("records", 0) for d in docs),
    }
    try:
        from scipy.stats import wilcoxon

        out["wilcoxon_p"] = float(wilcoxon(y, x).pvalue) if np.any(y != x) else 1.0
    except ImportError:  # scipy is optional here: the interval still says it
        out["wilcoxon_p"] = None
    return out


def compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Labels of the candidates both runs judged (same query text and document) and whether the records match."""
    def labels(path: str) -> dict[tuple[str, str], int]:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            return {(q, d): label for q, d, label in conn.execute(
                "SELECT q.text, c.doc_id, c.label FROM candidates c JOIN queries q USING (query_id) "
                "WHERE c.label IS NOT NULL")}

    a, b = labels(before["store"]), labels(after["store"])
    common = set(a) & set(b)
    changed = sum(a[k] != b[k] for k in common)
    same_bytes = Path(before["export"]).read_bytes() == Path(after["export"]).read_bytes()
    return {"common_candidates": len(common), "labels_changed": changed, "records_identical": same_bytes,
            "same_ids": _ids(before["export"]) == _ids(after["export"])}


def _ids(path: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return [(r["query"], tuple(r["pos_ids"]), tuple(r["neg_ids"])) for r in rows]


def _shown_args() -> str:
    """The command line as run, without the folders that only this machine has (``--work``, ``--out``)."""
    args, shown = sys.argv[1:], []
    while args:
        arg = args.pop(0)
        if arg in ("--work", "--out"):
            args = args[1:]
        elif not arg.startswith(("--work=", "--out=")) and arg not in ("--report-only", "--no-write"):
            shown.append(arg)
    return " ".join(shown)


def _changed(cmp: dict[str, Any]) -> str:
    return "—" if not cmp else f"{cmp['labels_changed']} of {cmp['common_candidates']}"


def _f(value: Any, spec: str = ".1f") -> str:
    return "—" if value is None else format(value, spec)


def report(args: argparse.Namespace, artifact: Path, rows: list[dict[str, Any]]) -> list[str]:
    base = rows[0]
    lines = [
        "# Production before and after a setting, paired (same artifact, same documents)", "",
        (f"Generated {time.strftime('%Y-%m-%d')} by `python -m benchmarks.paired_produce {_shown_args()}` "
        f"(artifact `{artifact.parent.name}/{artifact.name}`, generator "
        f"`{args.generator}`{f' at {args.latency} s a call' if args.generator == 'scripted' else ''}, "
        f"{args.docs} documents, {args.queries_per_doc} queries each, top {args.top_k}, concurrency "
        f"{args.concurrency or 'default'}). LM time: the run store's `usage` seconds. Ratios against the first row."
         + (" This report was made again from the run's stores (`--report-only`)." if args.report_only else "")),
        "", ("| run | records | LM h | records/LM-hour | ratio | LM calls | calls/record | prompt tokens/record | "
             "ratio | evaluated/record | ratio | generated tokens/record | grading calls skipped | labels changed | "
             "records |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        cmp = row.get("compare") or {}
        rate = row["records_per_lm_hour"]
        ratio = rate / base["records_per_lm_hour"] if rate and base["records_per_lm_hour"] else None
        tokens = row["prompt_tokens_per_record"]
        tratio = tokens / base["prompt_tokens_per_record"] if tokens and base["prompt_tokens_per_record"] else None
        evaluated, base_evaluated = row.get("evaluated_prompt_tokens_per_record"), \
            base.get("evaluated_prompt_tokens_per_record")
        eratio = evaluated / base_evaluated if evaluated and base_evaluated else None
        g = row["grading_calls"]
        same = ("—" if not cmp else "byte-identical" if cmp["records_identical"]
                else "same ids, grades differ" if cmp["same_ids"] else "differ")
        lines.append(
            f"| {row['label']} | {row['records']} | {row['lm_seconds'] / 3600:.3f} | {_f(rate)} | {_f(ratio, '.2f')} "
            f"| {row['calls']} | {_f(row['calls_per_record'])} | {_f(tokens, ',.0f')} | {_f(tratio, '.2f')} | "
            f"{_f(evaluated, ',.0f')} | {_f(eratio, '.2f')} | {_f(row['generated_tokens_per_record'], ',.0f')} | "
            f"{g['skipped']} of {g['skipped'] + g['graded']} | "
            f"{_changed(cmp)} | {same} |")
    for row in rows[1:]:
        lines += ["", *_paired_lines(base, row)]
    return lines


def _paired_lines(base: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """One side against the first: per document (the unit drawn) and per step, and how the write step's first
    answers fared on each side."""
    lines = [f"**{row['label']}** against the first row:", ""]
    paired = row.get("paired") or {}
    if paired.get("documents", 0) >= 2:
        p = paired.get("wilcoxon_p")
        lines.append(f"- per document, wall seconds after/before: {paired['ratio']:.2f} "
                     f"(sum {paired['seconds_before']:,.0f} -> {paired['seconds_after']:,.0f} s over the "
                     f"{paired['documents']} documents both finished; bootstrap 95% interval over documents "
                     f"[{paired['ratio_ci95'][0]:.2f}, {paired['ratio_ci95'][1]:.2f}]; Wilcoxon signed-rank p "
                     f"{_f(p, '.3f')}); records on them {paired['records_before']} -> {paired['records_after']}")
    for side in (base, row):
        checks = side.get("writing") or {}
        first = checks.get("first_answer") or {}
        if first:
            total = sum(first.values())
            rejected = ", ".join(f"{k} {n}" for k, n in sorted(first.items(), key=lambda kv: -kv[1]) if k != "kept")
            lines.append(f"- write step, {side['label']}: {first.get('kept', 0)} of {total} first answers kept"
                         + (f" (rejected: {rejected})" if rejected else "")
                         + f"; {checks.get('rewrite_calls', 0)} rewrite calls")
    for side in (base, row):
        copied = side.get("copied_words")
        if copied:
            rank1 = side.get("bm25_rank1")
            lines.append(f"- queries, {side['label']}: {len(copied)}; BM25 ranks the source first for "
                         f"{_f(None if rank1 is None else 100 * rank1, '.0f')}%; consecutive words copied from the "
                         f"source: median {copied[len(copied) // 2]}, {sum(w >= 7 for w in copied)} copy 7 or more")
    lines += ["", "| step | calls | LM seconds | ratio | prompt tokens | of them evaluated (not reused) | "
              "generated tokens |", "|---|---:|---:|---:|---:|---:|---:|"]
    before, after = base.get("by_step") or {}, row.get("by_step") or {}
    for stage in sorted(set(before) | set(after), key=lambda st: -(before.get(st) or {}).get("seconds", 0)):
        a, b = before.get(stage) or {}, after.get(stage) or {}
        sa, sb = a.get("seconds", 0), b.get("seconds", 0)
        lines.append(f"| {stage} | {a.get('calls', 0)} -> {b.get('calls', 0)} | {sa:,.0f} -> {sb:,.0f} | "
                     f"{_f(sb / sa if sa else None, '.2f')} | {a.get('prompt_tokens', 0):,} -> "
                     f"{b.get('prompt_tokens', 0):,} | {_evaluated(a)} -> {_evaluated(b)} | "
                     f"{a.get('completion_tokens', 0):,} -> "
                     f"{b.get('completion_tokens', 0):,} |")
    return lines


def evaluated_tokens(step: dict[str, Any]) -> int:
    """A step's prompt tokens the LM evaluated: the rest was reused from a cached prefix (the engine's saved states, a
    server's prefix cache); all of them for usage recorded before cached tokens were kept."""
    return step.get("prompt_tokens", 0) - step.get("cached_prompt_tokens", 0)


def _evaluated(step: dict[str, Any]) -> str:
    """:func:`evaluated_tokens` for the report, a dash for usage recorded before cached tokens were kept."""
    return f"{evaluated_tokens(step):,}" if "cached_prompt_tokens" in step else "—"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifact", type=Path, help="compiled artifact (default: the mini task, compiled here)")
    ap.add_argument("--generator", default="scripted", help="scripted, embedded[:NAME] or MODEL@URL")
    ap.add_argument("--judge-feature", default="fused", choices=("expected", "fused", "relative", "hybrid"),
                    help="the score of the mini artifact's judge (without --artifact)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds a call on the scripted server")
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--queries-per-doc", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--concurrency", type=int, help="LM calls in flight (default: produce's for the generator)")
    ap.add_argument("--index-dir", type=Path, help="the corpus index folder (default: produce's)")
    ap.add_argument("--corpus", type=Path, help="the corpus (default: the artifact's)")
    ap.add_argument("--exclude-store", type=Path, action="append", default=[], metavar="RUN.db[.gz]", help=(
        "leave out of the corpus every document this run store plans, so the paired runs' documents are held out "
        "from the store a setting was designed on, or whose grades teach a cascade's margin (repeatable; a "
        "filtered copy of --corpus is written under --work)"))
    ap.add_argument("--exclude-docs", type=Path, action="append", default=[], metavar="FILE", help=(
        "also leave out the documents listed in FILE (one id a line), e.g. an earlier paired run's documents.txt, "
        "when a lever was designed on them (repeatable; needs --corpus)"))
    ap.add_argument("--before", default="", metavar="SETTING=VALUE[,...]", help="the first run's settings")
    ap.add_argument("--after", action="append", default=[], metavar="SETTING=VALUE[,...]",
                    help="another run's settings (repeat for more runs)")
    ap.add_argument("--work", type=Path, help=(
        "where the stores and exports go (default: a new temporary folder); run the same command with the same "
        "--work (and --artifact) to resume an interrupted run"))
    ap.add_argument("--out", type=Path, default=RESULTS / "paired_produce")
    ap.add_argument("--no-write", action="store_true", help="print the table instead of writing --out")
    ap.add_argument("--one-side-at-a-time", action="store_true", help=(
        "run each side's documents before the next side's (the default takes the sides in turn, one document at a "
        "time, so drift of the machine's speed weighs on both; cascade_grades=@before always runs this way)"))
    ap.add_argument("--report-only", action="store_true", help=(
        "make the report again from the stores an earlier run of the same command left under --work (no LM call)"))
    ap.add_argument("--turn", help=argparse.SUPPRESS)  # one side's turn in a child process (run_turn_in_child)
    args = ap.parse_args()
    if args.turn:
        return turn(args.turn)
    if not args.after:
        ap.error("give at least one --after SETTING=VALUE")
    sides = [(args.before or "before (defaults)", settings_of(args.before))]
    sides += [(text, settings_of(text)) for text in args.after]
    with ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="syntra-paired-")))
        work.mkdir(parents=True, exist_ok=True)
        if args.report_only and (args.work is None or args.artifact is None):
            ap.error("--report-only needs the --work and --artifact of the run that made the stores")
        artifact = args.artifact or compile_mini(work / "mini", args.judge_feature)
        index = args.index_dir or (work / "mini" / "index" if args.artifact is None else None)
        common: dict[str, Any] = {"docs": args.docs, "queries_per_doc": args.queries_per_doc, "top_k": args.top_k,
                                  **({"concurrency": args.concurrency} if args.concurrency else {}),
                                  **({"index_dir": index} if index else {})}
        if args.exclude_store or args.exclude_docs:
            if args.corpus is None:
                ap.error("--exclude-store and --exclude-docs need --corpus")
            listed = {line.strip() for f in args.exclude_docs for line in f.read_text(encoding="utf-8").splitlines()
                      if line.strip()}
            common["corpus"] = held_out_corpus(args.corpus, args.exclude_store, work, listed)
        elif args.corpus is not None:
            common["corpus"] = args.corpus
        rows: list[dict[str, Any]] = []
        learns_from_first = any(settings.get("cascade_grades") == "@before" for _, settings in sides)
        if args.report_only:
            for side, (label, settings) in enumerate(sides, start=1):
                store = work / f"{_stem(side, label)}.db"
                if not store.is_file():
                    ap.error(f"--report-only: {store} is not there; give the --work of the run that made it")
                rows.append(side_row(label, settings, store))
        elif args.one_side_at_a_time or learns_from_first:  # a margin learned from the first run needs all of it
            if any(ENGINE_BUILD in settings for _, settings in sides):
                ap.error(f"{ENGINE_BUILD}= runs the sides in turn, in child processes: drop --one-side-at-a-time "
                         "and cascade_grades=@before")
            for side, (label, settings) in enumerate(sides, start=1):
                if settings.get("cascade_grades") == "@before":  # a margin learned from the first run's grades
                    settings = {**settings, "cascade_grades": Path(rows[0]["store"])}
                with generator_for(args.generator, args.latency, Path(artifact)) as generator:
                    rows.append(run_side(side, label, settings, artifact, work, generator, common))
        else:
            in_children = any(ENGINE_BUILD in settings for _, settings in sides)
            rows = run_in_turn(sides, artifact, work, lambda: generator_for(args.generator, args.latency,
                                                                            Path(artifact)), common,
                               child={"generator": args.generator, "latency": args.latency} if in_children else None)
        for row in rows[1:]:
            row["compare"] = compare(rows[0], row)
            row["paired"] = paired_documents(rows[0], row)
        for row in rows:
            print(f"{row['label']}: {row['records']} records, {row['calls']} calls", flush=True)
        lines = report(args, Path(artifact), rows)
    print("\n".join(lines))
    if not args.no_write:
        args.out.mkdir(parents=True, exist_ok=True)
        shown = [{**row, "store": Path(row["store"]).name, "export": Path(row["export"]).name} for row in rows]
        (args.out / "paired_produce.json").write_text(json.dumps(shown, indent=2, default=str) + "\n",
                                                      encoding="utf-8")
        write_readme(args.out, lines)
        # the documents this run drew, for a later run to hold out (--exclude-docs)
        (args.out / "documents.txt").write_text("".join(f"{doc}\n" for doc in rows[0]["per_document"]),
                                                encoding="utf-8")
        print(f"wrote {args.out / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
