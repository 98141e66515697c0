"""Shared test helpers: compile the mini fixture task with the scripted brain."""

from __future__ import annotations

from pathlib import Path

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
