"""The documentation stays true: the README is short, every relative link points to a file that exists, and the
MkDocs site builds under --strict (broken links between pages, missing headings, pages left out of the nav)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _outside_code(text: str) -> str:
    """The text with fenced code blocks and inline code spans blanked out."""
    kept, fence = [], None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            kept.append("")
        elif fence is not None:
            if line.lstrip().startswith(fence):
                fence = None
            kept.append("")
        else:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def _links(path: Path) -> list[str]:
    text = _outside_code(path.read_text(encoding="utf-8"))
    return _INLINE_LINK.findall(text) + _REFERENCE_LINK.findall(text)


def _slug(heading: str) -> str:
    """The anchor GitHub and MkDocs give a plain heading: lower case, punctuation dropped, spaces as hyphens."""
    heading = re.sub(r"[`*_]", "", heading.strip().lower())
    heading = re.sub(r"[^\w\s-]", "", heading)
    return re.sub(r"\s+", "-", heading).strip("-")


def _anchors(path: Path) -> set[str]:
    text = _outside_code(path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.MULTILINE)}


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, more than {README_MAX_LINES}: move the detail into docs/"
    )


def test_docs_pages_exist():
    assert (ROOT / "mkdocs.yml").is_file()
    assert (DOCS / "index.md").is_file()
    assert len(list(DOCS.glob("*.md"))) > 1


def test_every_relative_link_points_to_an_existing_file():
    broken = []
    for path in _markdown_files():
        for url in _links(path):
            if _SCHEME.match(url) or url.startswith(("#", "/")):
                continue
            target, _, fragment = url.partition("#")
            resolved = (path.parent / target.partition("?")[0]).resolve()
            where = f"{path.relative_to(ROOT)}: {url}"
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif ROOT not in resolved.parents and resolved != ROOT:
                broken.append(f"{where} (outside the repository)")
            elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
                broken.append(f"{where} (no heading with that anchor)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_sees_links():
    """Guard against a link pattern that silently matches nothing."""
    assert any("docs/" in url for url in _links(README))
    assert any(url.startswith("../benchmarks/results/") for page in DOCS.glob("*.md") for url in _links(page))


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (it is in the `test` extra: pip install -e '.[test]')")
def test_mkdocs_builds_strict(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
