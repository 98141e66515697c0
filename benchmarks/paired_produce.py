"""Two real production runs of the same documents, one per engine setting, with every engine call timed and paired.

Shared by the benchmarks that compare a change to the embedded engine or to production's scheduling on real work
(documents_in_flight.py; grammar_sampling.py and lookup_drafts.py answer each call both ways in one run instead,
:func:`answer_both_ways`): each mode runs ``syntra produce`` in its own process and fresh store,
DSPy's cache off; every engine call is logged with its request's identity, seconds and tokens; calls are paired by
their exact request (messages and options), so a comparison is over the same prompts, with a Wilcoxon signed-rank
test; the two runs' exported records are compared byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def request_key(request) -> str:
    """The request's identity: messages and the options that shape the answer."""
    from syntra_dspy.lm.llamacpp.engine import _chat_messages

    config = request.config
    body = {"messages": _chat_messages(request), "max_tokens": config.max_tokens, "logprobs": config.logprobs,
            "format": str(config.response_format)}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def call_kind(request) -> str:
    """``grade`` (a one-token answer read as probabilities), ``schema`` (decoded under a grammar), or ``plain``."""
    if request.config.logprobs is not None:
        return "grade"
    return "schema" if request.config.response_format is not None else "plain"


def add_arguments(ap: argparse.ArgumentParser, modes: Iterable[str] = ()) -> None:
    """The options every paired-production benchmark takes (and, given ``modes``, the hidden ones its child
    processes get)."""
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--queries-per-doc", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--index-dir", help="the corpus index folder (default: .syntra/index/<fingerprint>)")
    ap.add_argument("--work", type=Path, help="where the runs' stores and call logs go (default: a new temp dir); "
                    "a run whose call log is there already is reused")
    if modes:
        ap.add_argument("--child", choices=sorted(modes), help=argparse.SUPPRESS)
        ap.add_argument("--store", help=argparse.SUPPRESS)
        ap.add_argument("--calls", help=argparse.SUPPRESS)


def embedded_generator(args: argparse.Namespace):
    """The embedded model ``args.model`` as production's generator, DSPy's cache off."""
    from syntra_dspy.lm.roles import build_lm
    from syntra_dspy.task import LMSpec

    return build_lm(LMSpec(model=f"embedded:{args.model}"), role="generator", cache=False)


def timed_production(args: argparse.Namespace, store: str | Path, lm) -> dict:
    """``syntra produce`` of ``args``'s documents into ``store`` with ``lm``, one document at a time: its wall
    seconds and summary."""
    from syntra_dspy.production import produce

    start = time.perf_counter()
    summary = produce(args.artifact, store, generator=lm, index_dir=args.index_dir, docs=args.docs,
                      queries_per_doc=args.queries_per_doc, top_k=args.top_k, concurrency=1, progress=False)
    return {"wall_seconds": time.perf_counter() - start, "summary": summary.to_dict()}


def run_child(args: argparse.Namespace, configure: Callable[[object], None]) -> None:
    """One production run in this process, every engine call timed into ``args.calls``; ``configure(engine)`` sets
    the mode up first."""
    lm = embedded_generator(args)
    engine = lm.engine
    configure(engine)
    original, log, lock = engine.complete, [], threading.Lock()

    def timed(request):
        start = time.perf_counter()
        response = original(request)
        seconds = time.perf_counter() - start
        usage = response.usage
        with lock:
            log.append({"key": request_key(request), "kind": call_kind(request), "seconds": round(seconds, 4),
                        "prompt_tokens": getattr(usage, "input_tokens", None),
                        "completion_tokens": getattr(usage, "output_tokens", None),
                        "thread": threading.current_thread().name})
        return response

    engine.complete = timed
    run = timed_production(args, args.store, lm)
    Path(args.calls).write_text(json.dumps({**run, "calls": log}))


def answer_both_ways(engine, modes: dict[str, Callable[[object], None]], chosen: Callable[[object], bool],
                     note: Callable[[object, str, dict], None] | None = None) -> list[dict]:
    """Make ``engine`` answer every ``chosen`` request once per mode, back to back, from the same llama.cpp state
    (saved before the call, restored before each answer), the order of the modes alternating from call to call;
    production goes on with the last mode's answer. ``modes[name](engine)`` sets a mode up; ``note(llama, mode,
    row)`` adds a mode's counts to the call's row. Returns the call log (filled as production runs): per call its
    stage, which mode went first, whether it was greedy, each mode's seconds and completion tokens, and whether
    all modes wrote the same text. The saved prompt states are turned off: one saved by the first answer would serve
    the second, and both must evaluate the same prompt tokens."""
    from syntra_dspy.lm.usage import current_stage

    engine.prompt_cache_bytes = 0
    original, log, names = engine.complete, [], list(modes)

    def both(request):
        if not chosen(request):
            return original(request)
        llama = engine.load().llama
        before = llama.save_state()
        order = names if len(log) % 2 == 0 else names[::-1]
        row: dict = {"stage": current_stage(), "first": order[0], "greedy": not request.config.temperature}
        answers = {}
        for mode in order:
            llama.load_state(before)
            modes[mode](engine)
            start = time.perf_counter()
            answers[mode] = original(request)
            row[f"{mode}_seconds"] = round(time.perf_counter() - start, 4)
            row[f"{mode}_tokens"] = answers[mode].usage.output_tokens
            if note is not None:
                note(llama, mode, row)
        row["same_answer"] = len({answers[m].message.text for m in names}) == 1
        modes[names[-1]](engine)  # the calls not compared run in the mode whose answer production keeps
        log.append(row)
        return answers[names[-1]]

    engine.complete = both
    return log


