"""Corpus readers: BEIR ``corpus.jsonl``, the NeuCLIR CSL release JSONL, and plain TSV.

Every reader fails on the first malformed line with an :class:`InputError` that names the file, the
1-based line number and the field, so a user can fix the input instead of guessing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from syntra_dspy.jsonl import json_objects
from syntra_dspy.errors import InputError

CorpusFormat = Literal["beir", "neuclir", "tsv"]
FORMATS: tuple[str, ...] = ("beir", "neuclir", "tsv")


@dataclass(frozen=True)
class Document:
    """One document; ``content`` is what encoders and LMs see."""

    doc_id: str
    title: str
    text: str

    @property
    def content(self) -> str:
        """Title and text joined by a newline when there is a title, else the text alone."""
        title = self.title.strip()
        return f"{title}\n{self.text}" if title else self.text


class Corpus:
    """An ordered, id-addressable collection of documents with a content fingerprint."""

    def __init__(self, documents: Iterable[Document], *, source: str | None = None) -> None:
        self._docs: list[Document] = list(documents)
        self._by_id: dict[str, int] = {}
        for pos, doc in enumerate(self._docs):
            if doc.doc_id in self._by_id:
                raise InputError(f"duplicate document id {doc.doc_id!r}", path=source, field="id",
                                 hint="document ids must be unique")
            self._by_id[doc.doc_id] = pos
        if not self._docs:
            raise InputError("the corpus has no documents", path=source,
                             hint="check the path and the --format")
        self.source = source
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self._docs)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs)

    def __getitem__(self, doc_id: str) -> Document:
        try:
            return self._docs[self._by_id[doc_id]]
        except KeyError:
            raise KeyError(f"no document with id {doc_id!r} in the corpus") from None

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._by_id

    def __repr__(self) -> str:
        return f"Corpus({len(self)} documents, source={self.source!r})"

    @property
    def ids(self) -> list[str]:
        """Document ids in corpus order (a fresh list)."""
        return [d.doc_id for d in self._docs]

    def get(self, doc_id: str, default: Document | None = None) -> Document | None:
        pos = self._by_id.get(doc_id)
        return self._docs[pos] if pos is not None else default

    @property
    def fingerprint(self) -> str:
        """sha256 over the canonical (id, title, text) sequence; the index cache key depends on it."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for d in self._docs:
                h.update(json.dumps([d.doc_id, d.title, d.text], ensure_ascii=False).encode("utf-8"))
                h.update(b"\n")
            self._fingerprint = h.hexdigest()
        return self._fingerprint


def corpus_from_documents(docs: Iterable[Document | tuple[str, str, str] | tuple[str, str]]) -> Corpus:
    """Build a corpus in memory (tests, notebooks): Documents, (id, title, text) or (id, text) tuples."""
    out: list[Document] = []
    for d in docs:
        if isinstance(d, Document):
            out.append(d)
        elif len(d) == 3:
            out.append(Document(str(d[0]), str(d[1]), str(d[2])))
        else:
            out.append(Document(str(d[0]), "", str(d[1])))
    return Corpus(out, source="<memory>")


def read_corpus(path: str | Path, format: CorpusFormat | str = "beir") -> Corpus:
    """Read a corpus file in one of :data:`FORMATS`; malformed input raises :class:`InputError`."""
    path = Path(path)
    if format not in FORMATS:
        raise InputError(f"unknown corpus format {format!r}", path=path, field="format",
                         hint=f"use one of {', '.join(FORMATS)}")
    if path.is_dir():
        candidate = path / "corpus.jsonl"
        if format == "beir" and candidate.is_file():
            path = candidate
        else:
            raise InputError("expected a corpus file, got a directory", path=path,
                             hint="point to the corpus file itself (e.g. corpus.jsonl)")
    if not path.is_file():
        raise InputError("corpus file not found", path=path, hint="check the corpus path")
    reader = {"beir": _read_beir, "neuclir": _read_neuclir, "tsv": _read_tsv}[format]
    seen: set[str] = set()
    docs: list[Document] = []
    for lineno, doc in reader(path):
        if doc.doc_id in seen:
            raise InputError(f"duplicate document id {doc.doc_id!r}", path=path, line=lineno,
                             field=_ID_FIELD[format], hint="document ids must be unique")
        seen.add(doc.doc_id)
        docs.append(doc)
    if not docs:
        raise InputError("the corpus has no documents", path=path, hint="check the path and the --format")
    return Corpus(docs, source=str(path))


