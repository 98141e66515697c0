from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not beside the checkout")
    return path


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def minilm():
    """The default encoder, loaded once per test session."""
    from syntra_dspy.retrieval.encoder import load_encoder

    return load_encoder("all-MiniLM-L6-v2")


@pytest.fixture
def small_generator():
    """The embedded 0.5B model as a generator LM (max 120 tokens, no cache), released after the test; skips where
    llama-cpp-python or the model's parts are not installed."""
    import importlib.util

    from syntra_dspy.lm import build_lm
    from syntra_dspy.lm.llamacpp import release_models
    from syntra_dspy.models.registry import EMBEDDED_MODELS
    from syntra_dspy.task import LMSpec

    small = EMBEDDED_MODELS["qwen2.5-coder-0.5b"]
    if importlib.util.find_spec("llama_cpp") is None or not all(
            importlib.util.find_spec(small.module(i)) for i in range(1, small.parts + 1)):
        pytest.skip("needs llama-cpp-python and the 0.5B parts")
    lm = build_lm(LMSpec(model="embedded:qwen2.5-coder-0.5b", max_tokens=120), role="generator", cache=False)
    try:
        yield lm
    finally:
        release_models()
