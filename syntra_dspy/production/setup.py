"""Everything a production run needs before its first LM call, resolved from the artifact and checked.

The artifact decides: the frozen program (through the verified loader), the corpus (unless ``--corpus``),
the candidate source (the task file's ``candidates`` unless ``--candidates``), the encoder (the one recorded in
its manifest, with its query and document prompts; refused if this machine's copy has other weights unless the user
names an encoder), the selection's tau and seed, the annotation chunk size and the generator (unless
``--generator``). The store's first session records these; a resumed run must match them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dspy
from pydantic import ValidationError

from syntra_dspy.artifacts import Artifact, load_artifact, render_prompts
from syntra_dspy.retrieval.corpus import Corpus, read_corpus
from syntra_dspy.retrieval.encoder import Encoder, load_encoder
from syntra_dspy.errors import ArtifactError, ConfigError, DependencyError
from syntra_dspy.judging.judge import judge_mode
from syntra_dspy.retrieval.index import CorpusIndex
from syntra_dspy.models.registry import EMBEDDED_MODELS
from syntra_dspy.lm.roles import EMBEDDED, build_lm, describe_lm, parse_lm_flags, sanitize_api_base
from syntra_dspy.redact import redact
from syntra_dspy.artifacts.manifest import CorpusRecord, EncoderRecord, Manifest
from syntra_dspy.production.config import ProduceConfig, UnitSettings
from syntra_dspy.retrieval.context import CorpusContext
from syntra_dspy.task import EncoderSpec, LMSpec

logger = logging.getLogger(__name__)


@dataclass
class ProductionInputs:
    """The verified artifact, the corpus context production runs over, and the unit settings."""

    artifact: Artifact
    context: CorpusContext
    settings: UnitSettings

    @property
    def corpus(self) -> Corpus:
        return self.context.corpus

    @property
    def encoder(self) -> Encoder:
        return self.context.encoder

    @property
    def index(self) -> CorpusIndex:
        return self.context.index


def load_verified(artifact_path: str | Path, key_env: str | None = None) -> Artifact:
    """Load through the verified loader (with ``key_env``: only an artifact signed with that team key) and check,
    once more, that every step's instructions are the artifact's byte for byte (the loader already compares
    the rendered prompts with the manifest)."""
    artifact = load_artifact(artifact_path, key_env=key_env)
    if not artifact.program.frozen:
        raise ArtifactError("the loaded program is not frozen", path=artifact.path)
    rendered_prompts = render_prompts(artifact.program)
    for name, recorded in artifact.meta.prompts.items():  # older artifacts record no later steps
        rendered = rendered_prompts[name]
        if rendered["instructions_sha256"] != recorded.instructions_sha256:
            raise ArtifactError(f"step '{name}' instructions differ from the artifact's", path=artifact.path)
    return artifact


def resolve_encoder(recorded: str | None, encoder: str | EncoderSpec | Encoder | None, *,
                    setting: EncoderRecord | None = None) -> Encoder:
    """The encoder the artifact was compiled with (``recorded``: its id; ``setting``: the manifest's encoder record,
    prompts included), another one only when the user names it."""
    if encoder is not None and not isinstance(encoder, (str, EncoderSpec)):
        return encoder  # a loaded encoder (or any object with encode_queries/encode_documents, id and name)
    if encoder is not None:
        enc = load_encoder(encoder)
        if recorded and enc.id != recorded:
            logger.warning("using encoder %s; the artifact was compiled with %s", enc.id, recorded)
        return enc
    if not recorded:
        raise ArtifactError("the manifest records no encoder", field="fingerprints.encoder",
                            hint="pass --encoder NAME")
    wanted = setting.spec() if setting is not None else recorded.rsplit("@", 1)[0]
    name = wanted if isinstance(wanted, str) else wanted.model
    try:
        enc = load_encoder(wanted)
    except (ConfigError, DependencyError) as exc:
        raise type(exc)(f"cannot load the artifact's encoder {name!r}: {exc.message}", field="encoder",
                        hint=exc.hint or "install it, or pass --encoder NAME to use another encoder deliberately"
                        ) from None
    if enc.id != recorded:
        raise ConfigError(
            f"the artifact was compiled with encoder {recorded}, but {name!r} here is {enc.id} (other weights)",
            field="fingerprints.encoder",
            hint="install the same encoder weights, or pass --encoder NAME to use this one deliberately")
    return enc


def corpus_location(recorded: CorpusRecord, corpus: str | Path | None, corpus_format: str | None
                    ) -> tuple[Path, str]:
    """The corpus file and format to read: the user's, else the one the artifact was compiled on."""
    path = corpus if corpus is not None else recorded.path
    if not path:
        raise ArtifactError("the manifest records no corpus path", field="task_spec.corpus.path",
                            hint="pass --corpus PATH")
    return Path(path), corpus_format or recorded.format or "beir"


