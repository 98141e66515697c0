"""Compiled program artifacts: one folder per version, written once, verified on every load.

``store`` saves, loads, lists and diffs artifacts (``<root>/<task>/<version>/{program.json, manifest.json,
checksums.sha256}``); ``checks`` says what an artifact folder and its files may contain, checked before anything in
them is used; ``manifest`` is the typed form of ``manifest.json``; ``signing`` adds and checks an optional team
signature. A load runs through them in that order: folder, checksums and signature, manifest, program state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
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
        grading_identity,
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
    "grading_identity",
    "instruction_texts",
    "list_artifacts",
    "load_artifact",
    "render_prompts",
    "save_artifact",
    "sign",
    "verify_artifact",
    "with_ids",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Manifest": "syntra_dspy.artifacts.manifest",
    "ALLOWED_FILES": "syntra_dspy.artifacts.store",
    "CHECKSUMS": "syntra_dspy.artifacts.store",
    "KIND": "syntra_dspy.artifacts.store",
    "PAYLOAD": "syntra_dspy.artifacts.store",
    "SCHEMA_VERSION": "syntra_dspy.artifacts.store",
    "Artifact": "syntra_dspy.artifacts.store",
    "canonical_json": "syntra_dspy.artifacts.store",
    "check_artifact_root": "syntra_dspy.artifacts.store",
    "component_texts": "syntra_dspy.artifacts.store",
    "compute_program_id": "syntra_dspy.artifacts.store",
    "compute_version": "syntra_dspy.artifacts.store",
    "diff_artifacts": "syntra_dspy.artifacts.store",
    "diff_attempts": "syntra_dspy.artifacts.store",
    "diff_texts": "syntra_dspy.artifacts.store",
    "grading_identity": "syntra_dspy.artifacts.store",
    "instruction_texts": "syntra_dspy.artifacts.store",
    "list_artifacts": "syntra_dspy.artifacts.store",
    "load_artifact": "syntra_dspy.artifacts.store",
    "render_prompts": "syntra_dspy.artifacts.store",
    "save_artifact": "syntra_dspy.artifacts.store",
    "sign": "syntra_dspy.artifacts.store",
    "verify_artifact": "syntra_dspy.artifacts.store",
    "with_ids": "syntra_dspy.artifacts.store",
})
