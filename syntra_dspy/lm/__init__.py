"""LM backends: the embedded llama.cpp model (``llamacpp/``), served models, the scripted fake, roles and usage
metering."""

from __future__ import annotations

from syntra_dspy.lm.llamacpp import (
    DEFAULT_EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    EmbeddedModel,
    LlamaCppEngine,
    ensure_gguf,
    get_embedded_model,
    release_models,
)
from syntra_dspy.errors import CallCancelled
from syntra_dspy.lm.guarded import CallPolicy, CallTimedOut, GuardedLM, cancel_calls
from syntra_dspy.lm.openai_server import Fault, OpenAICompatibleServer
from syntra_dspy.lm.endpoints import RoutedEngine
from syntra_dspy.lm.roles import LMRoles, build_lm, describe_lm, parse_lm_flag, parse_lm_flags, sanitize_api_base
from syntra_dspy.lm.schema_forms import SCHEMA_FORMS, StructuredOutput, default_form
from syntra_dspy.lm.scripted import (
    NoScriptedAnswerError,
    RuleResponder,
    ScriptedCall,
    ScriptedEngine,
    ScriptedLM,
    TokenDistribution,
)
from syntra_dspy.lm.usage import StageUsage, UsageMeter, current_stage, submit_in_context

__all__ = [
    "CallCancelled",
    "CallPolicy",
    "CallTimedOut",
    "DEFAULT_EMBEDDED_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "Fault",
    "GuardedLM",
    "LMRoles",
    "LlamaCppEngine",
    "NoScriptedAnswerError",
    "OpenAICompatibleServer",
    "RoutedEngine",
    "RuleResponder",
    "ScriptedCall",
    "ScriptedEngine",
    "ScriptedLM",
    "SCHEMA_FORMS",
    "StageUsage",
    "StructuredOutput",
    "TokenDistribution",
    "UsageMeter",
    "build_lm",
    "cancel_calls",
    "current_stage",
    "default_form",
    "describe_lm",
    "ensure_gguf",
    "get_embedded_model",
    "parse_lm_flag",
    "parse_lm_flags",
    "release_models",
    "sanitize_api_base",
    "submit_in_context",
]
