"""MkDocs hook: links from docs/ to files elsewhere in the repository (mkdocs.yml names it under `hooks:`).

Pages link to measurements beside their data, e.g. `../benchmarks/results/teaching_signal/README.md`. Such a link
works where the Markdown is read in the repository, but MkDocs 1.6 reports a relative link that leaves docs_dir
exactly as it reports a link to a missing page (`validation.links.not_found`), and no setting tells the two apart.
Lowering `not_found` would stop `mkdocs build --strict` from catching broken links between pages, so this hook
handles the links that leave docs/ instead:

- a target that does not exist in the repository is a warning, which --strict turns into a failed build;
- a target that exists is copied into the site under `repo/` (as a file: a README.md stays Markdown text, it is
  not rendered as a page), and the link is pointed at the copy, which MkDocs then finds and checks like any file.

Links inside fenced code blocks are left alone.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.repo_links")  # a child of "mkdocs": --strict counts its warnings

COPY_DIR = "repo"
_LINK = re.compile(r"(\]\()(<?)([^)\s>]+)(>?(?:\s+\"[^\"]*\")?\))")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class _RepositoryFile(File):
    """A repository file copied into the site as it is."""

    def is_documentation_page(self) -> bool:
        return False


def _outside_docs(page_src_uri: str, url: str) -> tuple[str, str] | None:
    """(path relative to docs_dir starting with '../', '#fragment' or '') for a link that leaves docs_dir."""
    if _SCHEME.match(url) or url.startswith(("/", "#", "\\")):
        return None
    path, _, fragment = url.partition("#")
    path = path.partition("?")[0]
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(page_src_uri), path))
    if joined != ".." and not joined.startswith("../"):
        return None
    return joined, ("#" + fragment if fragment else "")


def _outside_code(markdown: str, rewrite) -> str:
    """Apply `rewrite` to the parts of `markdown` outside fenced code blocks."""
    out, chunk, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            out.append(rewrite("".join(chunk)))
            chunk, fence = [], stripped[:3]
            out.append(line)
        elif fence is not None:
            out.append(line)
            if stripped.startswith(fence):
                fence = None
        else:
            chunk.append(line)
    out.append(rewrite("".join(chunk)))
    return "".join(out)


def _repository_root(config) -> str:
    return os.path.dirname(os.path.abspath(config.config_file_path))


def _target(config, outside: str) -> tuple[str, str] | None:
    """(absolute path, path relative to the repository root) of an existing file, else None."""
    root = _repository_root(config)
    absolute = os.path.normpath(os.path.join(config.docs_dir, outside))
    relative = os.path.relpath(absolute, root)
    if relative.startswith("..") or not os.path.isfile(absolute):
        return None
    return absolute, relative.replace(os.sep, "/")


def on_files(files: Files, config) -> Files:
    wanted: dict[str, str] = {}
    for page in files.documentation_pages():
        if not page.abs_src_path:
            continue
        with open(page.abs_src_path, encoding="utf-8") as handle:
            text = handle.read()

        def collect(part: str, page=page) -> str:
            for match in _LINK.finditer(part):
                outside = _outside_docs(page.src_uri, match.group(3))
                found = outside and _target(config, outside[0])
                if found:
                    wanted[found[1]] = found[0]
            return part

        _outside_code(text, collect)
    for relative, absolute in sorted(wanted.items()):
        src_uri = f"{COPY_DIR}/{relative}"
        if files.get_file_from_path(src_uri) is None:
            files.append(_RepositoryFile.generated(config, src_uri, abs_src_path=absolute))
    return files


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    src_uri = page.file.src_uri

    def rewrite(part: str) -> str:
        def one(match: re.Match) -> str:
            outside = _outside_docs(src_uri, match.group(3))
            if not outside:
                return match.group(0)
            found = _target(config, outside[0])
            if not found:
                log.warning(
                    f"Doc file '{src_uri}' links to '{match.group(3)}', which is not a file in the repository."
                )
                return match.group(0)
            copy = posixpath.relpath(f"{COPY_DIR}/{found[1]}", posixpath.dirname(src_uri) or ".")
            return f"{match.group(1)}{match.group(2)}{copy}{outside[1]}{match.group(4)}"

        return _LINK.sub(one, part)

    return _outside_code(markdown, rewrite)
