"""Production mode: a compiled artifact + a corpus → a run store of judged queries → training records.

``produce`` loads the artifact through the verified loader and never changes it, runs every selected
document through the frozen program (features, blueprints, queries, retrieval, chunked annotation) with
bounded concurrency, and commits each document in one SQLite transaction, so a killed run resumes with
nothing lost or done twice; its settings are one ``ProduceConfig``. ``export_records`` turns the store into JSONL or a
Hugging Face dataset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.production.backup import BackupSummary, backup_store
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.export import ExportSummary, compute_stats, export_records, format_stats, list_failures
    from syntra_dspy.production.ledger import ProductionAborted
    from syntra_dspy.production.ray_cluster import RayOptions
    from syntra_dspy.production.records import ExportConfig, ExportOptions, retrieval_instruction
    from syntra_dspy.production.runner import ProduceSummary, produce
    from syntra_dspy.production.store import RunStore, StoreError

__all__ = [
    "BackupSummary",
    "ExportConfig",
    "ExportOptions",
    "ExportSummary",
    "ProduceConfig",
    "ProduceSummary",
    "ProductionAborted",
    "RayOptions",
    "RunStore",
    "StoreError",
    "backup_store",
    "compute_stats",
    "export_records",
    "format_stats",
    "list_failures",
    "produce",
    "retrieval_instruction",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "BackupSummary": "syntra_dspy.production.backup",
    "backup_store": "syntra_dspy.production.backup",
    "ProduceConfig": "syntra_dspy.production.config",
    "ExportSummary": "syntra_dspy.production.export",
    "compute_stats": "syntra_dspy.production.export",
    "export_records": "syntra_dspy.production.export",
    "format_stats": "syntra_dspy.production.export",
    "list_failures": "syntra_dspy.production.export",
    "ProductionAborted": "syntra_dspy.production.ledger",
    "RayOptions": "syntra_dspy.production.ray_cluster",
    "ExportConfig": "syntra_dspy.production.records",
    "ExportOptions": "syntra_dspy.production.records",
    "retrieval_instruction": "syntra_dspy.production.records",
    "ProduceSummary": "syntra_dspy.production.runner",
    "produce": "syntra_dspy.production.runner",
    "RunStore": "syntra_dspy.production.store",
    "StoreError": "syntra_dspy.production.store",
})
