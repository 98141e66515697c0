"""``compile_task``: task file → corpus context and sample → test mode → a new artifact version; its settings are
one :class:`CompileConfig`."""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import random
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

import dspy
from pydantic import Field, field_validator

from syntra_dspy import __version__
from syntra_dspy.artifacts import Artifact, canonical_json, check_artifact_root, load_artifact, save_artifact
from syntra_dspy.artifacts.manifest import LMRecord
from syntra_dspy.artifacts.store import manifests
from syntra_dspy.errors import ConfigError
from syntra_dspy.estimate import Estimate, compile_calls, compile_estimate
from syntra_dspy.lm.roles import LMRoles, embedded_name, role_specs, with_engine_build
from syntra_dspy.lm.usage import UsageMeter
from syntra_dspy.optimizers import STRATEGIES, CompileSettings
from syntra_dspy.programs.components import ComponentState, FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.retrieval.context import CorpusContext, setting_of
from syntra_dspy.retrieval.corpus import Corpus, read_corpus
from syntra_dspy.retrieval.encoder import Encoder, load_encoder
from syntra_dspy.retrieval.encoder_languages import check_encoder_languages, guess_task_languages
from syntra_dspy.settings_model import SettingsModel
from syntra_dspy.task import EncoderSpec, LMSpec, TaskDefinition, TaskSpec, load_task

logger = logging.getLogger(__name__)


def resolve_examples(spec: TaskSpec, corpus: Corpus, *, source: str = "task") -> tuple[FewShotPair, ...]:
    """Turn the task's examples into (query, positive text) pairs; an unknown positive_id is an error."""
    pairs = []
    for n, ex in enumerate(spec.examples):
        if ex.positive_id is not None:
            doc = corpus.get(ex.positive_id)
            if doc is None:
                raise ConfigError(f"positive_id {ex.positive_id!r} is not in the corpus {spec.corpus.path}",
                                  path=source, field=f"examples.{n}.positive_id")
            pairs.append(FewShotPair(query=ex.query, positive_id=ex.positive_id, positive_text=doc.content))
        else:
            pairs.append(FewShotPair(query=ex.query, positive_text=ex.positive_text or ""))
    return tuple(pairs)


def fingerprint_examples(pairs: tuple[FewShotPair, ...]) -> str:
    return hashlib.sha256(canonical_json([p.model_dump() for p in pairs])).hexdigest()


def check_task_encoder(spec: TaskSpec, encoder: EncoderSpec, pairs: tuple[FewShotPair, ...], *,
                       source: str) -> None:
    """Refuse, before any model is loaded, an encoder that cannot read the task's languages
    (:func:`check_encoder_languages`).

    A task without a definition has its languages guessed from the examples' scripts (Latin or Chinese queries and
    positives); the inferred definition is checked again once the compile has it."""
    definition = spec.task_definition
    if definition is None:
        guessed = guess_task_languages([p.query for p in pairs], [p.positive_text for p in pairs])
        if guessed is None:
            return
        definition = TaskDefinition(query_type="-", doc_type="-", relevance_definition="-",
                                    query_language=guessed[0], document_language=guessed[1])
    check_encoder_languages(definition, encoder, source=source)


def encoder_record(encoder: EncoderSpec, encoder_id: str) -> dict[str, Any]:
    """The manifest's ``encoder``: the setting that loads the encoder again, a folder made absolute, and its id."""
    model = Path(encoder.model).expanduser()
    absolute = str(model.resolve()) if model.exists() else encoder.model
    return {**encoder.model_dump(mode="json", exclude_none=True), "model": absolute, "id": encoder_id}


def sample_documents(context: CorpusContext, pairs: tuple[FewShotPair, ...], settings: CompileSettings
                     ) -> tuple[list[str], int]:
    """Diversity-aware selection (Algorithm 1), then a seeded sample of it for the trials.

    The few-shot positives are excluded so trials show the verifier documents it has not seen as examples.
    """
    selected = context.select(target=settings.selection_target, tau=settings.selection_tau, seed=settings.seed)
    exclude = {p.positive_id for p in pairs if p.positive_id}
    pool = [doc_id for doc_id in selected if doc_id not in exclude]
    rng = random.Random(settings.seed)
    sample = rng.sample(pool, min(settings.sample_docs, len(pool)))
    return sample, len(selected)


