"""Helpers shared by the human-calibration, GEPA and comparison tests (this module holds no tests).

``FastEncoder`` stands in for the sentence encoder (hashed bag of words), so a compile of the mini task takes
well under a second and these tests never load torch models; the scripted brain answers every LM call.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent

#: Real SciFact train claims whose judged abstract is in the mini corpus (none is a few-shot example).
HELDOUT_QUERIES = {
    "157": ("BLM gene encodes RecQ-class DNA helicase.", "13439128"),
    "263": (("Citrullinated proteins externalized in neutrophil extracellular traps act indirectly to disrupt "
             "the inflammatory cycle."), "14853989"),
    "266": ("Cnn1 recruitment varies with cell cycle timing.", "22405338"),
    "570": (("In breast cancer, the loss of myoepithelial cells promotes the transition of ductal carcinoma in "
             "situ to invasive carcinoma."), "20333864"),
    "733": ("M. stadtmanae induces ASC speck formation in BlaER1 monocytes.", "34469966"),
}


class FastEncoder:
    """Deterministic hashed bag of content words, L2-normalised: the interface compile and the index need."""

    name = "bow"
    id = "bow@tests"
    dim = 256

    def _encode(self, texts, batch_size: int = 32, show_progress: bool = False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z][a-z0-9-]{3,}", text.lower()):
                out[i, int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    encode_queries = encode_documents = _encode


def use_fast_encoder(monkeypatch) -> None:
    monkeypatch.setattr("syntra_dspy.compiler.load_encoder", lambda *a, **k: FastEncoder())


@pytest.fixture
def fast_encoder(monkeypatch):
    use_fast_encoder(monkeypatch)


def write_heldout_beir(root: Path) -> Path:
    """A BEIR-layout split (queries.jsonl + qrels/test.tsv) judging mini-corpus documents; returns the qrels."""
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                for q, (t, _) in HELDOUT_QUERIES.items()), encoding="utf-8")
    rows = "".join(f"{q}\t{d}\t1\n" for q, (_, d) in HELDOUT_QUERIES.items())
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, encoding="utf-8")
    return root / "qrels" / "test.tsv"


def write_calibration_labels(path: Path) -> Path:
    """Human-confirmed labels for the annotation loop (one few-shot query, three classes)."""
    query = "Environmental factors can influence the development of breast cancer."
    path.write_text("query\tdoc_id\tlabel\n"
                    f"{query}\t18340282\t3\n{query}\t20333864\thard negative\n{query}\t30500829\t0\n",
                    encoding="utf-8")
    return path