def resolve_corpus(recorded: CorpusRecord, corpus: str | Path | Corpus | None, corpus_format: str | None) -> Corpus:
    """The corpus given, else the one the artifact was compiled on."""
    if isinstance(corpus, Corpus):
        return corpus
    return read_corpus(*corpus_location(recorded, corpus, corpus_format))


def load_inputs(artifact_path: str | Path, config: ProduceConfig | None = None, *,
                corpus: str | Path | Corpus | None = None, encoder: str | EncoderSpec | Encoder | None = None,
                context: CorpusContext | None = None) -> ProductionInputs:
    """The verified artifact, corpus, encoder, index and unit settings.

    ``config`` gives the unit settings (its ``candidates`` overrides the task file's setting recorded in the
    artifact, its ``chunk_size`` the compile's), ``corpus_format``, ``index_dir`` and ``artifact_key_env``.
    ``context`` is a corpus context built already (e.g. the one a comparison compiled with), in place of
    ``corpus``, ``encoder`` and ``config.index_dir``."""
    config = config or ProduceConfig()
    artifact = load_verified(artifact_path, config.artifact_key_env)
    meta = artifact.meta
    if context is None:
        docs = resolve_corpus(meta.task_spec.corpus, corpus, config.corpus_format)
        enc = resolve_encoder(meta.fingerprints.encoder, encoder, setting=meta.encoder)
        context = CorpusContext.build(docs, enc, index_dir=config.index_dir)
    elif corpus is not None or encoder is not None or config.index_dir is not None:
        raise ConfigError("give either a corpus context or a corpus, encoder and index folder, not both",
                          field="context")
    docs, enc, index = context.corpus, context.encoder, context.index
    fps = meta.fingerprints
    if docs.fingerprint == fps.corpus and enc.id == fps.encoder and index.fingerprint != fps.index:
        raise ConfigError("the index does not match the artifact's, though corpus and encoder do",
                          path=index.path, hint="delete the cached index folder so it is rebuilt")
    if docs.fingerprint != fps.corpus:
        logger.info("producing over %s, not the corpus the artifact was compiled on", docs.source)
    return ProductionInputs(artifact, context, unit_settings(config, artifact, len(docs)))


def unit_settings(config: ProduceConfig, artifact: Artifact, documents: int) -> UnitSettings:
    """What each document yields in this run: the config's settings, the artifact's where the config leaves them
    open (chunk size, candidate source), ``top_k`` capped at the corpus's ``documents``. A chunk size is refused
    for an artifact whose graded judge grades one candidate per call: it would do nothing."""
    meta = artifact.meta
    top_k = config.top_k
    if top_k > documents:  # retrieval cannot return more; an absurd value must not reach a C library as is
        logger.warning("top_k (--top-k) %d is more than the corpus's %d documents: every query retrieves all %d",
                       top_k, documents, documents)
        top_k = documents
    if config.chunk_size is not None and judge_mode(artifact.program) == "graded":
        raise ConfigError(f"--chunk-size {config.chunk_size} would do nothing: this artifact's graded judge grades "
                          "one candidate per call (chunks are the written judge's)", field="chunk_size",
                          hint="drop --chunk-size")
    chunk = config.chunk_size if config.chunk_size is not None else meta.settings.chunk_size
    source = config.candidates if config.candidates is not None else meta.task_spec.candidates
    identifiers = None if config.max_identifiers == "all" else config.max_identifiers
    return UnitSettings(config.queries_per_doc, top_k, chunk, source, max_identifiers=identifiers,
                        hide_copied=config.hide_copied, copy_guard=config.copy_guard,
                        question_guard=config.question_guard, planner=config.planner,
                        prompt_format=config.prompt_format)


def _recorded_sampling(meta: Manifest) -> dict[str, Any]:
    """The generator's sampling settings recorded at compile time (part of what the program was tuned with)."""
    sampling = {"temperature": meta.generator.temperature, "max_tokens": meta.generator.max_tokens}
    try:
        LMSpec(**sampling)
    except ValidationError as exc:
        raise ArtifactError(f"malformed generator settings: {exc.errors()[0]['msg']}", field="lms.generator") from None
    return sampling


