"""A forged artifact (checksums and version id recomputed with the package's own functions) must not bring an
LM, an endpoint, a config or demos into production, and a malformed one must fail with an ArtifactError."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from syntra_dspy.artifacts import CHECKSUMS, PAYLOAD, load_artifact, with_ids
from syntra_dspy.cli import main
from syntra_dspy.errors import ArtifactError, ConfigError
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import produce
from syntra_dspy.testing import SyntraBrain

from reliability.conftest import SMALL

SECRET = "sk-live-REAL-KEY-0042"
Edit = Callable[[Any], Any]


def forge(src: Path, root: Path, *, program: Edit | None = None, manifest: Edit | None = None) -> Path:
    """Copy an artifact, edit it, and reseal it the way an attacker with the package would: new checksums,
    new program and version ids, folder named after the version."""
    prog = json.loads((src / "program.json").read_text(encoding="utf-8"))
    man = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    prog = program(prog) if program else prog
    man = manifest(man) if manifest else man
    program_bytes = json.dumps(prog, indent=2).encode("utf-8")
    if isinstance(man, dict):
        man = with_ids(program_bytes, man)
    version = man["version"] if isinstance(man, dict) else "forged000000"
    folder = root / "mini" / version
    folder.mkdir(parents=True)
    (folder / "program.json").write_bytes(program_bytes)
    (folder / "manifest.json").write_text(json.dumps(man, indent=2), encoding="utf-8")
    (folder / CHECKSUMS).write_text("".join(
        f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in PAYLOAD), encoding="utf-8")
    return folder


def on_step(step: str, **changes: Any) -> Edit:
    def edit(prog: dict) -> dict:
        prog[step].update(changes)
        return prog
    return edit


def test_an_honest_reseal_still_loads(mini, tmp_path):
    assert load_artifact(forge(mini[0], tmp_path)).program.frozen


@pytest.mark.parametrize("edit, what", [
    (on_step("extract", config={"api_base": "http://attacker.invalid/v1"}), "config"),
    (on_step("plan", lm={"model": "openai/attacker", "api_base": "http://attacker.invalid/v1"}), "lm"),
    (on_step("annotate", demos=[{"query": "q", "candidates": "c", "judgements": "[]"}]), "demos"),
    (on_step("write", traces=[{"x": 1}]), "traces"),
    (on_step("write", callbacks=["os.system"]), "callbacks"),
], ids=["step-config-api-base", "step-lm", "injected-demos", "traces", "unknown-key"])
def test_program_json_may_only_hold_instructions_and_components(mini, tmp_path, edit, what):
    forged = forge(mini[0], tmp_path, program=edit)
    with pytest.raises(ArtifactError, match=what):
        load_artifact(forged)


def test_an_extra_step_or_field_in_program_json_is_refused(mini, tmp_path):
    def extra_step(prog):
        prog["exfiltrate"] = dict(prog["extract"])
        return prog

    def extra_field(prog):
        prog["extract"]["signature"]["fields"].append({"prefix": "Key:", "description": "${key}"})
        return prog

    for edit in (extra_step, extra_field):
        with pytest.raises(ArtifactError):
            load_artifact(forge(mini[0], tmp_path / edit.__name__, program=edit))


def served_generator(url: str) -> Edit:
    def edit(man: dict) -> dict:
        man["lms"]["generator"] = {"role": "generator", "model": "openai/fake", "api_base": url,
                                   "api_key_env": "SYNTRA_REAL_KEY", "temperature": 0.0, "max_tokens": 256}
        return man
    return edit


def test_a_manifest_endpoint_and_key_variable_are_never_used_by_produce(mini, minilm, tmp_path, monkeypatch):
    art, index = mini
    monkeypatch.setenv("SYNTRA_REAL_KEY", SECRET)
    with OpenAICompatibleServer(SyntraBrain()) as attacker:
        forged = forge(art, tmp_path / "artifacts", manifest=served_generator(attacker.base_url))
        with pytest.raises(ConfigError, match="--generator"):
            produce(forged, tmp_path / "run.db", index_dir=index, encoder=minilm, progress=False, docs=1, **SMALL)
        assert attacker.requests == 0


def test_an_embedded_model_path_from_a_manifest_is_not_loaded(mini, minilm, tmp_path):
    art, index = mini

    def gguf_path(man):
        man["lms"]["generator"] = {"role": "generator", "model": "embedded/evil", "api_base": None,
                                   "embedded": {"name": "/tmp/evil.gguf"}}
        return man

    forged = forge(art, tmp_path / "artifacts", manifest=gguf_path)
    with pytest.raises(ConfigError, match="--generator"):
        produce(forged, tmp_path / "run.db", index_dir=index, encoder=minilm, progress=False, docs=1, **SMALL)


def test_a_symlinked_file_in_an_artifact_is_refused(mini, tmp_path):
    forged = forge(mini[0], tmp_path)
    real = tmp_path / "program.json"
    shutil.move(forged / "program.json", real)
    (forged / "program.json").symlink_to(real)
    with pytest.raises(ArtifactError, match="symlink"):
        load_artifact(forged)


def test_an_extra_file_in_an_artifact_is_refused(mini, tmp_path):
    forged = forge(mini[0], tmp_path)
    (forged / "sitecustomize.py").write_text("print('hello')\n", encoding="utf-8")
    with pytest.raises(ArtifactError, match="sitecustomize.py"):
        load_artifact(forged)


def test_a_folder_name_that_differs_from_the_version_id_is_refused(mini, tmp_path):
    forged = forge(mini[0], tmp_path)
    renamed = forged.with_name("latest-approved")
    forged.rename(renamed)
    with pytest.raises(ArtifactError, match="version"):
        load_artifact(renamed)


MALFORMED: dict[str, Edit] = {
    "manifest-is-a-list": lambda m: [m],
    "no-prompts": lambda m: {k: v for k, v in m.items() if k != "prompts"},
    "prompts-not-a-mapping": lambda m: {**m, "prompts": "x"},
    "prompt-entry-not-a-mapping": lambda m: {**m, "prompts": {**m["prompts"], "extract": 5}},
    "settings-not-a-mapping": lambda m: {**m, "settings": "x"},
    "no-task": lambda m: {k: v for k, v in m.items() if k != "task"},
    "lms-a-list": lambda m: {**m, "lms": []},
    "fingerprints-a-string": lambda m: {**m, "fingerprints": "x"},
    "no-task-definition": lambda m: {k: v for k, v in m.items() if k != "task_definition"},
    "history-entries-not-mappings": lambda m: {**m, "history": [1, 2]},
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_manifest_with_consistent_checksums_is_an_artifact_error(mini, tmp_path, capsys, name):
    forged = forge(mini[0], tmp_path, manifest=MALFORMED[name])
    with pytest.raises(ArtifactError):
        load_artifact(forged)
    for command in (["artifacts", "verify", str(forged)], ["artifacts", "show", str(forged)]):
        assert main(command) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("prog", [[], {"components": "x"}, {"extract": None}], ids=["list", "bad-components", "null"])
def test_a_malformed_program_json_is_an_artifact_error(mini, tmp_path, prog):
    with pytest.raises(ArtifactError):
        load_artifact(forge(mini[0], tmp_path, program=lambda _: prog))


def test_a_team_key_signature_tells_a_forged_artifact_from_a_signed_one(mini, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SYNTRA_TEAM_KEY", "team-secret-1")
    signed = forge(mini[0], tmp_path / "a")
    assert main(["artifacts", "sign", str(signed), "--key-env", "SYNTRA_TEAM_KEY"]) == 0
    assert main(["artifacts", "verify", str(signed), "--key-env", "SYNTRA_TEAM_KEY"]) == 0
    assert load_artifact(signed).program.frozen  # a signature file is not an "extra file"
    unsigned = forge(mini[0], tmp_path / "b", manifest=lambda m: {**m, "strategy": "none"})
    assert main(["artifacts", "verify", str(unsigned), "--key-env", "SYNTRA_TEAM_KEY"]) == 2
    (unsigned / "signature.hmac-sha256").write_bytes((signed / "signature.hmac-sha256").read_bytes())
    assert main(["artifacts", "verify", str(unsigned), "--key-env", "SYNTRA_TEAM_KEY"]) == 2
    monkeypatch.setenv("SYNTRA_TEAM_KEY", "another-key")
    assert main(["artifacts", "verify", str(signed), "--key-env", "SYNTRA_TEAM_KEY"]) == 2
    err = capsys.readouterr().err
    assert "signature" in err and "team-secret-1" not in err


def test_produce_can_require_a_team_signature(mini, minilm, tmp_path, monkeypatch):
    art, index = mini
    monkeypatch.setenv("SYNTRA_TEAM_KEY", "team-secret-1")
    unsigned = forge(art, tmp_path / "artifacts")
    with pytest.raises(ArtifactError, match="signature"):
        produce(unsigned, tmp_path / "run.db", generator="hosted_vllm/x@http://127.0.0.1:9/v1", index_dir=index,
                encoder=minilm, progress=False, docs=1, artifact_key_env="SYNTRA_TEAM_KEY", **SMALL)
    assert not (tmp_path / "run.db").exists()
