"""Package namespaces whose names load on first use.

A package ``__init__`` that imports every submodule makes ``import syntra_dspy.production.config`` (a settings
class) load the whole pipeline, DSPy included: ``syntra COMMAND --help`` then takes seconds. With
:func:`lazy_exports` the package still offers the same names (``from syntra_dspy.production import produce``), each
imported from its submodule when first asked for.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps each public name to the module defining it."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
