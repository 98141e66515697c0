"""What an artifact folder may contain, checked before anything in it is used.

Checksums and the version id prove that the files are the ones written together; anyone with this package can
compute them, so they prove nothing about who wrote the files. The loader therefore accepts only what
``compile`` writes: in ``program.json`` the instructions, the signature field texts and the adapted
components, never an LM, an endpoint, a predictor config, demos or traces (DSPy's ``Predict.load_state``
would set any key it finds as an attribute); in the folder the three files (and an optional team signature),
no symlinks, no extras, and a folder name equal to the version id. Every LM setting comes from the task file
or the command line at run time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from syntra_dspy.errors import ArtifactError
from syntra_dspy.artifacts.manifest import Manifest
from syntra_dspy.programs.components import ComponentState

#: The keys DSPy's ``Predict.dump_state`` writes for a step without a bound LM; anything else is refused.
_STEP_KEYS = frozenset({"traces", "train", "demos", "signature", "lm"})
_EMPTY_KEYS = ("traces", "train", "demos")


def check_folder(path: Path, allowed: frozenset[str]) -> None:
    """The artifact folder holds only ``allowed`` names, each a regular file (never a symlink)."""
    names = sorted(os.listdir(path))
    extra = [n for n in names if n not in allowed]
    if extra:
        raise ArtifactError(f"unexpected file(s) in the artifact: {', '.join(extra[:5])}", path=path,
                            hint=f"an artifact holds only {', '.join(sorted(allowed))}")
    for name in names:
        mode = os.lstat(path / name).st_mode
        if stat.S_ISLNK(mode):
            raise ArtifactError("is a symlink; artifact files must be regular files", path=path / name)
        if not stat.S_ISREG(mode):
            raise ArtifactError("is not a regular file", path=path / name)


def check_folder_name(path: Path, version: str) -> None:
    """The folder is named after the version id, so a path always names the content it holds."""
    name = Path(os.path.realpath(path)).name
    if name != version:
        raise ArtifactError(f"the folder is named {name!r} but holds version {version!r}", path=path,
                            field="version", hint="keep artifacts in <root>/<task>/<version>/ as compile wrote them")


# ── manifest.json ──


def check_manifest(data: Any, *, path: Path, steps: tuple[str, ...], added: frozenset[str] = frozenset()
                   ) -> Manifest:
    """The typed manifest, or ArtifactError naming the first field of ``manifest.json`` without the expected shape.

    ``added`` names steps newer than some committed artifacts, whose manifests record no prompt for them."""
    if not isinstance(data, dict):
        raise ArtifactError(f"manifest must be a JSON object, got {type(data).__name__}", path=path)
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise ArtifactError(f"malformed manifest: {first['msg']}", path=path, field=where) from None
    if set(manifest.prompts) not in (set(steps), set(steps) - added):
        raise ArtifactError(f"manifest prompts must cover exactly the steps {', '.join(steps)}", path=path,
                            field="prompts")
    for n, loop in enumerate(manifest.history):
        if loop.kept > len(loop.attempts):
            raise ArtifactError(f"loop {loop.name!r} keeps attempt {loop.kept} of {len(loop.attempts)}", path=path,
                                field=f"history.{n}.kept")
    return manifest


# ── program.json ──


def check_program_state(state: Any, *, path: Path, fields: dict[str, int], added: frozenset[str] = frozenset()
                        ) -> None:
    """Accept only what compile writes: per step the instructions and field texts (as many fields as the
    code's signature has), empty traces/train/demos and no LM; the components; DSPy's version metadata.

    ``added`` names steps newer than some committed artifacts: their absence is accepted (the program derives
    them from its components)."""
    if not isinstance(state, dict):
        raise ArtifactError(f"program.json must be a JSON object, got {type(state).__name__}", path=path)
    fields = {name: count for name, count in fields.items() if name in state or name not in added}
    expected = {*fields, "components", "metadata"}
    if set(state) != expected:
        odd = sorted(set(state) ^ expected)
        raise ArtifactError(f"program.json must hold exactly {', '.join(sorted(expected))} (differs in: "
                            f"{', '.join(odd)})", path=path)
    for name, count in fields.items():
        _check_step(state[name], name, count, path)
    try:
        ComponentState.model_validate(state["components"])
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ArtifactError(f"malformed components: {first['msg']}", path=path,
                            field=".".join(["components", *map(str, first["loc"])])) from None
    metadata = state["metadata"]
    if not isinstance(metadata, dict) or set(metadata) - {"dependency_versions"}:
        raise ArtifactError("metadata may only hold dependency_versions", path=path, field="metadata")


def _check_step(step: Any, name: str, count: int, path: Path) -> None:
    refuse = "an artifact holds instructions and adapted components only; LMs, endpoints, configs and demos " \
             "come from the task file and the command line"
    if not isinstance(step, dict):
        raise ArtifactError(f"step '{name}' must be a JSON object", path=path, field=name)
    extra = sorted(set(step) - _STEP_KEYS)
    if extra:
        raise ArtifactError(f"step '{name}' carries {', '.join(repr(k) for k in extra)}", path=path,
                            field=name, hint=refuse)
    for key in _EMPTY_KEYS:
        if step.get(key, []) != []:
            raise ArtifactError(f"step '{name}' carries {key} ({key!r} must be empty)", path=path,
                                field=f"{name}.{key}", hint=refuse)
    if step.get("lm") is not None:
        raise ArtifactError(f"step '{name}' carries its own LM ('lm' must be null)", path=path,
                            field=f"{name}.lm", hint=refuse)
    signature = step.get("signature")
    if not isinstance(signature, dict) or set(signature) != {"instructions", "fields"} \
            or not isinstance(signature["instructions"], str) or not isinstance(signature["fields"], list):
        raise ArtifactError(f"step '{name}' needs a signature with instructions and fields only", path=path,
                            field=f"{name}.signature")
    texts = signature["fields"]
    if len(texts) != count or not all(isinstance(f, dict) and set(f) == {"prefix", "description"}
                                      and all(isinstance(v, str) for v in f.values()) for f in texts):
        raise ArtifactError(f"step '{name}' must describe its {count} fields with a prefix and a description each",
                            path=path, field=f"{name}.signature.fields")
