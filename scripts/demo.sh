#!/usr/bin/env bash
# The main job on the embedded default LM, sized for ~30 minutes on 2 cores after setup: compile the bundled
# SciFact sample task (2 attempts a loop, 3 trial documents, 4 candidates a few-shot query), produce training
# records for 3 documents (2 queries each, 5 candidates a query), export them. The sizing, from the figures
# `--dry-run` prints, is in docs/flow.md#the-demo. Set DEMO_ARTIFACT=path to skip the compile and reuse an
# artifact; DEMO_DOCS / DEMO_TOP_K size the production run.
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
syntra=.venv/bin/syntra
task=examples/scifact-sample/task.yaml
corpus=examples/scifact-sample/corpus.jsonl  # named for produce: the committed artifact records another checkout's path
docs="${DEMO_DOCS:-3}"
top_k="${DEMO_TOP_K:-5}"
mkdir -p runs

if [ -n "${DEMO_ARTIFACT:-}" ]; then
  artifact="$DEMO_ARTIFACT"
else
  echo "== compiling $task with the embedded LM (at most ~14 min of LM work on 2 cores) =="
  "$syntra" compile "$task" --out artifacts --max-attempts 2 --sample-docs 3 --annotation-candidates 4 \
    | tee runs/demo-compile.txt
  artifact=$(sed -n 's/^artifact .* written to //p' runs/demo-compile.txt | tail -n 1)
fi
"$syntra" artifacts verify "$artifact"

echo "== producing records for $docs documents from $artifact =="
"$syntra" produce "$artifact" --store runs/demo.db --corpus "$corpus" --docs "$docs" --queries-per-doc 2 \
  --top-k "$top_k" --dry-run
"$syntra" produce "$artifact" --store runs/demo.db --corpus "$corpus" --docs "$docs" --queries-per-doc 2 \
  --top-k "$top_k"
"$syntra" export runs/demo.db --out runs/demo-train.jsonl --overwrite --negatives hard+easy  # a rerun replaces its own export
"$syntra" export runs/demo.db --stats
echo
echo "artifact:       $artifact"
echo "run store:      runs/demo.db"
echo "train records:  runs/demo-train.jsonl"
echo
echo "To scale up, resume the same store with more documents (--dry-run first says how long, from this run's"
echo "own figures; --docs all takes every document the diverse selection keeps):"
echo "  $syntra produce $artifact --store runs/demo.db --corpus $corpus --queries-per-doc 2 --top-k $top_k \\"
echo "      --docs 50 --dry-run"
echo "A served model (--generator MODEL@http://HOST:PORT/v1) answers many calls at once: see docs/lms.md."
