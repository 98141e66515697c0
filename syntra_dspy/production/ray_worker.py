"""A Ray document worker: the production pipeline of one process on a cluster node, fed documents by the driver.

A worker rebuilds everything from a :class:`WorkerPlan` (paths, settings and the generator's settings, all plain
JSON): the artifact through the verified loader, the corpus, the encoder, the index and the LM. It then checks
that what it loaded is what the driver loaded (artifact checksum, corpus, encoder and index fingerprints), so a
node with another copy of a file cannot make records that differ from the rest of the run. A worker never
touches the run store: it returns each document's result to the driver, which commits it.

Keys are read from the worker's own environment (``api_key_env``), never shipped through Ray: set the variable
where ``ray start`` runs on each node.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

import syntra_dspy
from syntra_dspy.retrieval.corpus import Corpus
from syntra_dspy.errors import ConfigError
from syntra_dspy.lm.roles import build_lm, prepare_lm
from syntra_dspy.production.config import ProduceConfig
from syntra_dspy.production.pipeline import build_pipeline, production_context
from syntra_dspy.production.setup import ProductionInputs, corpus_location, load_inputs, run_identity
from syntra_dspy.production.units import DocumentResult, KeptWork
from syntra_dspy.judging.cascade import JudgeCascade
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.task import EncoderSpec, LMSpec

logger = logging.getLogger(__name__)


class WorkerPlan(BaseModel):
    """What a worker needs to rebuild the driver's pipeline; validated again on the worker. ``config`` is the
    driver's, with the unit settings as the driver resolved them and the paths made absolute."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    package_version: str
    artifact: str
    corpus: str
    encoder: EncoderSpec  # the driver's encoder with its prompts, a folder as an absolute path
    config: ProduceConfig
    generator: LMSpec
    identity: dict[str, Any]
    cascade: JudgeCascade | None = None  # the driver's judge cascade (a margin may be learned from its store)


def worker_plan(inputs: ProductionInputs, generator: LMSpec, config: ProduceConfig, *,
                corpus: str | Path | Corpus | None) -> WorkerPlan:
    """The driver's inputs as paths every worker can load (absolute, as the driver resolved them)."""
    if isinstance(corpus, Corpus):
        raise ConfigError("with Ray, the corpus must be a file the workers can read, not a Corpus object",
                          field="corpus", hint="pass corpus=PATH (or --corpus PATH)")
    corpus_path, fmt = corpus_location(inputs.artifact.meta.task_spec.corpus, corpus, config.corpus_format)
    encoder = inputs.encoder.spec()
    if inputs.index.path is None:
        raise ConfigError("the corpus index has no folder the Ray workers could load it from", field="index_dir",
                          hint="pass --index-dir DIR")
    s = inputs.settings
    resolved = config.model_copy(update={
        "queries_per_doc": s.queries_per_doc, "top_k": s.top_k, "chunk_size": s.chunk_size,
        "candidates": s.candidates, "corpus_format": fmt, "index_dir": Path(inputs.index.path).resolve(),
        "ray": None})
    return WorkerPlan(package_version=syntra_dspy.__version__, artifact=str(inputs.artifact.path.resolve()),
                      corpus=str(corpus_path.resolve()), encoder=encoder, config=resolved, generator=generator,
                      identity=run_identity(inputs))


class DocumentWorker:
    """Runs documents for the driver with up to ``slots`` LM calls in flight (a threaded Ray actor)."""

    def __init__(self, plan: dict[str, Any], slots: int) -> None:
        checked = WorkerPlan.model_validate(plan)
        host = socket.gethostname()
        if checked.package_version != syntra_dspy.__version__:
            raise ConfigError(f"Ray worker on {host} runs syntra-dspy {syntra_dspy.__version__}, the driver "
                              f"{checked.package_version}", hint="install the same syntra-dspy on every node")
        inputs = load_inputs(checked.artifact, checked.config, corpus=checked.corpus, encoder=checked.encoder)
        found = run_identity(inputs)
        for key, wanted in checked.identity.items():
            if found.get(key) != wanted:
                raise ConfigError(f"Ray worker on {host} loaded {key}={found.get(key)!r}, the driver {wanted!r}",
                                  field=key, hint="give every node the same artifact, corpus and encoder "
                                                  "(e.g. on a shared file system, at the same paths)")
        self.lm = build_lm(checked.generator, role="generator")
        prepare_lm(self.lm)
        self.judge = RelevanceJudge(inputs.artifact.program, chunk_size=inputs.settings.chunk_size,
                                    cascade=checked.cascade)
        self._chunk_pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="syntra-chunk")
        self.pipeline = build_pipeline(inputs, self.judge, slots=threading.BoundedSemaphore(slots),
                                       chunk_pool=self._chunk_pool,
                                       retry_temperature=checked.config.retry_temperature)

    def run(self, doc_id: str, resample: int = 0, kept: KeptWork | None = None) -> DocumentResult:
        """One document, as the driver's thread pool would run it."""
        with production_context(self.lm, self.pipeline.settings.prompt_format):
            return self.pipeline.run(doc_id, resample, kept)

    def info(self) -> dict[str, Any]:
        """Where this worker runs, and whether its judge fell back (the driver records that in the store)."""
        return {"pid": os.getpid(), "host": socket.gethostname(), "judge_fallback": self.judge.fallback}
