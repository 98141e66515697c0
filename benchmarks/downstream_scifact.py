"""Does a run's data make a retriever better? LoRA encoders trained on it, side by side, on held-out SciFact claims.

From one run store and the artifact that produced it, trains the base encoder with LoRA (one training setting for
every system) on:

* ``judged``: the run's exported records (positives and hard negatives as the artifact's judge labelled them);
* ``source-only``: the same queries with no judge: the source document as the only positive and the other retrieved
  candidates, in rank order, as negatives (what the judge is there to improve on);
* ``human``: as many SciFact train claims, with their qrels positives (judgments people made) and the base
  encoder's top-ranked non-positive documents as hard negatives (the same depth the run retrieved), drawn from a
  fixed reserved pool of claims;
* ``judged-first-N`` (``--also-first N``): the first N of the same records, e.g. the size of an earlier run
  whose model was not kept, to see what more records of the same run add;
* optionally more models (``--extra NAME=DIR``, e.g. an earlier run's model),

then evaluates BM25, the base encoder and every trained model on the same evaluation claims: SciFact train claims
minus the task's few-shot and calibration claims (they shaped the artifact) minus the reserved human pool (and
the development split).
nDCG@10 per system with a bootstrap CI, and paired comparisons (t-test and bootstrap CI over claims) of each
trained model against the base and of ``judged`` against ``source-only``, ``human`` and every ``--extra`` model.

    python benchmarks/downstream_scifact.py --store ~/syntra-runs/scifact-41d8.db \
        --artifact artifacts/scifact/41d81ca90d87 --work ~/syntra-runs/downstream \
        --out benchmarks/results/downstream_scifact

``--set key=value`` changes a training setting (``TrainConfig`` field) for every system; ``--dev N`` holds out N
more claims as a development split, scored separately (for choosing settings without touching the evaluation
claims). Trained models are kept under ``--work`` and reused when their records and settings are unchanged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.comparison.downstream import score_systems, systems_table, train_once
from syntra_dspy.evaluation import load_dataset
from syntra_dspy.production.export import export_records
from syntra_dspy.production.records import retrieval_instruction
from syntra_dspy.training import TrainConfig

try:  # python -m benchmarks.downstream_scifact (make bench-downstream-scifact)
    from benchmarks.common import (INDEX_ROOT, candidate_depth, claim_pool, excluded_claims, human_records,
                                   parse_value, source_only_records, write_jsonl)
except ModuleNotFoundError:  # python benchmarks/downstream_scifact.py: this folder is first on the path
    from common import (INDEX_ROOT, candidate_depth, claim_pool, excluded_claims, human_records,  # type: ignore
                        parse_value, source_only_records, write_jsonl)


def parse_variants(specs: list[str]) -> dict[str, dict[str, Any]]:
    """``NAME:KEY=VALUE`` (repeatable) -> {NAME: {KEY: VALUE}}: settings a variant system overrides."""
    variants: dict[str, dict[str, Any]] = {}
    for spec in specs:
        name, _, setting = spec.partition(":")
        key, eq, value = setting.partition("=")
        if not name or not eq:
            raise SystemExit(f"--variant {spec!r}: write NAME:KEY=VALUE, e.g. distill:loss=margin-mse")
        variants.setdefault(name, {})[key] = parse_value(value)
    return variants


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, type=Path, help="run store written by syntra produce")
    ap.add_argument("--artifact", required=True, help="the artifact that produced it (its claims are excluded)")
    ap.add_argument("--dataset", default="beir:../shared/data/scifact:train")
    ap.add_argument("--records", type=int, default=None, help="use the first N exported records (default: all)")
    ap.add_argument("--judge", default=None, metavar="ARTIFACT",
                    help="label the judged records with this recalibration of the run's artifact (syntra export "
                         "--judge: the stored grades, another calibration); default: the labels production wrote")
    ap.add_argument("--human-pool", type=int, default=300,
                    help="claims reserved for human training pairs, never evaluated on (fixed, so the evaluation "
                         "claims stay the same however many records a run has)")
    ap.add_argument("--human", type=int, default=None,
                    help="human training pairs used, the first of the pool (default: as many as records)")
    ap.add_argument("--dev", type=int, default=0, help="claims held out as a development split")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a TrainConfig setting")
    ap.add_argument("--extra", action="append", default=[], metavar="NAME=MODEL_DIR")
    ap.add_argument("--also-first", action="append", default=[], type=int, metavar="N",
                    help="also train on the first N judged records (system judged-first-N), compared with judged")
    ap.add_argument("--systems", default="judged,source-only,human",
                    help="trained systems to include; SYSTEM:VARIANT trains SYSTEM's records with the variant's "
                         "settings (--variant)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE",
                    help="a setting the systems named SYSTEM:NAME override (repeatable), e.g. distill:loss=margin-mse")
    ap.add_argument("--compare", action="append", default=[], metavar="A,B",
                    help="also compare trained system B against A (paired), e.g. 'LoRA human,LoRA judged:distill'")
    ap.add_argument("--score", choices=("all", "development", "evaluation"), default="all",
                    help="which splits to score: choose settings with 'development', then score the choice once "
                         "with 'evaluation'")
    ap.add_argument("--measure", default="nDCG@10")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()

    config = TrainConfig.from_dict({k: parse_value(v) for k, v in (s.split("=", 1) for s in args.set)})
    variants = parse_variants(args.variant)
    wanted = [s for s in args.systems.split(",") if s]
    for name in wanted:
        if ":" in name and name.split(":", 1)[1] not in variants:
            raise SystemExit(f"--systems {name}: no --variant {name.split(':', 1)[1]}:KEY=VALUE given")
    configs = {name: config.replace(**variants[name.split(":", 1)[1]]) if ":" in name else config
               for name in wanted}
    artifact = load_artifact(args.artifact)
    dataset = load_dataset(args.dataset)
    excluded, excluded_counts = excluded_claims(artifact, dataset.queries)
    work = args.work.expanduser()
    work.mkdir(parents=True, exist_ok=True)

    judged_path = work / "records-judged.jsonl"
    summary = export_records(args.store.expanduser(), judged_path, overwrite=True, num_negatives=config.num_negatives,
                             judge=args.judge)
    judged = [json.loads(line) for line in judged_path.read_text(encoding="utf-8").splitlines()]
    if args.records is not None:
        judged = judged[:args.records]
        write_jsonl(judged, judged_path, {"source": str(args.store), "first": args.records,
                                          "export": summary.to_dict()})
    n_records = len(judged)
    print(f"{n_records} judged records from {args.store} ({summary.queries} stored queries, dropped "
          f"{summary.dropped})", flush=True)

    pool = claim_pool(dataset, excluded, args.seed)
    n_human = args.human if args.human is not None else n_records
    if n_human > args.human_pool:
        raise SystemExit(f"--human {n_human} is more than the reserved pool (--human-pool {args.human_pool})")
    reserved, dev_ids = pool[:args.human_pool], pool[args.human_pool:args.human_pool + args.dev]
    human_ids = reserved[:n_human]
    eval_ids = sorted(pool[args.human_pool + args.dev:])

    instruction = judged[0]["instruction"] if judged else retrieval_instruction({})
    top_k = candidate_depth(judged)
    records = {"judged": judged_path}
    for first in sorted(set(args.also_first)):
        if not 0 < first < n_records:
            raise SystemExit(f"--also-first {first}: the run has {n_records} records; give a smaller positive count")
        name = f"judged-first-{first}"
        records[name] = write_jsonl(judged[:first], work / f"records-{name}.jsonl",
                                    {"source": str(args.store), "first": first, "export": summary.to_dict()})
        wanted.append(name)
    plain = {name.split(":", 1)[0] for name in wanted}
    if "source-only" in plain:
        records["source-only"] = write_jsonl(source_only_records(args.store.expanduser(), judged, config.num_negatives),
                                             work / "records-source-only.jsonl", {"source": str(args.store),
                                                                                   "labels": "source document only"})
    if "human" in plain:
        rows = human_records(dataset, human_ids, top_k, config.num_negatives, instruction)
        records["human"] = write_jsonl(rows, work / "records-human.jsonl", {
            "source": args.dataset, "labels": "SciFact qrels (judgments people made); negatives: base encoder top "
                                              f"{top_k} minus judged documents", "claims": human_ids})
    systems = [("BM25", "bm25"), ("all-MiniLM-L6-v2 (base)", "all-MiniLM-L6-v2")]
    training: dict[str, Any] = {}
    for name in wanted:
        base_name = name.split(":", 1)[0]
        if base_name not in records:
            continue
        model, report = train_once(name.replace(":", "-"), records[base_name], work, configs.get(name, config),
                                   say=say)
        systems.append((f"LoRA {name}", str(model)))
        training[name] = {"records": sum(1 for _ in records[base_name].open(encoding="utf-8")), "model": str(model),
                          "steps": report.get("steps"), "seconds": report.get("seconds"),
                          "final_loss": report.get("final_loss"),
                          "config": configs.get(name, config).to_dict()}
    extras = [tuple(spec.split("=", 1)) for spec in args.extra]
    systems += extras

    base = "all-MiniLM-L6-v2 (base)"
    trained = [n for n, _ in systems[2:]]
    pairs = [(base, n) for n in trained]
    if "LoRA judged" in trained:
        pairs += [(other, "LoRA judged") for other in ("LoRA source-only", "LoRA human") if other in trained]
        pairs += [(name, "LoRA judged") for name in trained if name.startswith("LoRA judged-first-")]
        pairs += [(name, "LoRA judged") for name, _ in extras]  # e.g. an earlier run's model
    for name in trained:  # a variant against its plain system
        plain = name.split(":", 1)[0]
        if ":" in name and plain in trained:
            pairs.append((plain, name))
    for spec in args.compare:
        a, _, b = spec.partition(",")
        if a not in trained + [base, "BM25"] or b not in trained:
            raise SystemExit(f"--compare {spec!r}: name two systems of this run ({', '.join(trained)})")
        pairs.append((a, b))
    pairs = list(dict.fromkeys(pairs))
    splits = {}
    if dev_ids and args.score in ("all", "development"):
        splits["development"] = set(dataset.queries) - set(dev_ids)
    if args.score in ("all", "evaluation"):
        splits["evaluation"] = set(dataset.queries) - set(eval_ids)
    if not splits:
        raise SystemExit("--score development needs --dev N claims")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Downstream: {args.measure} on held-out {dataset.name} claims", "",
             f"Run store `{args.store}` (artifact {artifact.version}): {n_records} records"
             f"{f', labelled by the judge of `{args.judge}`' if args.judge else ''}. Training setting for "
             f"every system: {json.dumps(config.to_dict(), sort_keys=True)}"
             + "".join(f"; variant `{v}` changes {json.dumps(c, sort_keys=True)}" for v, c in variants.items())
             + ".",
             f"Excluded from every split: {excluded_counts['few_shot']} few-shot and {excluded_counts['calibration']} "
             f"calibration claims of the artifact, and {args.human_pool} claims reserved for human training pairs "
             f"(SciFact qrels: judgments people made), of which the first {len(human_ids)} train the human LoRA; "
             f"seed {args.seed}.", ""]
    payload: dict[str, Any] = {"store": str(args.store), "artifact": artifact.version, "judge": args.judge,
                               "records": n_records, "variants": variants, "scored": args.score,
                               "export": summary.to_dict(), "config": config.to_dict(), "seed": args.seed,
                               "excluded": excluded_counts, "human_claims": human_ids, "dev_claims": dev_ids,
                               "training": training, "splits": {}}

    def scored(name: str, result: Any, seconds: float) -> None:
        say(f"{name}: {args.measure} {result.aggregate[args.measure]:.4f} on {result.n_queries} claims "
            f"({seconds:.0f} s)")

    for split, exclude in splits.items():
        results, seconds = score_systems(systems, dataset, exclude=exclude, index_root=INDEX_ROOT, each=scored)
        n = next(iter(results.values())).n_queries
        split_lines, comparisons = systems_table(results, args.measure, pairs, over="claims")
        lines += [f"## {split} split: {n} claims", "", *split_lines, ""]
        payload["splits"][split] = {"claims": n, "seconds": seconds, "comparisons": comparisons,
                                    "aggregate": {k: r.aggregate for k, r in results.items()},
                                    "per_query": {k: {q: s[args.measure] for q, s in r.per_query.items()}
                                                  for k, r in results.items()}}
    lines += ["Trained models: " + "; ".join(f"{k}: {v['records']} records, {v['steps']} steps, "
                                              f"{(v['seconds'] or 0):.0f} s" for k, v in training.items())]
    (out / "downstream.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "downstream.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