_ID_FIELD = {"beir": "_id", "neuclir": "doc_id", "tsv": "id"}


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Non-blank lines with 1-based numbers; a decoding error names the line."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not valid UTF-8 ({exc.reason})", path=path, line=lineno,
                                 hint="re-encode the file as UTF-8") from None
            line = line.rstrip("\r\n")
            if line.strip():
                yield lineno, line


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    # _lines numbers lines itself (it skips blanks and reports bad UTF-8), so parse each line on its own.
    for lineno, line in _lines(path):
        yield from json_objects([line], source=path, start=lineno,
                                hint="each line must be one JSON object; is the corpus format right?")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _encodable(value: str, path: Path, lineno: int, key: str) -> str:
    """JSON's ``\\ud800`` escapes decode to lone surrogates, which cannot be written as UTF-8 (they would
    crash fingerprinting and every file the text reaches): refuse them here, where the line is known."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"contains a lone surrogate ({value[exc.start]!r} at character {exc.start}), which is "
                         "not valid Unicode text", path=path, line=lineno, field=key,
                         hint="fix the \\uD8xx-\\uDFxx escape in this line") from None
    return value


def _id(obj: dict[str, Any], key: str, path: Path, lineno: int) -> str:
    if key not in obj:
        raise InputError("missing document id", path=path, line=lineno, field=key,
                         hint=f"every line needs a non-empty {key!r}")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"document id must be a string, got {type(value).__name__}", path=path,
                         line=lineno, field=key)
    value = _encodable(str(value), path, lineno, key).strip()
    if not value:
        raise InputError("empty document id", path=path, line=lineno, field=key,
                         hint=f"every line needs a non-empty {key!r}")
    if _CONTROL.search(value):
        raise InputError(f"document id {value!r} contains a control character (newline, tab, ...)", path=path,
                         line=lineno, field=key, hint="ids are written one per line in runs, qrels and TSV files")
    return value


def _str(obj: dict[str, Any], key: str, path: Path, lineno: int, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise InputError("missing field", path=path, line=lineno, field=key)
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", path=path, line=lineno, field=key)
    return _encodable(value, path, lineno, key)


def _read_beir(path: Path) -> Iterator[tuple[int, Document]]:
    for lineno, obj in _json_objects(path):
        doc_id = _id(obj, "_id", path, lineno)
        title = _str(obj, "title", path, lineno)
        text = _str(obj, "text", path, lineno, required=True)
        _nonempty(title, text, path, lineno, "text")
        yield lineno, Document(doc_id, title, text)


def _read_neuclir(path: Path) -> Iterator[tuple[int, Document]]:
    for lineno, obj in _json_objects(path):
        doc_id = _id(obj, "doc_id", path, lineno)
        title = _str(obj, "title", path, lineno)
        abstract = _str(obj, "abstract", path, lineno, required=True)
        kws = obj.get("keywords")
        if kws is not None and not (isinstance(kws, list) and all(isinstance(k, str) for k in kws)):
            raise InputError("expected a list of strings", path=path, line=lineno, field="keywords")
        for keyword in kws or ():
            _encodable(keyword, path, lineno, "keywords")
        for key in ("category", "discipline"):
            _str(obj, key, path, lineno)
        _nonempty(title, abstract, path, lineno, "abstract")
        yield lineno, Document(doc_id, title, abstract)


def _read_tsv(path: Path) -> Iterator[tuple[int, Document]]:
    ncols: int | None = None
    first = True
    for lineno, line in _lines(path):
        cols = line.split("\t")
        if first:
            first = False
            if cols[0].strip().lower() in {"id", "_id", "doc_id", "docid"}:
                if len(cols) not in (2, 3):
                    raise InputError(f"header has {len(cols)} columns, expected 2 or 3", path=path,
                                     line=lineno, hint="use id<TAB>text or id<TAB>title<TAB>text")
                ncols = len(cols)
                continue
        if ncols is None:
            ncols = len(cols)
            if ncols not in (2, 3):
                raise InputError(f"found {ncols} tab-separated columns, expected 2 or 3", path=path,
                                 line=lineno, field="columns",
                                 hint="use id<TAB>text or id<TAB>title<TAB>text; escape tabs inside text")
        elif len(cols) != ncols:
            raise InputError(f"found {len(cols)} tab-separated columns, expected {ncols} like the first line",
                             path=path, line=lineno, field="columns",
                             hint="every line needs the same columns; escape tabs inside text")
        doc_id = cols[0].strip()
        if not doc_id:
            raise InputError("empty document id", path=path, line=lineno, field="id")
        if _CONTROL.search(doc_id):
            raise InputError(f"document id {doc_id!r} contains a control character", path=path, line=lineno,
                             field="id")
        title, text = (cols[1], cols[2]) if ncols == 3 else ("", cols[1])
        _nonempty(title, text, path, lineno, "text")
        yield lineno, Document(doc_id, title, text)


def _nonempty(title: str, text: str, path: Path, lineno: int, field: str) -> None:
    if not title.strip() and not text.strip():
        raise InputError("document has neither title nor text", path=path, line=lineno, field=field,
                         hint="remove the line or give it content")