def corpus_context(spec: TaskSpec, *, encoder: str | EncoderSpec | Encoder | None = None,
                   index_dir: str | Path | None = None, source: str = "<task>"
                   ) -> tuple[CorpusContext, tuple[FewShotPair, ...]]:
    """The task's corpus context and its resolved examples: the corpus is read, the examples checked against it and
    the encoder checked against the task's languages before any model loads (``encoder``: a name, a setting, or a
    loaded encoder object, replacing the task file's setting)."""
    corpus = read_corpus(spec.corpus.path, spec.corpus.format)
    pairs = resolve_examples(spec, corpus, source=source)
    given = encoder if encoder is not None and not isinstance(encoder, (str, EncoderSpec)) else None
    setting = setting_of(given, spec.encoder_spec()) if given is not None else spec.encoder_spec(encoder)
    check_task_encoder(spec, setting, pairs, source=source)
    enc = given if given is not None else load_encoder(setting)
    return CorpusContext.build(corpus, enc, setting=setting, index_dir=index_dir), pairs


def check_context_corpus(spec: TaskSpec, context: CorpusContext) -> None:
    """A corpus context read from another file than the task's corpus is refused (it would compile other data)."""
    built = context.corpus.source
    if built and not built.startswith("<") and Path(built).resolve() != Path(spec.corpus.path).resolve():
        raise ConfigError(f"the corpus context was built over {built}, but the task's corpus is {spec.corpus.path}",
                          field="context", hint="build the context from this task (compiler.corpus_context)")


class CompileConfig(SettingsModel):
    """How one compile runs, defined and validated here: the strategy, its test-mode settings
    (:class:`~syntra_dspy.optimizers.CompileSettings`, whose fields are ``syntra compile``'s setting flags), the LM
    flags that replace the task file's roles, and where the corpus index is cached. :func:`compile_task` and
    :func:`plan_compile` take it, or its fields as keywords."""

    what: ClassVar[str] = "compile"
    command: ClassVar[str] = "syntra compile"

    strategy: str = Field("self-improve", description="the optimizer strategy: self-improve, none, gepa or human")
    settings: CompileSettings = Field(default_factory=CompileSettings, description="the test-mode settings")
    lm_overrides: dict[str, str | list[str]] | None = Field(None, description=(
        "LM roles replacing the task file's, by role (generator, verifier, refiner): MODEL[@API_BASE] each"))
    lm_timeout: float | None = Field(None, description=(
        "total seconds one request to a served LM may take, for every served role (default: the task file's)"))
    index_dir: str | Path | None = Field(None, description="where the corpus index is cached")

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, strategy: str) -> str:
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {strategy!r}; choose one of {', '.join(sorted(STRATEGIES))}")
        return strategy

    @field_validator("settings", mode="before")
    @classmethod
    def _default_settings(cls, value: Any) -> Any:
        return CompileSettings() if value is None else value


