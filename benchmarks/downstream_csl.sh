#!/usr/bin/env bash
# Does a cross-language run's data make the multilingual encoder better? (issue 13)
#
# From a CSL run store: export its records, train EmbeddingGemma-300m with LoRA on them, and score the base and the
# adapted encoder, side by side with BM25 over back-translated queries, on the machine-translated known-item dev set
# (English titles over 2,000 Chinese abstracts), all through `syntra eval`, with paired tests (`--compare`).
#
#   benchmarks/downstream_csl.sh ~/syntra-runs/csl-clir-v3.db ~/syntra-runs/csl-downstream benchmarks/results/csl_downstream
#
# WORK keeps the records, the model and the runs; a step whose output exists is skipped, so a stopped run resumes.
# OUT gets the TREC runs' scores, the comparisons and the exact commands. Times on 2 cores: ~25 min training for 100
# records, ~10 min for each encoder to encode the abstracts. Extra `syntra train` settings: TRAIN_ARGS="...".
set -euo pipefail

STORE=${1:?usage: downstream_csl.sh RUN.db WORK_DIR OUT_DIR}
WORK=${2:?usage: downstream_csl.sh RUN.db WORK_DIR OUT_DIR}
OUT=${3:?usage: downstream_csl.sh RUN.db WORK_DIR OUT_DIR}
SYNTRA=${SYNTRA:-syntra}
TASK=${TASK:-examples/csl-zh-clir.yaml}
DEV=benchmarks/data/csl-en-titles
BACK=benchmarks/data/csl-zh-backtranslated
TRAIN_ARGS=${TRAIN_ARGS:---mini-batch-size 4}
mkdir -p "$WORK" "$OUT"
log() { echo "+ $*" | tee -a "$OUT/commands.txt" >&2; "$@"; }
: > "$OUT/commands.txt"

if [ ! -s "$WORK/records.jsonl" ]; then
  log $SYNTRA export "$STORE" --out "$WORK/records.jsonl" --overwrite
fi
$SYNTRA export "$STORE" --stats > "$OUT/run-stats.txt"
if [ ! -d "$WORK/model/merged" ]; then
  # shellcheck disable=SC2086
  log $SYNTRA train "$WORK/records.jsonl" --encoder embeddinggemma-300m --out "$WORK/model" $TRAIN_ARGS
fi

score() {  # name, model, dataset
  if [ ! -s "$WORK/$1.trec" ]; then
    log $SYNTRA eval --encoder "$2" --dataset "beir:$3:test" --exclude-queries "$TASK" --measures nDCG@20 RR@10 R@100 \
      --run-out "$WORK/$1.trec" --per-query "$WORK/$1.per-query.json" --json --no-progress > "$WORK/$1.result.json"
  fi
  cp "$WORK/$1.result.json" "$OUT/$1.json"
}
score bm25-backtranslated bm25 "$BACK"
score embeddinggemma-300m embeddinggemma-300m "$DEV"
score lora-records "$WORK/model/merged" "$DEV"

compare() {  # a, b (difference b - a), over the English set's qrels; a query missing from a run scores 0
  log $SYNTRA eval --compare "$WORK/$1.trec" "$WORK/$2.trec" --qrels "$DEV/qrels/test.tsv" --measures nDCG@20 --json \
    > "$OUT/compare-$2-vs-$1.json"
}
compare embeddinggemma-300m lora-records
compare bm25-backtranslated lora-records
compare bm25-backtranslated embeddinggemma-300m
echo "results in $OUT" >&2
