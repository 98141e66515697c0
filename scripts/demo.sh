#!/usr/bin/env bash
# The main job on the embedded default LM: compile the bundled SciFact sample task, produce training
# records from the compiled artifact, export them. Set DEMO_ARTIFACT=path to skip the compile and reuse
# an artifact; DEMO_DOCS / DEMO_TOP_K size the production run.
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
syntra=.venv/bin/syntra
task=examples/scifact-sample/task.yaml
docs="${DEMO_DOCS:-5}"
top_k="${DEMO_TOP_K:-10}"
mkdir -p runs

if [ -n "${DEMO_ARTIFACT:-}" ]; then
  artifact="$DEMO_ARTIFACT"
else
  echo "== compiling $task with the embedded LM (test mode: tens of minutes on 2 cores) =="
  # One candidate per annotation call: the small embedded model judges a list of candidates all alike.
  "$syntra" compile "$task" --out artifacts --chunk-size 1 | tee runs/demo-compile.txt
  artifact=$(sed -n 's/^artifact .* written to //p' runs/demo-compile.txt | tail -n 1)
fi
"$syntra" artifacts verify "$artifact"

echo "== producing records for $docs documents from $artifact =="
# llama.cpp answers one call at a time: concurrency 1 keeps each step's prompt prefix cached.
"$syntra" produce "$artifact" --store runs/demo.db --docs "$docs" --queries-per-doc 2 --top-k "$top_k" --concurrency 1
"$syntra" export runs/demo.db --out runs/demo-train.jsonl --overwrite --negatives hard+easy  # a rerun replaces its own export
"$syntra" export runs/demo.db --stats
echo
echo "artifact:       $artifact"
echo "run store:      runs/demo.db"
echo "train records:  runs/demo-train.jsonl"
