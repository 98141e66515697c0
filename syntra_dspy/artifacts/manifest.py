"""The typed, frozen form of ``manifest.json``: validated once when an artifact is verified, then read by field.

Production, comparison and the command line read ``artifact.meta`` (a :class:`Manifest`) instead of the raw
dict, so a default such as the chunk size or the seed lives here and nowhere else. Keys the package does not
read are kept as recorded (``extra="allow"``); older artifacts, which lack some fields, get the defaults below.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from syntra_dspy.judging.settings import JudgeMode
from syntra_dspy.programs.validation import NEAR_DUPLICATE
from syntra_dspy.task import TASK_NAME_MAX, TASK_NAME_PATTERN, CandidateSource, EncoderSpec, TaskDefinition


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class PromptRecord(_Open):
    instructions_sha256: str
    system_prompt_sha256: str
    system_prompt: str


class ManifestSettings(_Open):
    """The compile settings production reads back (the rest are kept as recorded)."""

    max_doc_chars: int = Field(1500, ge=1)
    near_duplicate: float = Field(NEAR_DUPLICATE, gt=0, le=1)
    chunk_size: int = Field(4, ge=1)
    selection_tau: float = Field(0.6, gt=0, le=1)
    seed: int = 42
    judge: JudgeMode = "written"  # artifacts from before the graded judge record none


class CorpusRecord(_Open):
    path: str | None = None
    format: str | None = None


class TaskSpecRecord(_Open):
    corpus: CorpusRecord = CorpusRecord()
    candidates: CandidateSource = "dense"  # artifacts from before the setting: the dense index


class EncoderRecord(_Open):
    """The encoder a compile used: the setting that loads it again (prompts included) and the id it had.

    Artifacts from before this record name their encoder only inside ``fingerprints.encoder`` (``name@hash``)."""

    model: str
    query_prompt: str | None = None
    document_prompt: str | None = None
    query_prefix: str | None = None
    document_prefix: str | None = None
    languages: list[str] | None = None
    multilingual: bool | None = None
    id: str

    def spec(self) -> EncoderSpec:
        return EncoderSpec.model_validate(self.model_dump(include=set(EncoderSpec.model_fields), exclude_none=True))


class AttemptRecord(_Open):
    number: int
    instruction: str
    score: float | None = None
    passed: bool = False


class LoopRecord(_Open):
    """One adaptation loop of the compile history (``LoopReport.to_dict()``)."""

    name: str
    attempts: list[AttemptRecord]
    kept: int = Field(ge=1)
    passed: bool = False
    stop_reason: str | None = None


class Fingerprints(_Open):
    examples: str | None = None
    corpus: str | None = None
    encoder: str | None = None
    index: str | None = None


class LMRecord(_Open):
    """A role's secret-free description (``describe_lm``); sampling values are checked where they are used."""

    model: str | None = None
    api_base: str | list[str] | None = None  # several when the role is spread over several servers
    temperature: Any = None
    max_tokens: Any = None
    embedded: dict[str, Any] | None = None


class StageUsage(_Open):
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class SampleRecord(_Open):
    selected: int | None = None
    documents: list[str] = []


class Manifest(_Open):
    """``manifest.json`` as the package reads it."""

    kind: str
    schema_version: int
    version: str
    program_id: str | None = None  # absent in artifacts written before each compile got its own record
    created_at: str | None = None
    task: str = Field(pattern=TASK_NAME_PATTERN, max_length=TASK_NAME_MAX)
    prompts: dict[str, PromptRecord]
    task_definition: TaskDefinition
    task_spec: TaskSpecRecord = TaskSpecRecord()
    settings: ManifestSettings = ManifestSettings()
    lms: dict[str, LMRecord | None] = {}
    fingerprints: Fingerprints = Fingerprints()
    encoder: EncoderRecord | None = None
    history: list[LoopRecord] = []
    usage: dict[str, StageUsage] = {}
    sample: SampleRecord = SampleRecord()
    strategy: str | None = None
    optimizer: dict[str, Any] = {}  # the strategy's parameters (their shape is the strategy's)
    record: dict[str, Any] = {}  # what this compile adds about itself (e.g. who reviewed it)
    seconds: float | None = None

    @property
    def generator(self) -> LMRecord:
        return self.lms.get("generator") or LMRecord()

    @property
    def program_identity(self) -> str:
        """Shared by every compile that made the same program (older artifacts: their version)."""
        return self.program_id or self.version

    def human_label_source(self) -> dict[str, Any] | None:
        return (self.optimizer.get("human_decisions") or {}).get("labels")
