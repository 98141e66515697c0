"""The task file: what a user writes to describe a retrieval task (YAML, validated with pydantic)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from syntra_dspy.errors import ConfigError
from syntra_dspy.languages import language_code

CorpusFormat = Literal["beir", "neuclir", "tsv"]
#: Where production's candidates come from: the dense index (the encoder), or BM25 over the documents' language with
#: each query first translated into that language by the generator (cross-language tasks).
CandidateSource = Literal["dense", "bm25-translated"]
#: How a served role sends a structured step's JSON schema (:mod:`syntra_dspy.lm.schema_forms` says what each means).
SchemaForm = Literal["json_schema", "structured_outputs", "guided_json", "json_object", "none"]
#: A task name is a folder name under the artifact root: letters, digits, ``_.-``, short enough for any file system.
TASK_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
TASK_NAME_MAX = 100
#: The encoder of a task whose file names none: all-MiniLM-L6-v2, the English model bundled with the package.
DEFAULT_ENCODER = "all-MiniLM-L6-v2"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorpusSpec(_Strict):
    """Where the unlabelled corpus is and how it is laid out."""

    path: str = Field(description="corpus file (BEIR corpus.jsonl, NeuCLIR CSL JSONL, or TSV id<TAB>[title<TAB>]text)")
    format: CorpusFormat = "beir"


class Example(_Strict):
    """A few-shot pair: a query and its relevant document, by corpus id or by text."""

    query: str = Field(min_length=1)
    positive_id: str | None = None
    positive_text: str | None = None

    @model_validator(mode="after")
    def _one_positive(self) -> "Example":
        if (self.positive_id is None) == (self.positive_text is None):
            raise ValueError("give exactly one of positive_id (a corpus id) or positive_text")
        return self


class EncoderSpec(_Strict):
    """The sentence encoder a task indexes, selects and retrieves with, and how it marks queries and documents.

    Written as a plain string it is ``model``. ``query_prompt``/``document_prompt`` name prompts the model defines
    (``config_sentence_transformers.json``; by default ``query`` and ``document``/``passage`` are used when it has
    them); ``query_prefix``/``document_prefix`` give the text itself (e.g. ``"query: "`` for E5 models). Either
    changes the encoder's id, so an index or artifact made with other prompts is never reused. ``languages`` (or
    ``multilingual: true``) says what the model reads; without it the package's list of known models decides, and
    a cross-language task refuses a model that is English-only or not on that list.
    """

    model: str = Field(min_length=1, description="a known name (all-MiniLM-L6-v2, embeddinggemma-300m), a "
                                                 "sentence-transformers model folder, or a hub id")
    query_prompt: str | None = Field(None, min_length=1)
    document_prompt: str | None = Field(None, min_length=1)
    query_prefix: str | None = Field(None, min_length=1)
    document_prefix: str | None = Field(None, min_length=1)
    languages: list[str] | None = Field(None, min_length=1)
    multilingual: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: object) -> object:
        return {"model": value} if isinstance(value, str) else value

    @field_validator("languages")
    @classmethod
    def _codes(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        codes = [code.strip().lower() for code in value]
        if any(not code.isalpha() or not 2 <= len(code) <= 3 for code in codes):
            raise ValueError("languages are ISO 639 codes such as en or zh")
        return list(dict.fromkeys(codes))

    @model_validator(mode="after")
    def _consistent(self) -> "EncoderSpec":
        for role in ("query", "document"):
            if getattr(self, f"{role}_prompt") is not None and getattr(self, f"{role}_prefix") is not None:
                raise ValueError(f"give {role}_prompt (a prompt name the model defines) or {role}_prefix (the text "
                                 "itself), not both")
        if self.multilingual is not None and self.languages is not None:
            raise ValueError("give languages (a list of codes) or multilingual: true, not both")
        if self.multilingual is False:
            raise ValueError("multilingual: false does not say which language the model reads; give languages: "
                             "[en] (or the model's language) instead")
        return self


class TaskDefinition(_Strict):
    """What queries look like, what documents look like, and when a document is relevant."""

    query_type: str = Field(min_length=1)
    doc_type: str = Field(min_length=1)
    relevance_definition: str = Field(min_length=1)
    query_language: str = "en"
    document_language: str = "en"

    @field_validator("query_language", "document_language")
    @classmethod
    def _code(cls, value: str) -> str:
        """One spelling per language (``zho``, ``ZH`` -> ``zh``): prompts, the script check and whether the task is
        cross-language all compare codes."""
        return language_code(value)

    @property
    def cross_language(self) -> bool:
        return self.query_language != self.document_language


class LMTimeout(_Strict):
    """How long one request to a served model may take: to connect, and in total (seconds).

    ``total`` bounds the whole request, however slowly a server sends its answer; a request that runs out is
    retried like any transient failure. Written as a number, it is the total (connect stays at most 10 s).
    """

    connect: float = Field(10.0, gt=0, allow_inf_nan=False)
    total: float = Field(120.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _from_number(cls, value: object) -> object:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {"total": value, "connect": min(10.0, value) if value > 0 else value}
        return value


def server_address_problem(base: str) -> str | None:
    """What is wrong with a served model's address, or None when it is a plain ``http(s)://host[:port]/path``.

    Checked before any connection or DNS lookup, and the answer never quotes the address: credentials in it
    (``http://user:KEY@host``) would reach the resolver as part of a host name, and the terminal in an echo.
    """
    try:
        parts = urlsplit(base.strip())
        _port = parts.port  # raises for a port out of range or not a number
    except ValueError as exc:
        why = ("an IPv6 address needs its closing ]" if "IPv6" in str(exc)
               else "the port must be a number from 0 to 65535" if "Port" in str(exc) else "malformed")
        return f"is not a valid server address ({why}); e.g. http://host:8000/v1 or http://[::1]:8000/v1"
    if parts.scheme not in ("http", "https"):
        shown = f"{parts.scheme}://" if parts.scheme else "no scheme"
        return f"is not an http(s) server address ({shown}); e.g. http://host:8000/v1"
    if "@" in parts.netloc:
        return ("holds credentials (user:password@host); an address must not carry a key: put the key in an "
                "environment variable and name it with api_key_env (--api-key-env VAR)")
    if not parts.hostname:
        return "has no host name; e.g. http://host:8000/v1"
    return None


class LMSpec(_Strict):
    """One LM role: a DSPy/LiteLLM model string (or 'embedded[:name]'), with an optional server address.

    Keys are read from the environment (``api_key_env``), never from the task file, so nothing secret
    can end up in an artifact. ``timeout`` and ``retries`` bound every request to a served model.
    ``api_base`` may list several servers of the same model: requests are balanced over them and fail over
    between them; one that fails rests ``cooldown`` seconds (default 10) before it is sent requests again.
    ``schema_form`` says how a structured step's JSON schema reaches the server (default: by model route, see
    :mod:`syntra_dspy.lm.schema_forms`).
    """

    # A refused address may hold a credential: pydantic would quote it in its error message.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    model: str = "embedded"
    api_base: str | list[str] | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: LMTimeout | None = None
    retries: int | None = Field(None, ge=0, le=20)
    schema_form: SchemaForm | None = None
    cooldown: float | None = Field(None, gt=0, le=3600, allow_inf_nan=False)

    @field_validator("api_base")
    @classmethod
    def _addresses(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value is None:
            return value
        if isinstance(value, str):
            problem = server_address_problem(value)
            if problem:
                raise ValueError(f"api_base {problem}")
            return value
        if not value:
            raise ValueError("api_base is an empty list; give one server address or several")
        seen: set[str] = set()
        for i, base in enumerate(value):
            problem = server_address_problem(base)
            if problem:
                raise ValueError(f"api_base[{i}] {problem}")
            key = base.strip().rstrip("/")
            if key in seen:
                raise ValueError(f"api_base[{i}] repeats an earlier address; list each server once")
            seen.add(key)
        return value[0] if len(value) == 1 else value

    @property
    def api_bases(self) -> list[str]:
        """Every server address (none for the embedded model or a provider's default address)."""
        if self.api_base is None:
            return []
        return [self.api_base] if isinstance(self.api_base, str) else list(self.api_base)


class LMRolesSpec(_Strict):
    generator: LMSpec = LMSpec()
    verifier: LMSpec | None = None
    refiner: LMSpec | None = None


class TaskSpec(_Strict):
    name: str = Field(pattern=TASK_NAME_PATTERN, max_length=TASK_NAME_MAX,
                      description="used as the artifact folder name")
    corpus: CorpusSpec
    examples: list[Example] = Field(min_length=3, max_length=8)
    task_definition: TaskDefinition | None = None
    lms: LMRolesSpec | None = None
    encoder: EncoderSpec | None = None  # None: all-MiniLM-L6-v2, the bundled English model
    candidates: CandidateSource = "dense"

    def encoder_spec(self, override: "str | EncoderSpec | None" = None) -> EncoderSpec:
        """The encoder to use: ``override`` (a command line's ``--encoder``, which replaces the whole setting), else
        the task file's ``encoder``, else the bundled English default."""
        if isinstance(override, EncoderSpec):
            return override
        if override is not None:
            return EncoderSpec(model=override)
        if self.encoder is not None:
            return self.encoder
        return EncoderSpec(model=DEFAULT_ENCODER)

    def resolve_paths(self, base: Path) -> "TaskSpec":
        """Return a copy whose corpus path (and encoder folder) is absolute, relative paths read from the task
        file's folder. An encoder given by name stays a name: only a relative path that exists there is a folder."""
        p = Path(self.corpus.path).expanduser()
        if not p.is_absolute():
            p = (base / p).resolve()
        update: dict[str, object] = {"corpus": self.corpus.model_copy(update={"path": str(p)})}
        if self.encoder is not None:
            model = Path(self.encoder.model).expanduser()
            if not model.is_absolute() and (base / model).is_dir():
                update["encoder"] = self.encoder.model_copy(update={"model": str((base / model).resolve())})
        return self.model_copy(update=update)


def _loc(err: dict) -> str:
    return ".".join(str(p) for p in err["loc"]) or "(top level)"


def parse_task(data: object, *, source: str = "<task>") -> TaskSpec:
    """Validate an already-parsed task mapping; errors name the source, the field and what is expected."""
    if not isinstance(data, dict):
        raise ConfigError("a task file must be a YAML mapping with name, corpus and examples", path=source)
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
        raise ConfigError(f"{first['msg']}{more}", path=source, field=_loc(first)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # an unhashable key is refused by the base loader
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first given on line {seen[key]})", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> object:
    """Parse a UTF-8 YAML file; bad encoding, bad syntax and duplicate keys are ConfigErrors with a line."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})", path=path, line=line,
                          hint="save the file as UTF-8") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(f"not valid YAML: {getattr(exc, 'problem', exc)}", path=path,
                          line=(mark.line + 1) if mark else None) from None


def load_task(path: str | Path) -> TaskSpec:
    """Read and validate a task YAML file; the corpus path is resolved relative to the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("task file not found", path=path)
    return parse_task(read_yaml(path), source=str(path)).resolve_paths(path.parent)
