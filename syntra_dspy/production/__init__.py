"""Production mode: a compiled artifact + a corpus → a run store of judged queries → training records.

``produce`` loads the artifact through the verified loader and never changes it, runs every selected
document through the frozen program (features, blueprints, queries, retrieval, chunked annotation) with
bounded concurrency, and commits each document in one SQLite transaction, so a killed run resumes with
nothing lost or done twice; its settings are one ``ProduceConfig``. ``export_records`` turns the store into JSONL or a Hugging Face dataset.
"""

from __future__ import annotations

from syntra_dspy.production.backup import BackupSummary, backup_store
from syntra_dspy.production.config import ProduceConfig
from syntra_dspy.production.export import ExportSummary, compute_stats, export_records, format_stats, list_failures
from syntra_dspy.production.ledger import ProductionAborted
from syntra_dspy.production.ray_cluster import RayOptions
from syntra_dspy.production.records import ExportOptions, retrieval_instruction
from syntra_dspy.production.runner import ProduceSummary, produce
from syntra_dspy.production.store import RunStore, StoreError

__all__ = [
    "BackupSummary",
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