def _artifact_generator(meta: Manifest) -> LMSpec:
    """The artifact's own generator, taken only when it is a registry model that runs in this process.

    A served model's address and key variable are never taken from an artifact: a file cannot decide where
    document text and the user's key are sent. Nor is a GGUF path (a file could name any file to load).
    """
    info = meta.generator
    sampling = _recorded_sampling(meta)
    model = info.model or "embedded"
    if model == "scripted":
        raise ConfigError("the artifact was compiled with the scripted test LM, which production cannot reach",
                          field="lms.generator", hint="pass --generator MODEL[@API_BASE] (or 'embedded')")
    name = (info.embedded or {}).get("name")
    if name in EMBEDDED_MODELS:
        return LMSpec(model=f"{EMBEDDED}:{name}", **sampling)
    if not info.model_dump(exclude_none=True):  # no generator recorded
        return LMSpec(model=EMBEDDED, **sampling)
    bases = [info.api_base] if isinstance(info.api_base, str) else list(info.api_base or [])
    where = f" at {', '.join(str(sanitize_api_base(b)) for b in bases)}" if bases else ""
    raise ConfigError(f"the artifact was compiled with generator {str(model)[:80]!r}{where}; production takes a "
                      "served model, its address and its key only from the command line", field="generator",
                      hint="pass --generator MODEL@http://HOST:PORT/v1 (and --api-key-env VAR for a key), "
                           "or --generator embedded")


def resolve_generator_spec(meta: Manifest, generator: str | list[str] | LMSpec | None,
                           api_key_env: str | None = None, *, timeout: float | None = None,
                           retries: int | None = None) -> LMSpec:
    """The generator's settings: the artifact's (in-process) unless one is given. What a Ray worker rebuilds
    its LM from (an LM object cannot cross to another machine; its key is read there from ``api_key_env``).

    A ``MODEL[@API_BASE]`` flag (or several, one per server of the same model) keeps the artifact's sampling
    settings; the key variable, the timeout (total seconds per request) and the retries come from the command
    line only.
    """
    if isinstance(generator, LMSpec):
        spec = generator
    elif isinstance(generator, (str, list)):
        flag = parse_lm_flags(generator)
        spec = LMSpec(model=flag.model, api_base=flag.api_base, **_recorded_sampling(meta))
    else:
        spec = _artifact_generator(meta)
    changes = {"api_key_env": api_key_env, "timeout": timeout, "retries": retries}
    try:
        return LMSpec.model_validate({**spec.model_dump(), **{k: v for k, v in changes.items() if v is not None}})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{first['msg']}, got {redact(repr(first.get('input')))}",
                          field=str(first["loc"][0])) from None


def resolve_generator(meta: Manifest, generator: str | list[str] | LMSpec | dspy.LM | None,
                      api_key_env: str | None = None, *, timeout: float | None = None,
                      retries: int | None = None) -> tuple[dspy.LM, dict[str, Any]]:
    """The generator LM and its secret-free description (see :func:`resolve_generator_spec`)."""
    if isinstance(generator, dspy.LM):
        return generator, describe_lm(generator, role="generator")
    spec = resolve_generator_spec(meta, generator, api_key_env, timeout=timeout, retries=retries)
    lm = build_lm(spec, role="generator")
    return lm, describe_lm(lm, role="generator", spec=spec)


def grader(info: Mapping[str, Any]) -> tuple[Any, Any]:
    """What makes two LMs' grades interchangeable, from an LM's description: the model, and for an embedded one its
    file's checksum."""
    return info.get("model"), (info.get("embedded") or {}).get("sha256")


def calibration_grader(meta: Manifest) -> tuple[Any, Any]:
    """The LM whose grades an artifact's judge calibration was fitted on: a recalibration's generator when it graded
    (its record names the model only), else the compile's generator."""
    regraded_by = ((meta.record or {}).get("recalibration") or {}).get("generator")
    return (regraded_by, None) if regraded_by else grader(meta.generator.model_dump())


def same_grader(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Whether two graders (:func:`grader`) are the same model; a checksum only one side records is not compared."""
    return a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1])


def candidates_record(inputs: ProductionInputs) -> dict[str, Any]:
    """What the run store keeps about candidate retrieval: the source, and for translated BM25 the target language
    and the translation step's exact instruction (it is not part of the artifact)."""
    definition = inputs.artifact.program.state.task_definition
    record: dict[str, Any] = {"source": inputs.settings.candidates}
    if inputs.settings.candidates == "bm25-translated":
        from syntra_dspy.programs.translation import QueryTranslator

        record["bm25_language"] = definition.document_language
        record["translation"] = (QueryTranslator(definition.document_language).describe()
                                 if definition.cross_language else None)
    return record


def unit_identity(artifact: Artifact, settings: UnitSettings) -> dict[str, Any]:
    """The part of :func:`run_identity` known before the corpus is encoded: the artifact and the unit settings."""
    return {"artifact_checksum": artifact.checksum, "queries_per_doc": settings.queries_per_doc,
            "top_k": settings.top_k, "chunk_size": settings.chunk_size, "candidates": settings.candidates}


def run_identity(inputs: ProductionInputs) -> dict[str, Any]:
    """What a resumed run (and every Ray worker) must share with the first session, or its records would differ."""
    return {
        **unit_identity(inputs.artifact, inputs.settings),
        "corpus_fingerprint": inputs.corpus.fingerprint, "encoder": inputs.encoder.id,
        "index_fingerprint": inputs.index.fingerprint,
    }
