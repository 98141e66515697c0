"""Artifacts: byte-exact round trips, tamper detection, frozen programs, listing and diffs."""

from __future__ import annotations

import json
import shutil

import dspy
import pytest

from syntra_dspy.artifacts import diff_artifacts, list_artifacts, load_artifact, render_prompts, save_artifact
from syntra_dspy.cli import main
from syntra_dspy.errors import ArtifactError, FrozenProgramError
from syntra_dspy.testing import SyntraBrain

from helpers import compile_mini


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compiled")
    artifact, _ = compile_mini(tmp)
    return artifact


def copy_of(artifact, tmp_path):
    dest = tmp_path / artifact.task / artifact.version
    shutil.copytree(artifact.path, dest)
    return dest


def test_layout_and_manifest(compiled):
    files = sorted(p.name for p in compiled.path.iterdir())
    assert files == ["checksums.sha256", "manifest.json", "program.json"]
    m = compiled.manifest
    assert m["schema_version"] == 1 and m["version"] == compiled.path.name
    assert m["strategy"] == "self-improve" and m["settings"]["max_attempts"] == 3
    assert set(m["fingerprints"]) == {"examples", "corpus", "encoder", "index"}
    assert set(m["lms"]) == {"generator", "verifier", "refiner"}
    assert set(m["prompts"]) == {"extract", "plan", "write", "annotate", "grade"}
    state = json.loads((compiled.path / "program.json").read_text())
    assert {"components", "extract", "plan", "write", "annotate", "metadata"} <= set(state)


def test_round_trip_renders_identical_prompts(compiled):
    recorded = {k: v["system_prompt"] for k, v in compiled.manifest["prompts"].items()}
    again = load_artifact(compiled.path)
    assert {k: v["system_prompt"] for k, v in render_prompts(again.program).items()} == recorded
    # and for real inputs, the full message lists match the program as compiled
    adapter = dspy.JSONAdapter()
    inputs = {"query": "q", "candidates": "[doc_id 0] d", "retry_note": ""}
    assert adapter.format(again.program.annotate.signature, [], inputs) == adapter.format(
        compiled.program.annotate.signature, [], inputs)
    assert again.program.dump_state() == compiled.program.dump_state()


def test_resaving_a_loaded_program_is_byte_identical(compiled, tmp_path):
    again = load_artifact(compiled.path)
    again.program.save(str(tmp_path / "program.json"))
    assert (tmp_path / "program.json").read_bytes() == (compiled.path / "program.json").read_bytes()


@pytest.mark.parametrize("name", ["program.json", "manifest.json"])
def test_one_flipped_byte_is_refused(compiled, tmp_path, name):
    path = copy_of(compiled, tmp_path)
    data = bytearray((path / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (path / name).write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="checksum mismatch") as err:
        load_artifact(path)
    assert name in str(err.value)
    assert main(["artifacts", "verify", str(path)]) == 2


def test_consistent_edit_with_fixed_checksums_is_still_refused(compiled, tmp_path):
    """Rewriting an instruction and its checksum still changes the content-derived version id."""
    import hashlib

    path = copy_of(compiled, tmp_path)
    state = json.loads((path / "program.json").read_text())
    state["annotate"]["signature"]["instructions"] += " Label everything 3."
    (path / "program.json").write_text(json.dumps(state, indent=2))
    lines = [f"{hashlib.sha256((path / n).read_bytes()).hexdigest()}  {n}\n" for n in ("program.json", "manifest.json")]
    (path / "checksums.sha256").write_text("".join(lines))
    with pytest.raises(ArtifactError, match="version id"):
        load_artifact(path)


def test_unknown_schema_version_is_refused(compiled, tmp_path):
    path = copy_of(compiled, tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError):
        load_artifact(path)


def test_loaded_program_is_frozen(compiled):
    program = load_artifact(compiled.path).program
    for step in ("extract", "plan", "write", "annotate"):
        predictor = getattr(program, step)
        with pytest.raises(FrozenProgramError):
            predictor.signature = predictor.signature.with_instructions("changed")
        with pytest.raises(FrozenProgramError):
            predictor.demos = [{"query": "x"}]
    with pytest.raises(FrozenProgramError):
        program.annotate = dspy.Predict("a -> b")
    with pytest.raises(FrozenProgramError):
        program.components = None


def test_same_content_is_never_overwritten(compiled, tmp_path):
    root = tmp_path / "root"
    first = save_artifact(compiled.program, dict(compiled.manifest), root)
    before = (first / "manifest.json").read_bytes()
    assert save_artifact(compiled.program, dict(compiled.manifest), root) == first  # the very same record
    again = save_artifact(compiled.program, {**compiled.manifest, "created_at": "later"}, root)  # another compile
    assert again != first and (first / "manifest.json").read_bytes() == before
    assert load_artifact(again).program_id == load_artifact(first).program_id


def test_list_show_and_diff(compiled, tmp_path, capsys):
    other, _ = compile_mini(tmp_path, brain=SyntraBrain(stubborn=True), max_attempts=1)
    rows = list_artifacts(tmp_path / "artifacts")
    assert [r["version"] for r in rows] == [other.version]
    text = diff_artifacts(other.path, compiled.path)
    assert "+Write each query as a short declarative claim" in text
    assert main(["artifacts", "diff", str(compiled.path), "--loop", "query_instruction"]) == 0
    out = capsys.readouterr().out
    assert "+Write each query as a short declarative claim" in out
    assert main(["artifacts", "show", str(compiled.path)]) == 0
    assert "annotation_instruction" in capsys.readouterr().out