def load_or_measure(args: argparse.Namespace, prefix: str,
                    measure: Callable[[argparse.Namespace, Path, Path], dict]) -> dict:
    """The run's call log kept in ``args.work`` (a new temp dir named ``prefix...`` when not given), or, when there is
    none yet, ``measure(args, log_path, store)`` into a fresh store there."""
    import tempfile

    if args.work is None:
        args.work = Path(tempfile.mkdtemp(prefix=prefix))
    args.work.mkdir(parents=True, exist_ok=True)
    log_path = args.work / "calls.json"
    if log_path.exists():
        return json.loads(log_path.read_text())
    for stale in args.work.glob("run.db*"):
        stale.unlink()
    return measure(args, log_path, args.work / "run.db")


def run_modes(script: str, args: argparse.Namespace, order: list[str], prefix: str) -> tuple[Path, dict[str, dict]]:
    """Run ``script`` once per mode, in ``order``, each in its own process and store; return (work dir, runs)."""
    import tempfile

    work = args.work or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict] = {}
    for mode in order:
        calls = work / f"{mode}.json"
        if not calls.exists():
            for stale in work.glob(f"{mode}.db*"):
                stale.unlink()
            cmd = [sys.executable, script, "--artifact", args.artifact, "--docs", str(args.docs),
                   "--queries-per-doc", str(args.queries_per_doc), "--top-k", str(args.top_k), "--model", args.model,
                   *(["--index-dir", args.index_dir] if args.index_dir else []),
                   "--child", mode, "--store", str(work / f"{mode}.db"), "--calls", str(calls)]
            print(f"{mode}: {' '.join(cmd)}", flush=True)
            subprocess.run(cmd, check=True)
        runs[mode] = json.loads(calls.read_text())
    return work, runs


def same_records(work: Path, modes: list[str]) -> bool:
    """Whether the runs exported byte-identical training records."""
    from syntra_dspy.production import export_records

    for mode in modes:
        export_records(work / f"{mode}.db", work / f"{mode}.jsonl", overwrite=True)
    first = (work / f"{modes[0]}.jsonl").read_bytes()
    return all((work / f"{mode}.jsonl").read_bytes() == first for mode in modes[1:])


def paired(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """Calls of run ``a`` and run ``b`` with the same request, matched in order of occurrence."""
    queue: dict[str, list[dict]] = {}
    for call in b:
        queue.setdefault(call["key"], []).append(call)
    out = []
    for call in a:
        twins = queue.get(call["key"])
        if twins:
            out.append((call, twins.pop(0)))
    return out


def wilcoxon(x: list[float], y: list[float]) -> float | None:
    from scipy.stats import wilcoxon as test

    return float(test(x, y).pvalue) if len(x) >= 6 else None


def compare_paired(pairs: list[tuple[dict, dict]], kinds: dict[str, Callable[[dict], bool]], a: str,
                   b: str) -> dict[str, dict]:
    """Per kind of call: pairs, seconds summed in run ``a`` and run ``b``, b / a, Wilcoxon p over the pairs."""
    out = {}
    for kind, keep in kinds.items():
        chosen = [(x, y) for x, y in pairs if keep(x)]
        xs, ys = [x["seconds"] for x, _ in chosen], [y["seconds"] for _, y in chosen]
        out[kind] = {"calls": len(chosen), f"{a}_seconds": round(sum(xs), 1), f"{b}_seconds": round(sum(ys), 1),
                     f"{b}_over_{a}": round(sum(ys) / sum(xs), 3) if sum(xs) else None, "wilcoxon_p": wilcoxon(xs, ys)}
    return out


def machine() -> dict:
    return {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count()}


GENERATED_END = "<!-- end of the generated report: what follows is kept when the script runs again -->"


def write_report(out: Path, lines: list[str]) -> None:
    """Write ``README.md`` in ``out``: the generated ``lines``, then whatever was written by hand below the marker
    line of the README already there (a reading of the figures survives a rerun)."""
    readme = out / "README.md"
    kept = ""
    if readme.exists() and GENERATED_END in (old := readme.read_text()):
        kept = old.split(GENERATED_END, 1)[1]
    readme.write_text("\n".join([*lines, GENERATED_END]) + (kept or "\n"))
