"""Faster builds of the engine's libraries, used only on a CPU that runs them.

The portable build (``scripts/build-llama.sh``) stops at AVX2 so that it decodes on any x86-64 server of the last
decade. On a CPU with AVX-512, a build that uses it evaluates prompts 1.4-1.7x faster
(``benchmarks/results/engine_speed/``), and prompt evaluation is about half of production's LM time; but such a
library dies with an illegal instruction on a CPU without it, and which host a machine lands on is not known when it
is set up. So the setup installs the faster build's libraries *beside* the portable package
(``<prefix>/llama-cpp-variants/<name>/lib``, with a ``variant.json`` naming the CPU flags its instructions need),
and the choice is made per process, before ``llama_cpp`` is imported (llama-cpp-python loads its libraries from
``LLAMA_CPP_LIB_PATH`` when set): a variant is taken when the CPU advertises every flag it needs and a smoke decode
with it passes in a child process (:mod:`.engine_check`); otherwise the portable build, with a note saying why.

The setup builds two: ``avx512`` and, on a CPU with AMX and where clang is installed, ``amx`` (llama.cpp's AMX
kernels; prompts another 1.63x faster). The most demanding variant that runs is taken, so ``amx`` before ``avx512``.

``SYNTRA_LLAMA_VARIANT=portable`` (or a variant's name) overrides the choice; a ``LLAMA_CPP_LIB_PATH`` the user set
is left alone.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from syntra_dspy.errors import ConfigError

logger = logging.getLogger(__name__)

#: Where llama-cpp-python looks for its shared libraries when set.
LIB_PATH_ENV = "LLAMA_CPP_LIB_PATH"
#: ``auto`` (the default), ``portable``, or an installed variant's name.
CHOICE_ENV = "SYNTRA_LLAMA_VARIANT"
PORTABLE = "portable"
_FOLDER = "llama-cpp-variants"


@dataclass(frozen=True)
class Variant:
    """One installed build of the engine's libraries and what it needs from the CPU."""

    name: str
    lib_dir: Path
    llama_cpp_version: str
    cpu_flags: tuple[str, ...]


def variants_root(prefix: str | Path | None = None) -> Path:
    """The folder the setup installs variants into: beside the environment's packages."""
    return Path(prefix if prefix is not None else sys.prefix) / _FOLDER


def installed(root: Path | None = None) -> list[Variant]:
    """The variants installed under ``root`` (default :func:`variants_root`), by name; a broken entry is skipped with
    a warning naming its file."""
    root = root or variants_root()
    out = []
    for spec in sorted(root.glob("*/variant.json")):
        try:
            data = json.loads(spec.read_text())
            variant = Variant(name=str(data["name"]), lib_dir=spec.parent / "lib",
                              llama_cpp_version=str(data["llama_cpp_version"]),
                              cpu_flags=tuple(str(f) for f in data["cpu_flags"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring the engine build described by %s: %s", spec, exc)
            continue
        if not variant.lib_dir.is_dir():
            logger.warning("ignoring the engine build described by %s: its lib folder is missing", spec)
            continue
        out.append(variant)
    return out


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The feature flags this CPU advertises (Linux ``/proc/cpuinfo``; empty where it cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def installed_llama_cpp_version() -> str | None:
    """The installed llama-cpp-python's version, read without importing it (importing loads its libraries)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def why_not(variant: Variant, flags: frozenset[str], version: str | None) -> str | None:
    """Why ``variant`` cannot run here, or None when it may (the smoke decode still decides)."""
    missing = [f for f in variant.cpu_flags if f not in flags]
    if missing:
        return f"this CPU does not advertise {', '.join(missing)}"
    if version is not None and variant.llama_cpp_version != version:
        return (f"it was built for llama-cpp-python {variant.llama_cpp_version}, the installed one is {version} "
                "(run scripts/setup.sh again)")
    return None


def candidates(choice: str | None = None, *, root: Path | None = None, flags: frozenset[str] | None = None,
               version: str | None = None) -> tuple[list[Variant], list[str]]:
    """The variants to try, fastest first, and a note for each installed one that is not tried.

    ``choice`` (default: ``$SYNTRA_LLAMA_VARIANT`` or ``auto``) is ``auto``, ``portable`` or a variant's name; naming
    a variant that is not installed, or that this CPU cannot run, is an error rather than a silent fallback."""
    choice = (choice if choice is not None else os.environ.get(CHOICE_ENV, "")).strip() or "auto"
    if choice == PORTABLE:
        return [], []
    found = installed(root)
    flags = cpu_flags() if flags is None else flags
    version = installed_llama_cpp_version() if version is None else version
    if choice != "auto":
        named = [v for v in found if v.name == choice]
        if not named:
            have = ", ".join(["auto", PORTABLE, *(v.name for v in found)])
            raise ConfigError(f"{CHOICE_ENV}={choice!r} names no installed engine build", field=CHOICE_ENV,
                              hint=f"use one of: {have} (scripts/build-llama.sh PY --variant NAME installs one)")
        reason = why_not(named[0], flags, version)
        if reason:
            raise ConfigError(f"{CHOICE_ENV}={choice!r} cannot run here: {reason}", field=CHOICE_ENV,
                              hint=f"unset it or set {CHOICE_ENV}=auto to let the engine choose")
        return named, []
    usable, notes = [], []
    for variant in found:
        reason = why_not(variant, flags, version)
        if reason:
            notes.append(f"the {variant.name} build is not used: {reason}")
        else:
            usable.append(variant)
    # more required flags = a newer instruction set: try the most demanding build first
    usable.sort(key=lambda v: -len(v.cpu_flags))
    return usable, notes
