"""Shared test helpers: compile the mini fixture task (or a template) with the scripted brain; a stand-in encoder."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import yaml

from syntra_dspy.lm.roles import LMRoles
from syntra_dspy.optimizers import CompileSettings
from syntra_dspy.testing import SyntraBrain, scripted_lm

MINI_TASK = Path(__file__).parent / "fixtures" / "mini" / "task.yaml"


def scripted_roles(brain: SyntraBrain | None = None) -> tuple[LMRoles, SyntraBrain]:
    brain = brain or SyntraBrain()
    lm = scripted_lm(brain)
    return LMRoles(generator=lm, verifier=lm, refiner=lm), brain


def compile_mini(tmp_path, *, strategy="self-improve", brain=None, index_dir=None, optimizer_kwargs=None, **settings):
    from syntra_dspy.compiler import compile_task

    roles, brain = scripted_roles(brain)
    settings.setdefault("sample_docs", 3)
    settings.setdefault("selection_target", 20)
    artifact = compile_task(MINI_TASK, strategy=strategy, out=tmp_path / "artifacts", lms=roles,
                            index_dir=index_dir or tmp_path / "index", settings=CompileSettings(**settings),
                            optimizer_kwargs=optimizer_kwargs)
    return artifact, brain


class CharEncoder:
    """Hashed Chinese characters and Latin words, L2-normalised: enough for an index and diverse selection, with no
    model loaded (it stands in for a multilingual encoder in the NeuCLIRTech template tests)."""

    name, id, dim = "chars", "chars@tests", 128

    def _encode(self, texts, batch_size: int = 32, show_progress: bool = False):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in re.findall(r"[\u4e00-\u9fff]|[a-z]{3,}", text.lower()):
                out[i, int(hashlib.md5(tok.encode()).hexdigest()[:8], 16) % self.dim] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    encode_queries = encode_documents = _encode


def compile_template(template: Path, root: Path, brain: SyntraBrain, *, strategy: str = "none", **settings):
    """Compile a task file template with ``brain`` for every role and :class:`CharEncoder` in place of the encoder it
    names (the artifact still records the template's encoder setting): (artifact, index dir, corpus)."""
    import syntra_dspy.compiler as compiler
    from syntra_dspy.retrieval.corpus import read_corpus

    data = yaml.safe_load(template.read_text(encoding="utf-8"))
    data["corpus"]["path"] = str((template.parent / data["corpus"]["path"]).resolve())
    task = root / template.name
    task.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    settings = {"sample_docs": 2, "selection_target": 12, "judge": "written", **settings}
    real = compiler.load_encoder
    compiler.load_encoder = lambda *a, **k: CharEncoder()
    try:
        roles, _ = scripted_roles(brain)
        artifact = compiler.compile_task(task, strategy=strategy, out=root / "artifacts", lms=roles,
                                         index_dir=root / "index", settings=CompileSettings(**settings))
    finally:
        compiler.load_encoder = real
    return artifact, root / "index", read_corpus(data["corpus"]["path"], data["corpus"].get("format"))
