"""The committed example artifact must keep loading: a code change that alters any rendered prompt fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from syntra_dspy.artifacts import load_artifact, render_prompts

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "artifacts").glob("*/*/manifest.json"))


@pytest.mark.parametrize("manifest", EXAMPLES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_committed_artifact_loads_with_identical_prompts(manifest):
    artifact = load_artifact(manifest.parent)
    recorded = {name: p["system_prompt"] for name, p in artifact.manifest["prompts"].items()}
    rendered = {name: p["system_prompt"] for name, p in render_prompts(artifact.program).items()}
    assert {name: rendered[name] for name in recorded} == recorded
    # Steps added after the artifact was compiled (the one-candidate grading call) derive from its components.
    for name in set(rendered) - set(recorded):
        assert name == "grade"
        annotation = artifact.program.state.annotation_instruction.strip()
        assert rendered["grade"].startswith("## Task\n") and annotation[:200] in rendered["grade"]
        assert " ".join(rendered["grade"].split()).endswith("Your whole answer is the digit of your label.")
    assert artifact.program.frozen


@pytest.mark.parametrize("manifest", EXAMPLES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_committed_artifact_passes_productions_verified_load(manifest):
    from syntra_dspy.production.setup import load_verified

    assert load_verified(manifest.parent).program.frozen
