"""Peak memory and time of one LoRA training step: plain InfoNCE (``--loss mnrl``) against the bounded-memory
default (``--loss cached-mnrl``, GradCache: the same loss and gradients a mini-batch of texts at a time).

Each case is one ``syntra train`` process (one optimizer step of the paper's batch: 16 queries, a positive and 7
negatives each, no warmup) on records built from a BEIR directory (each query's judged document as the positive,
7 other documents drawn at random as negatives); its peak resident memory comes from ``wait4`` and its step time
from ``training.json``. Cases run one after another, in the order given, on an otherwise idle machine (pause any
model job first: the times are only comparable side by side).

    python benchmarks/train_memory.py --case all-MiniLM-L6-v2@../shared/data/scifact:train:mnrl \\
        --case all-MiniLM-L6-v2@../shared/data/scifact:train:cached-mnrl:8 ...

A case is ``MODEL@BEIR_DIR:SPLIT:LOSS[:MINI_BATCH][:MAX_SEQ]``. A case killed for memory is reported as such
(leave out cases that cannot fit: the kernel may pick another process to kill).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "train_memory" / "README.md"


def build_records(spec: str, n: int, negatives: int, seed: int, out: Path) -> Path:
    """``n`` training records from a BEIR dataset (``beir:PATH:split``): query, its first judged document,
    random negatives (document text as production's records carry it: title and text)."""
    from syntra_dspy.evaluation import load_dataset

    data = load_dataset(spec)
    ids = data.corpus.ids
    positive = {qid: next(d for d, gain in judged.items() if gain > 0) for qid, judged in data.qrels.items()
                if qid in data.queries and any(gain > 0 for gain in judged.values())}
    rng = random.Random(seed)
    rows = []
    for qid in sorted(positive)[:n]:
        negs = [d for d in rng.sample(ids, negatives + 1) if d != positive[qid]][:negatives]
        rows.append({"query": data.queries[qid], "pos": [data.corpus[positive[qid]].content],
                     "neg": [data.corpus[d].content for d in negs]})
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return out


def run_case(case: str, index: int, work: Path, batch: int, negatives: int) -> dict:
    model, _, rest = case.partition("@")
    parts = rest.split(":")
    spec, loss = f"beir:{parts[0]}:{parts[1]}", parts[2]
    mini = int(parts[3]) if len(parts) > 3 and parts[3] else None
    max_seq = int(parts[4]) if len(parts) > 4 else None
    records = build_records(spec, batch, negatives, 0, work / f"records-{index}.jsonl")
    out = work / f"model-{index}"
    cmd = [sys.executable, "-m", "syntra_dspy.cli", "train", str(records), "--encoder", model, "--out", str(out),
           "--max-steps", "1", "--warmup-ratio", "0", "--batch-size", str(batch), "--negatives", str(negatives),
           "--loss", loss, "--logging-steps", "1", "--no-progress"]
    if mini:
        cmd += ["--mini-batch-size", str(mini)]
    if max_seq:
        cmd += ["--max-seq-length", str(max_seq)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read() if proc.stderr else ""
    row = {"case": case, "model": Path(model).name, "loss": loss, "mini_batch": mini, "max_seq_length": max_seq,
           "peak_gb": usage.ru_maxrss / 1024**2, "wall_s": time.perf_counter() - started,
           "killed": os.WIFSIGNALED(status), "exit": os.waitstatus_to_exitcode(status)}
    if (out / "training.json").is_file():
        info = json.loads((out / "training.json").read_text(encoding="utf-8"))
        row.update(step_s=info["seconds"], loss_value=info.get("final_loss"))
    elif not row["killed"]:
        row["error"] = stderr.strip().splitlines()[-1:] or ["?"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", required=True, help="MODEL@BEIR_DIR:SPLIT:LOSS[:MINI_BATCH][:MAX_SEQ]")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="train-memory-") as tmp:
        for index, case in enumerate(args.case):
            row = run_case(case, index, Path(tmp), args.batch_size, args.negatives)
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = [
        "# Memory of one LoRA training step: plain vs bounded-memory InfoNCE", "",
        f"One optimizer step of {args.batch_size} queries, 1 positive and {args.negatives} negatives each, on "
        f"{os.cpu_count()} CPU cores, fp32 (`benchmarks/train_memory.py`; each case its own process, run one "
        "after another with no other job running).", "",
        "| model | loss | mini-batch | max tokens | peak memory (GB) | step (s) |", "|---|---|---|---|---|---|"]
    for r in rows:
        step = "killed (out of memory)" if r["killed"] else (f"{r['step_s']:.1f}" if "step_s" in r else r.get("error"))
        lines.append(f"| {r['model']} | {r['loss']} | {r['mini_batch'] or '-'} | {r['max_seq_length'] or 'model'} | "
                     f"{r['peak_gb']:.1f} | {step} |")
    lines += ["", "    python benchmarks/train_memory.py " + " ".join(f"--case {c}" for c in args.case), ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
