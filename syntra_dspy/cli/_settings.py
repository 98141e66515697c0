"""Command-line flags generated from a settings model's fields (``ExportConfig``, ``AgreementConfig``, the compare
options): the model is the one source of each setting's default and help, and a flag not given leaves the model's
default in force.

A command lists its settings as ``(flag, field, argparse keywords)`` in help order; the keywords carry only what
refuses a malformed value early (type, choices, metavar, action).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from typing import Any

#: ``(flag, field name, argparse keywords)``
Setting = tuple[str, str, dict[str, Any]]


def setting_help(model: Any, name: str) -> str:
    """The field's description, with its default unless the default is None or a switch's, or the description
    already speaks of it."""
    field = model.model_fields[name]
    text = field.description or ""
    default = field.default
    shown = default is not None and not isinstance(default, bool) and "default" not in text
    return text + (f" (default {default})" if shown else "")


def add_settings(parser: argparse.ArgumentParser | Any, model: Any, settings: Iterable[Setting], *,
                 prefix: str = "") -> None:
    """One flag per setting, its value stored under the field's name (after ``prefix``, when two models of one
    command share a field name); None when not given."""
    for flag, name, kwargs in settings:
        parser.add_argument(flag, dest=prefix + name, default=None, help=setting_help(model, name), **kwargs)


def given_settings(args: argparse.Namespace, settings: Sequence[Setting], *, prefix: str = "") -> dict[str, Any]:
    """The settings the command line gave, by field name."""
    return {name: getattr(args, prefix + name) for _, name, _ in settings if getattr(args, prefix + name) is not None}
