"""Production settings: one frozen, typed :class:`ProduceConfig`, defined and validated here and nowhere else.

``syntra produce`` builds it from its flags (their defaults and help come from the fields below), Python callers
build it themselves or pass its fields to :func:`~syntra_dspy.production.produce` as keywords; either way it is
built once, and a bad value is a :class:`~syntra_dspy.errors.ConfigError` naming the setting. What a run then
resolves from the config and the artifact together (the artifact's chunk size and candidate source when the
config leaves them open, ``top_k`` capped at the corpus size) is :class:`UnitSettings`, recorded in the run store.

A pydantic model, like ``CompileSettings`` and the manifest: the bounds are declared with the fields, the
descriptions are the command line's help, and the config crosses to Ray workers as plain JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.settings import CascadeMode
from syntra_dspy.production.ray_cluster import RayOptions
from syntra_dspy.retrieval.corpus import CorpusFormat
from syntra_dspy.settings_model import SettingsModel
from syntra_dspy.task import CandidateSource

#: Documents a new run store plans when ``docs`` is not given: enough to see the records and the pace, never the
#: whole corpus by surprise (SciFact's 5,183 documents take weeks on the embedded model). ``docs="all"`` asks for it.
DEFAULT_DOCS = 10
#: LM calls in flight when ``concurrency`` is not given: the embedded engine answers one call at a time (more only
#: interleave documents, and a call no longer continues its document's cached prompt); a server batches them.
EMBEDDED_CONCURRENCY, SERVED_CONCURRENCY = 1, 4
#: Who plans a document's blueprints (:attr:`ProduceConfig.planner`).
PlannerMode = Literal["lm", "code"]
#: How the JSON steps' prompts are written (:attr:`ProduceConfig.prompt_format`).
PromptFormat = Literal["json", "compact"]


class ProduceConfig(SettingsModel):
    """How one production run selects, asks, retrieves and calls; every field has its ``syntra produce`` flag."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    what: ClassVar[str] = "production"
    command: ClassVar[str] = "syntra produce"

    # what each document yields (recorded in the run store: a resumed run must keep them)
    docs: Annotated[int, Field(ge=1, strict=True)] | Literal["all"] | None = Field(None, description=(
        f"documents to select (default: {DEFAULT_DOCS} for a new run store, its plan for a resumed one; 'all': "
        "every document the diverse selection keeps); a later run may raise it"))
    queries_per_doc: int = Field(4, ge=1, strict=True, description="queries per document")
    top_k: int = Field(20, ge=1, strict=True, description="candidates retrieved per query (at most the corpus)")
    chunk_size: int | None = Field(None, ge=1, strict=True, description=(
        "candidates per annotation call (default: the artifact's setting)"))
    candidates: CandidateSource | None = Field(None, description=(
        "where each query's candidates come from: dense (the encoder's index) or bm25-translated (BM25 in the "
        "documents' language; a cross-language task's queries are first translated by the generator, once each); "
        "default: the task file's setting, else dense"))
    # what the generator may answer (engines that compile schemas into grammars: the embedded one)
    max_identifiers: Annotated[int, Field(ge=1, strict=True)] | Literal["all"] = Field(6, description=(
        "at most this many identifiers per document from the extract step, under a grammar (the embedded engine): "
        "fewer generated tokens (blueprints use a few); 'all': as many as the extractor lists"))
    hide_copied: bool = Field(True, strict=True, description=(
        "a write retry after a query that copied the document is shown the document without the sentences copied "
        "(the copy check still reads all of it): the small writer copies what it is shown again; "
        "--no-hide-copied shows it the whole document"))
    copy_guard: int | None = Field(None, ge=1, le=10, strict=True, description=(
        "the write step's greedy calls (the first write, the rewrites) decode no query repeating more than N "
        "consecutive words of the document (the copy check rejects more than 10): the embedded engine takes the "
        "next best token instead; an engine that does not narrow schemas ignores it; default: no guard"))
    question_guard: bool = Field(False, strict=True, description=(
        "where the task's example queries are never questions, the write step's rewrites (the short calls that "
        "restate a rejected query) decode no query that is one (a final question mark, an interrogative first "
        "word): the embedded engine takes the next best token instead of the one that starts or ends a question; "
        "an engine that does not narrow schemas ignores it; default: off"))
    planner: PlannerMode = Field("lm", description=(
        "who plans each document's blueprints (an identifier and one option per dimension a query is written "
        "from): lm (the planner call, as the artifact was compiled); code (no call: identifiers in turn, every "
        "dimension's option turned from one blueprint to the next, never a repeat: the LM time of the plan "
        "call saved)"))
    prompt_format: PromptFormat = Field("json", description=(
        "how the JSON steps' prompts (extract, plan, write, rewrite) are written: json (DSPy's JSONAdapter, as the "
        "artifact records them); compact (the same instructions with a one-line sketch of the answer's shape and "
        "the inputs as 'Name: value': about half the structure text; the schema still goes with each request). "
        "The grading call has its own short format either way"))
    # which candidates the graded judge may leave unasked (syntra_dspy.judging.cascade)
    judge_cascade: CascadeMode = Field("off", description=(
        "which candidates a graded judge leaves unasked: off; lossless (those whose label no grade in [0, 3] could "
        "change: exact, for an expected or fused judge; a list judge such as hybrid skips none); margin (lossy: those "
        "whose label no grade within --cascade-coverage of the calibration set's, or an earlier session's, grades "
        "could change). The run store records each skipped candidate and why; export --stats counts them"))
    cascade_coverage: float = Field(0.95, gt=0, le=1, allow_inf_nan=False, description=(
        "with --judge-cascade margin: the central share of grades the margin spans (higher: fewer calls skipped, "
        "fewer labels changed)"))
    cascade_grades: Path | None = Field(None, description=(
        "with --judge-cascade margin, for an artifact whose calibration keeps no graded samples: an earlier run store "
        "of the same artifact whose grades teach the margin (default: this run store's earlier sessions)"))
    # where the inputs are read from
    corpus_format: CorpusFormat | None = Field(None, description="corpus format (default: the artifact's)")
    index_dir: Path | None = Field(None, description="where the corpus index is cached")
    artifact_key_env: str | None = Field(None, description=(
        "accept only an artifact signed with the team key in this environment variable (`syntra artifacts sign`)"))
    # how the generator is called
    concurrency: int | None = Field(None, ge=1, strict=True, description=(
        f"LM calls in flight (default: {EMBEDDED_CONCURRENCY} with the embedded engine, which answers one call at a "
        f"time; {SERVED_CONCURRENCY} with a served model, which batches them (raise it for a large server), or on "
        "Ray, where it bounds the workers)"))
    api_key_env: str | None = Field(None, description="environment variable holding the server's key")
    # ``timeout`` and ``retries`` join the generator's settings, whose model (``LMSpec``) holds their bounds
    timeout: float | None = Field(None, description=(
        "total time one request to a served generator may take, however slowly the server answers (default 120; "
        "connect is bounded at 10 s)"))
    retries: int | None = Field(None, strict=True, description=(
        "retries of a failed request to a served generator, with capped, logged waits (default 3)"))
    # what is redone, and when the run gives up
    retry_failed: bool = Field(False, strict=True, description=(
        "also redo documents whose LM output stayed invalid, and partially annotated ones"))
    retry_temperature: float = Field(0.7, ge=0, le=2, allow_inf_nan=False, description=(
        "sampling temperature when failed documents are redone, so the retry gets fresh answers"))
    max_consecutive_errors: int | None = Field(None, ge=1, strict=True, description=(
        "documents in a row that fail on the backend before the run stops (default max(10, 2 x concurrency))"))
    # where the documents run
    ray: RayOptions | None = Field(None, description="spread the documents over a Ray cluster (None: this process)")
    progress: bool = Field(True, strict=True, description="show a progress bar")

    @property
    def max_errors(self) -> int:
        """Documents in a row that may fail on the backend before the run stops."""
        return self.max_consecutive_errors or max(10, 2 * (self.concurrency or SERVED_CONCURRENCY))

    def with_concurrency(self, embedded: bool) -> ProduceConfig:
        """This config with ``concurrency`` resolved for the generator: as given, else what the engine serves."""
        if self.concurrency is not None:
            return self
        default = EMBEDDED_CONCURRENCY if embedded and self.ray is None else SERVED_CONCURRENCY
        return self.model_copy(update={"concurrency": default})

    def plan_target(self, selection: Mapping[str, Any] | None, *, store: str | Path | None = None
                    ) -> tuple[int | None, bool]:
        """How many documents the run plans (None: every one the diverse selection keeps) and whether the selection
        must run (again). ``selection``: the run store's record of its plan (``target``, ``count``), None for a new
        store. A new store plans ``docs``, else :data:`DEFAULT_DOCS`; a resumed one keeps its plan unless ``docs``
        asks for more and its last selection was not exhausted; fewer than it plans is an error."""
        docs = None if self.docs == "all" else self.docs
        if selection is None:
            return (DEFAULT_DOCS if self.docs is None else docs), True
        count = selection["count"]
        if self.docs is None:
            return count, False
        if docs is not None and docs < count:
            raise ConfigError(f"this run store already plans {count} documents, more than --docs {docs}", path=store,
                              field="docs", hint=f"omit --docs or pass --docs {count} or more")
        exhausted = selection["target"] is None or count < selection["target"]
        return docs, not (exhausted or docs == count)

    def describe(self) -> dict[str, Any]:
        """JSON-ready, for logs and reports (the Ray address masked)."""
        data = self.model_dump(mode="json", exclude={"ray"})
        data["ray"] = self.ray.describe() if self.ray is not None else None
        return data


@dataclass(frozen=True)
class UnitSettings:
    """The settings that decide what a document yields, resolved for one run from its :class:`ProduceConfig` and
    artifact (recorded in the store; fixed for a run).

    ``candidates``: ``dense`` (the encoder's index) or ``bm25-translated`` (BM25 in the documents' language, each
    query translated into it first when the task is cross-language)."""

    queries_per_doc: int
    top_k: int
    chunk_size: int
    candidates: CandidateSource = "dense"
    max_identifiers: int | None = None  # extract at most this many identifiers (ProduceConfig.max_identifiers)
    hide_copied: bool = False  # retries not shown the sentences a query copied (ProduceConfig.hide_copied)
    copy_guard: int | None = None  # greedy write calls decoded without N-word copies (ProduceConfig.copy_guard)
    question_guard: bool = False  # rewrites decoded without questions (ProduceConfig.question_guard)
    planner: PlannerMode = "lm"  # who plans the blueprints: the LM's plan call or code (ProduceConfig.planner)
    prompt_format: PromptFormat = "json"  # how the JSON steps' prompts are written (ProduceConfig.prompt_format)
