"""The package's layering: each folder of ``syntra_dspy`` (and each root module) imports only from the layers below
its own, so no import goes round in a circle. An import that must go up is named in ``UPWARD`` with its reason.

The imports are read from the source (``ast``), those inside functions included: an import that only runs later
still ties the two modules together.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "syntra_dspy"

#: Lowest first. A unit is a subpackage (``judging``) or a root module (``task``); each imports only from lower rows.
LAYERS = (
    {"_lazy", "cache", "code_version", "decoding_guards", "errors", "estimate", "languages", "redact"},
    {"copying", "jsonl", "models", "outputs", "query_form", "settings_model", "signatures", "task"},
    {"lm", "retrieval"},
    {"evaluation", "training"},
    {"judging"},
    {"programs"},
    {"artifacts", "optimizers"},
    {"compiler", "production", "testing"},
    {"comparison"},
    {"cli"},
)
#: (importer, imported) -> why the import goes up a layer.
UPWARD = {
    ("syntra_dspy.evaluation.devset", "syntra_dspy.programs.translation"):
        "a dev set's titles are translated by the one typed translation step production uses (one prompt, recorded "
        "in the provenance file), not by a second one",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) module pairs within the package."""
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    pairs = set()
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parents + ([base] if base else []))
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for target in targets:
                found = known(target) if target.startswith("syntra_dspy") else None
                if found and found != name:
                    pairs.add((name, found))
    return pairs


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_unit_has_a_layer():
    layered = set().union(*LAYERS)
    units = {_unit(m) for m in _modules()} - {None}
    assert units - layered == set(), "give each new folder or root module a row in LAYERS"


def test_imports_go_down_the_layers():
    row = {unit: n for n, units in enumerate(LAYERS) for unit in units}
    upward = sorted((a, b) for a, b in _imports(_modules())
                    if _unit(a) and _unit(b) and _unit(a) != _unit(b) and row[_unit(a)] <= row[_unit(b)])
    assert [pair for pair in upward if pair not in UPWARD] == []
    assert sorted(UPWARD) == upward, "an UPWARD entry no longer happens: remove it"


def test_no_module_imports_itself_round_a_circle():
    modules = _modules()
    edges: dict[str, set[str]] = {}
    for a, b in _imports(modules):
        if not a.startswith(b + "."):  # a package's own __init__ is loaded first anyway
            edges.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert circles == []
