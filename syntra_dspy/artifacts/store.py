"""Versioned, checksummed, never-overwritten artifacts of compiled synthesis programs.

Layout: ``<root>/<task>/<version>/{program.json, manifest.json, checksums.sha256}``. ``program.json`` is DSPy's
own saved state. The program id derives from the program and what shapes it; the version id from that and the
compile's own record (history, usage, time), so every compile is kept and compiles with the same outcome share a
program id. Loading verifies everything and returns a frozen program whose rendered prompts equal the ones
recorded at compile time.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy

from syntra_dspy.artifacts.checks import check_folder, check_folder_name, check_manifest, check_program_state
from syntra_dspy.errors import ArtifactError, ConfigError
from syntra_dspy.artifacts.manifest import Manifest
from syntra_dspy.programs.synthesis import LATER_STEPS, STEP_NAMES, SynthesisProgram, step_adapter
from syntra_dspy.artifacts.signing import SIGNATURE, check_signature, sign_artifact
from syntra_dspy.task import TASK_NAME_MAX, TASK_NAME_PATTERN

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
KIND = "syntra-dspy/synthesis-program"
CHECKSUMS = "checksums.sha256"
PAYLOAD = ("program.json", "manifest.json")
ALLOWED_FILES = frozenset({*PAYLOAD, CHECKSUMS, SIGNATURE})
# Manifest keys that describe one compile (*when*, *how long*, *how*), not the program it made: left out of the
# program id, so two compiles with the same outcome share it.
_VOLATILE = {"version", "program_id", "created_at", "seconds", "usage", "history", "record"}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _sample_inputs(step: dspy.Predict) -> dict[str, Any]:
    return {name: f"{{{name}}}" for name in step.signature.input_fields}


def render_prompts(program: SynthesisProgram) -> dict[str, dict[str, str]]:
    """The system prompt every step sends (it holds the whole fixed instruction), with hashes."""
    out = {}
    for name in STEP_NAMES:
        step = getattr(program, name)
        messages = step_adapter(name).format(step.signature, step.demos, _sample_inputs(step))
        system = messages[0]["content"]
        out[name] = {
            "instructions_sha256": _sha256(step.signature.instructions.encode("utf-8")),
            "system_prompt_sha256": _sha256(system.encode("utf-8")),
            "system_prompt": system,
        }
    return out


def grading_identity(program: SynthesisProgram) -> dict[str, Any]:
    """What makes a grade made for one artifact the grade another's judge would get from the same model: the same
    grading prompt (the system prompt holds the whole instruction) shown the same share of each document, in the same
    order (query or document first, as the calibration says). Checked
    wherever grades made for one are read as another's: a run's stored grades relabelled or teaching a cascade
    margin, grades shared between judges in ``syntra agreement`` and between comparison rows."""
    return {"prompt_sha256": render_prompts(program)["grade"]["system_prompt_sha256"],
            "max_doc_chars": program.max_doc_chars,
            "grade_order": program.grade_order}


def compute_program_id(program_json: bytes, manifest: dict[str, Any]) -> str:
    """What the compile made: the saved program and everything that shapes it, not the compile's own record."""
    identity = {k: v for k, v in manifest.items() if k not in _VOLATILE}
    return _sha256(program_json + b"\n" + canonical_json(identity))[:12]


def compute_version(program_json: bytes, manifest: dict[str, Any]) -> str:
    """One compile's id: the program and its whole record (history, usage, time), so a recompile with the same
    outcome is written beside the first, not hidden behind it. Artifacts written before program ids existed
    (no ``program_id`` in the manifest) used the program id as their version."""
    if "program_id" not in manifest:
        return compute_program_id(program_json, manifest)
    record = {k: v for k, v in manifest.items() if k != "version"}
    return _sha256(program_json + b"\n" + canonical_json(record))[:12]