def compile_task(task: str | Path | TaskSpec, config: CompileConfig | None = None, *,
                 out: str | Path = "artifacts", lms: LMRoles | None = None,
                 encoder: str | EncoderSpec | Encoder | None = None, context: CorpusContext | None = None,
                 optimizer_kwargs: dict[str, Any] | None = None, **settings: Any) -> Artifact:
    """Compile a task into a frozen, versioned synthesis program under ``out`` and return the loaded artifact.

    ``config`` (a :class:`CompileConfig`: strategy, test-mode settings, LM flags, index folder) holds the settings;
    a caller may pass its fields as keywords instead (``compile_task(task, strategy="none")``), not both. The
    inputs: ``lms`` (built LM roles; default: the task file's, with ``lm_overrides`` and ``lm_timeout``, the total
    seconds per request of every served role); ``encoder`` (a name, a setting or a loaded encoder) replaces the task
    file's ``encoder`` setting, and a cross-language task refuses one that cannot read both languages; ``context``
    is the task's corpus context built already (see :func:`corpus_context`), in place of ``encoder`` and the index
    folder; ``optimizer_kwargs`` go to the strategy's optimizer."""
    config = CompileConfig.of_call(config, settings)
    strategy, settings, index_dir = config.strategy, config.settings, config.index_dir
    started = time.perf_counter()
    source = str(task) if not isinstance(task, TaskSpec) else "<task>"
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    check_artifact_root(out, spec.name)  # a bad --out or task name fails now, not after all the LM work
    if context is None:
        context, pairs = corpus_context(spec, encoder=encoder, index_dir=index_dir, source=source)
    elif encoder is not None or index_dir is not None:
        raise ConfigError("give either a corpus context or an encoder and index folder, not both", field="context")
    else:
        check_context_corpus(spec, context)
        pairs = resolve_examples(spec, context.corpus, source=source)
        check_task_encoder(spec, context.setting, pairs, source=source)
    corpus = context.corpus
    sample_ids, n_selected = sample_documents(context, pairs, settings)
    logger.info("compile %s: %d docs, %d selected, %d sampled for trials", spec.name, len(corpus), n_selected,
                len(sample_ids))
    roles = lms or LMRoles.from_spec(spec.lms, config.lm_overrides, timeout=config.lm_timeout)
    roles.prepare()
    meter = UsageMeter()
    optimizer = STRATEGIES[strategy](settings=settings, lms=roles, meter=meter, **(optimizer_kwargs or {}))
    student = SynthesisProgram(
        ComponentState(task_definition=spec.task_definition, examples=pairs) if spec.task_definition else None,
        max_doc_chars=settings.max_doc_chars, near_duplicate=settings.near_duplicate,
    )
    # Through the Teleprompter entry point, so DSPy's compile callbacks see it; the report comes separately.
    program = optimizer.compile(student, trainset=pairs, documents=[corpus[i] for i in sample_ids],
                                candidates=context.candidates)
    report = optimizer.report
    check_encoder_languages(program.state.task_definition, context.setting, source=source)  # an inferred definition
    manifest = {
        "task": spec.name,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "package": {"syntra_dspy": __version__, "dspy": dspy.__version__, "python": platform.python_version()},
        "task_spec": spec.model_dump(mode="json"),
        "task_definition": program.state.task_definition.model_dump(mode="json"),
        "task_definition_source": "given" if spec.task_definition else "inferred",
        "strategy": strategy,
        "settings": optimizer.settings.model_dump(mode="json"),  # with the judge the strategy compiled
        "optimizer": optimizer.get_params(),
        # with the engine build that graded the calibration set: another build's grades differ in the last digits
        "lms": {role: with_engine_build(info) for role, info in roles.describe().items()},
        "fingerprints": {
            "examples": fingerprint_examples(pairs),
            "corpus": corpus.fingerprint,
            "encoder": context.encoder.id,
            "index": context.index.fingerprint,
        },
        "encoder": encoder_record(context.setting, context.encoder.id),
        "sample": {"selected": n_selected, "documents": sample_ids},
        "history": [loop.to_dict() for loop in report.loops],
        "record": optimizer.compile_record(),
        "usage": meter.snapshot(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    path = save_artifact(program, json.loads(json.dumps(manifest, default=str)), out)
    logger.info("wrote %s", path)
    return load_artifact(path)


def plan_compile(task: str | Path | TaskSpec, config: CompileConfig | None = None, *, out: str | Path = "artifacts",
                 **settings: Any) -> Estimate:
    """The LM work :func:`compile_task` would do with these arguments, before any corpus, encoder or LM is loaded:
    stages x attempts x the calls of an attempt. The per-call figures are the usage of the newest artifact of the
    task under ``out`` compiled with the same generator, else the documented ones (:mod:`syntra_dspy.estimate`)."""
    config = CompileConfig.of_call(config, settings)
    strategy = config.strategy
    spec = task if isinstance(task, TaskSpec) else load_task(task)
    cls = STRATEGIES[strategy]
    settings = cls.settings_for(config.settings)
    generator = role_specs(spec.lms, config.lm_overrides)["generator"]
    graded = settings.judge == "graded"
    calls = compile_calls(
        sample_docs=settings.sample_docs, queries_per_doc=settings.queries_per_doc, examples=len(spec.examples),
        annotation_candidates=settings.annotation_candidates, control_negatives=settings.control_negatives,
        chunk_size=settings.chunk_size, graded=graded, graded_queries=settings.query_verifier == "graded",
        calibration_queries=settings.calibration_queries if settings.calibration_labels else 0,
        infer_definition=spec.task_definition is None and settings.infer_task_definition)
    earlier = sorted(((m.created_at or "", path, m) for path, m in manifests(out, spec.name)
                      if _same_generator(m.generator, generator) and m.usage), reverse=True)
    usage, source = None, None
    if earlier:
        _, path, m = earlier[0]
        # the annotation loop's calls are the judge's: another judge's say nothing about this one's
        usage = {stage: u.model_dump() for stage, u in m.usage.items()
                 if stage != "annotation_instruction" or m.settings.judge == settings.judge}
        source = f"the usage of an earlier compile of this task with the same generator ({path})"
    attempts = settings.max_attempts if cls.refines else 1
    estimate = compile_estimate(attempts=attempts, calls=calls, graded=graded,
                                embedded=embedded_name(generator.model) is not None,
                                what=f"compile {spec.name} ({strategy}, {settings.judge} judge, {len(calls)} stages)",
                                usage=usage, usage_source=source)
    if strategy == "gepa":
        estimate.notes.append("gepa: dspy.GEPA's search on a stage's trials (its budget of metric calls) comes on top")
    return estimate


def _same_generator(record: LMRecord, spec: LMSpec) -> bool:
    """Whether a manifest's generator is the model ``spec`` names (an embedded one by its registry name or file)."""
    name = embedded_name(spec.model)
    if name is None:
        return record.model == spec.model
    return (record.embedded or {}).get("name") in (name, Path(name).name)
