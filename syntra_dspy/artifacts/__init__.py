"""Compiled program artifacts: one folder per version, written once, verified on every load.

``store`` saves, loads, lists and diffs artifacts (``<root>/<task>/<version>/{program.json, manifest.json,
checksums.sha256}``); ``checks`` says what an artifact folder and its files may contain, checked before anything in
them is used; ``manifest`` is the typed form of ``manifest.json``; ``signing`` adds and checks an optional team
signature. A load runs through them in that order: folder, checksums and signature, manifest, program state.
"""

from __future__ import annotations

from syntra_dspy.artifacts.manifest import Manifest
from syntra_dspy.artifacts.store import (
    ALLOWED_FILES,
    CHECKSUMS,
    KIND,
    PAYLOAD,
    SCHEMA_VERSION,
    Artifact,
    canonical_json,
    check_artifact_root,
    component_texts,
    compute_program_id,
    compute_version,
    diff_artifacts,
    diff_attempts,
    diff_texts,
    instruction_texts,
    list_artifacts,
    load_artifact,
    render_prompts,
    save_artifact,
    sign,
    verify_artifact,
    with_ids,
)

__all__ = [
    "ALLOWED_FILES",
    "CHECKSUMS",
    "KIND",
    "PAYLOAD",
    "SCHEMA_VERSION",
    "Artifact",
    "Manifest",
    "canonical_json",
    "check_artifact_root",
    "component_texts",
    "compute_program_id",
    "compute_version",
    "diff_artifacts",
    "diff_attempts",
    "diff_texts",
    "instruction_texts",
    "list_artifacts",
    "load_artifact",
    "render_prompts",
    "save_artifact",
    "sign",
    "verify_artifact",
    "with_ids",
]