def with_ids(program_json: bytes, manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with its program id and version id set from the content (how every compile seals one)."""
    manifest = {**manifest, "program_id": compute_program_id(program_json, manifest)}
    return {**manifest, "version": compute_version(program_json, manifest)}


@dataclass(frozen=True)
class Artifact:
    """A verified artifact: its frozen program, manifest, version and checksum."""

    path: Path
    program: SynthesisProgram
    manifest: dict[str, Any]  # as written (for display and export)
    meta: Manifest  # the same, typed and validated once: what the package reads

    @property
    def version(self) -> str:
        return self.manifest["version"]

    @property
    def task(self) -> str:
        return self.manifest["task"]

    @property
    def program_id(self) -> str:
        """Shared by every compile that made this same program (older artifacts: their version)."""
        return self.meta.program_identity

    @property
    def checksum(self) -> str:
        """sha256 of the checksum file: one value that pins every byte of the artifact."""
        return _sha256((self.path / CHECKSUMS).read_bytes())


def check_artifact_root(root: str | Path, task: str) -> Path:
    """Make sure a new version of ``task`` can be written under ``root``, before any compile work is spent:
    the task name is a plain folder name, ``root`` and ``root/task`` are (or can be made) writable folders.
    Returns ``root/task``."""
    if not isinstance(task, str) or len(task) > TASK_NAME_MAX or not re.fullmatch(TASK_NAME_PATTERN, task):
        raise ConfigError(f"task name {str(task)[:40]!r}{'…' if len(str(task)) > 40 else ''} cannot be a folder name",
                          field="name", hint=f"use up to {TASK_NAME_MAX} letters, digits, '_', '.' or '-', "
                                             "starting with a letter or digit")
    root = Path(root)
    folder = root / task
    for path in (root, folder):
        if path.exists() and not path.is_dir():
            raise ConfigError("exists and is not a folder; artifacts go in a folder", path=path, field="out",
                              hint="give --out a folder (default: artifacts/)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = Path(tempfile.mkdtemp(prefix=".writing-", dir=folder))
        probe.rmdir()
    except OSError as exc:
        raise ConfigError(f"cannot write artifacts here: {exc.strerror}", path=folder, field="out",
                          hint="give --out a folder you can write to") from None
    return folder


def save_artifact(program: SynthesisProgram, manifest: dict[str, Any], root: str | Path) -> Path:
    """Write a new version atomically and return its directory; an existing version is never overwritten."""
    root = Path(root)
    task = manifest["task"]
    (root / task).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".writing-", dir=root / task))
    try:
        program.save(str(tmp / "program.json"))
        program_json = (tmp / "program.json").read_bytes()
        manifest = {**manifest, "schema_version": SCHEMA_VERSION, "kind": KIND, "prompts": render_prompts(program)}
        manifest = with_ids(program_json, manifest)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n",
                                           encoding="utf-8")
        lines = "".join(f"{_sha256((tmp / name).read_bytes())}  {name}\n" for name in PAYLOAD)
        (tmp / CHECKSUMS).write_text(lines, encoding="utf-8")
        final = root / task / manifest["version"]
        if final.exists():
            # The very same record (program, history, usage and time): the existing directory is kept and returned.
            verify_artifact(final)
            logger.info("version %s already exists with the same content; kept it unchanged", final)
            return final
        os.rename(tmp, final)
        return final
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def verify_artifact(path: str | Path, *, key_env: str | None = None) -> dict[str, Any]:
    """Check the folder, checksums, schema, manifest shape and version id; return the manifest. With ``key_env``
    also the team signature (see :mod:`syntra_dspy.artifacts.signing`). Raises ArtifactError naming the problem.

    This proves integrity (the files were written together by some compile and not changed since), not
    authorship: anyone with this package can produce a consistent artifact. Only a signature says who.
    """
    return _verified(Path(path), key_env)[0]


def _verified(path: Path, key_env: str | None) -> tuple[dict[str, Any], Manifest]:
    """The checks of :func:`verify_artifact`; the manifest as written and as validated (once)."""
    if not (path / CHECKSUMS).is_file():
        raise ArtifactError("not an artifact directory (no checksums.sha256)", path=path)
    check_folder(path, ALLOWED_FILES)
    listed: dict[str, str] = {}
    for n, line in enumerate((path / CHECKSUMS).read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise ArtifactError("malformed checksum line", path=path / CHECKSUMS, line=n)
        listed[name] = digest
    if set(listed) != set(PAYLOAD):
        raise ArtifactError(f"checksums must list exactly {', '.join(PAYLOAD)}", path=path / CHECKSUMS)
    for name, digest in listed.items():
        file = path / name
        if not file.is_file():
            raise ArtifactError("file listed in checksums.sha256 is missing", path=file)
        if _sha256(file.read_bytes()) != digest:
            raise ArtifactError("checksum mismatch: the file was changed after compile", path=file,
                                hint="recompile, or restore the artifact from where it was published")
    manifest = _read_json(path / "manifest.json")
    if not isinstance(manifest, dict):
        raise ArtifactError(f"manifest must be a JSON object, got {type(manifest).__name__}",
                            path=path / "manifest.json")
    if manifest.get("kind") != KIND:
        raise ArtifactError(f"not a synthesis-program artifact (kind={manifest.get('kind')!r})",
                            path=path / "manifest.json", field="kind")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise ArtifactError(f"unsupported schema_version {manifest.get('schema_version')!r} "
                            f"(this syntra-dspy reads {SCHEMA_VERSION})", path=path / "manifest.json",
                            field="schema_version")
    meta = check_manifest(manifest, path=path / "manifest.json", steps=STEP_NAMES, added=LATER_STEPS)
    program_json = (path / "program.json").read_bytes()
    expected = compute_version(program_json, manifest)
    if manifest.get("version") != expected:
        raise ArtifactError("version id does not match the content", path=path / "manifest.json", field="version")
    if "program_id" in manifest and manifest["program_id"] != compute_program_id(program_json, manifest):
        raise ArtifactError("program id does not match the content", path=path / "manifest.json", field="program_id")
    check_folder_name(path, manifest["version"])
    if key_env is not None:
        check_signature(path, CHECKSUMS, key_env)
    return manifest, meta


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{file.name} is not JSON: {exc}", path=file) from None


def load_artifact(path: str | Path, *, key_env: str | None = None) -> Artifact:
    """Verify, check that program.json holds only instructions and components, rebuild the program from code
    plus program.json, check its prompts, and freeze it. ``key_env`` also requires a team signature."""
    path = Path(path)
    manifest, meta = _verified(path, key_env)
    # The settings the program checks its outputs with, as compiled (an older manifest lacks some: their defaults).
    program = SynthesisProgram(max_doc_chars=meta.settings.max_doc_chars, near_duplicate=meta.settings.near_duplicate)
    state = _read_json(path / "program.json")
    check_program_state(state, path=path / "program.json",
                        fields={name: len(getattr(program, name).signature.fields) for name in STEP_NAMES},
                        added=LATER_STEPS)
    try:
        program.load(str(path / "program.json"))
    except (KeyError, ValueError, TypeError) as exc:
        raise ArtifactError(f"program.json does not fit this version's synthesis program: {exc}",
                            path=path / "program.json") from None
    rendered = render_prompts(program)
    for name, recorded in meta.prompts.items():
        if rendered.get(name, {}).get("system_prompt_sha256") != recorded.system_prompt_sha256:
            raise ArtifactError(f"step '{name}' would send a different prompt than the one recorded at compile time",
                                path=path, hint="install the syntra-dspy version named in the manifest")
    return Artifact(path=path, program=program.freeze(), manifest=manifest, meta=meta)


def sign(path: str | Path, key_env: str) -> Path:
    """Verify an artifact and sign it with the team key in ``$key_env`` (writes signature.hmac-sha256)."""
    load_artifact(path)
    return sign_artifact(path, CHECKSUMS, key_env)


def manifests(root: str | Path, task: str = "*") -> list[tuple[Path, Manifest]]:
    """The artifacts under ``root`` (of ``task``, or every task) with their manifests, by folder; not verified
    (``verify`` does that), and a folder whose manifest does not read is left out (``verify`` says why)."""
    found = []
    for manifest_path in sorted(Path(root).glob(f"{task}/*/manifest.json")):
        try:
            m = json.loads(manifest_path.read_text(encoding="utf-8"))
            found.append((manifest_path.parent, check_manifest(m, path=manifest_path, steps=STEP_NAMES,
                                                              added=LATER_STEPS)))
        except (OSError, ValueError, ArtifactError):
            continue
    return found


def list_artifacts(root: str | Path) -> list[dict[str, Any]]:
    rows = []
    for path, m in manifests(root):
        loops = {h.name: h for h in m.history}
        rows.append({"task": m.task, "version": m.version, "program_id": m.program_identity,
                     "created_at": m.created_at, "strategy": m.strategy, "path": str(path),
                     "passed": ",".join(f"{n}={'y' if h.passed else 'n'}" for n, h in loops.items())})
    return rows


def component_texts(program: SynthesisProgram) -> dict[str, str]:
    """The adapted components as text, including any whole-step instruction an optimizer wrote."""
    state = program.state
    definition = state.task_definition.model_dump(mode="json") if state.task_definition else {}
    texts = {
        "task_definition": "\n".join(f"{k}: {v}" for k, v in sorted(definition.items())),
        "idattr_guidance": state.idattr_guidance,
        "query_instruction": state.query_instruction,
        "annotation_instruction": state.annotation_instruction,
    }
    if not state.grade_guidance:  # shown only where set, so two compiled versions diff as before
        texts["grade_guidance"] = "left out of the grading prompt (syntra artifacts recalibrate --without-guidance)"
    if state.grade_prompt != "full":
        texts["grade_prompt"] = f"{state.grade_prompt} (syntra artifacts recalibrate --brief-grading)"
    texts.update({f"{step} (whole-step instruction)": text for step, text in state.step_instructions.items()})
    return texts


def instruction_texts(program: SynthesisProgram) -> dict[str, str]:
    """Components, then the instruction every step sends (composed from them): what ``artifacts diff`` compares."""
    return {**component_texts(program), **{f"{name} prompt": text for name, text in program.instructions().items()}}


def diff_texts(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))


def diff_artifacts(a: str | Path, b: str | Path) -> str:
    """Unified diff of every adapted component and every step's instruction between two artifacts."""
    old, new = (instruction_texts(load_artifact(path).program) for path in (a, b))
    out = []
    for key in dict.fromkeys([*old, *new]):
        d = diff_texts(old.get(key, ""), new.get(key, ""), f"{a}:{key}", f"{b}:{key}")
        out.append(d if d else f"= {key}: unchanged\n")
    return "".join(out)


def diff_attempts(manifest: dict[str, Any], loop: str, first: int = 1, last: int | None = None) -> str:
    """Diff between two attempts of one loop in an artifact's compile history (default: first vs kept)."""
    history = {h["name"]: h for h in manifest.get("history", [])}
    if loop not in history:
        raise ArtifactError(f"no loop named {loop!r}; the artifact has {', '.join(history) or 'none'}")
    attempts = history[loop]["attempts"]
    last = last or history[loop]["kept"]
    a, b = attempts[first - 1], attempts[last - 1]
    return diff_texts(a["instruction"], b["instruction"], f"{loop} attempt {first}", f"{loop} attempt {last}")
