"""LM backends: the embedded llama.cpp model (``llamacpp/``), served models, the scripted fake, roles and usage
metering."""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
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

__getattr__, __dir__ = lazy_exports(__name__, {
    "DEFAULT_EMBEDDED_MODEL": "syntra_dspy.lm.llamacpp",
    "EMBEDDED_MODELS": "syntra_dspy.lm.llamacpp",
    "EmbeddedModel": "syntra_dspy.lm.llamacpp",
    "LlamaCppEngine": "syntra_dspy.lm.llamacpp",
    "ensure_gguf": "syntra_dspy.lm.llamacpp",
    "get_embedded_model": "syntra_dspy.lm.llamacpp",
    "release_models": "syntra_dspy.lm.llamacpp",
    "CallCancelled": "syntra_dspy.errors",
    "CallPolicy": "syntra_dspy.lm.guarded",
    "CallTimedOut": "syntra_dspy.lm.guarded",
    "GuardedLM": "syntra_dspy.lm.guarded",
    "cancel_calls": "syntra_dspy.lm.guarded",
    "Fault": "syntra_dspy.lm.openai_server",
    "OpenAICompatibleServer": "syntra_dspy.lm.openai_server",
    "RoutedEngine": "syntra_dspy.lm.endpoints",
    "LMRoles": "syntra_dspy.lm.roles",
    "build_lm": "syntra_dspy.lm.roles",
    "describe_lm": "syntra_dspy.lm.roles",
    "parse_lm_flag": "syntra_dspy.lm.roles",
    "parse_lm_flags": "syntra_dspy.lm.roles",
    "sanitize_api_base": "syntra_dspy.lm.roles",
    "SCHEMA_FORMS": "syntra_dspy.lm.schema_forms",
    "StructuredOutput": "syntra_dspy.lm.schema_forms",
    "default_form": "syntra_dspy.lm.schema_forms",
    "NoScriptedAnswerError": "syntra_dspy.lm.scripted",
    "RuleResponder": "syntra_dspy.lm.scripted",
    "ScriptedCall": "syntra_dspy.lm.scripted",
    "ScriptedEngine": "syntra_dspy.lm.scripted",
    "ScriptedLM": "syntra_dspy.lm.scripted",
    "TokenDistribution": "syntra_dspy.lm.scripted",
    "StageUsage": "syntra_dspy.lm.usage",
    "UsageMeter": "syntra_dspy.lm.usage",
    "current_stage": "syntra_dspy.lm.usage",
    "submit_in_context": "syntra_dspy.lm.usage",
})
