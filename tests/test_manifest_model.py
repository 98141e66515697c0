"""The manifest is a typed, frozen model, validated once at load; production and comparison read its fields."""

from __future__ import annotations

import pydantic
import pytest
from test_example_artifact import EXAMPLES

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.comparison.compare import compile_cost
from syntra_dspy.artifacts.manifest import Manifest


@pytest.mark.parametrize("manifest", EXAMPLES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_a_committed_artifact_carries_its_manifest_typed_and_frozen(manifest):
    artifact = load_artifact(manifest.parent)
    meta = artifact.meta
    assert isinstance(meta, Manifest) and meta.version == artifact.version
    # a compile since version ids became per compile carries the program's own id; older ones share the version
    assert meta.program_identity == (meta.program_id or meta.version) and len(meta.program_identity) == 12
    with pytest.raises(pydantic.ValidationError):
        meta.settings.chunk_size = 99  # type: ignore[misc]
    raw = artifact.manifest.get("settings", {})
    assert meta.settings.chunk_size == raw.get("chunk_size", 4)  # an older artifact reads the model's default
    cost = compile_cost(meta)
    assert cost["calls"] == sum(int(s.get("calls", 0)) for s in artifact.manifest.get("usage", {}).values())
    assert cost["total_tokens"] == cost["prompt_tokens"] + cost["completion_tokens"]
