"""Evaluation datasets: queries + qrels (+ the corpus to search), from BEIR or NeuCLIRTech layouts.

Dataset specs, as the command line takes them:

``beir:PATH[:split]``
    ``PATH/corpus.jsonl``, ``PATH/queries.jsonl`` and ``PATH/qrels/<split>.tsv``. Without a split,
    ``test`` is used, or the only qrels file there is.
``neuclirtech:PATH[:eng|zho]``
    NeuCLIRTech's ``data/eng.tsv`` / ``data/zho.tsv`` topics (``topic_id<TAB>title description``, no
    header) and ``data/qrels.gains.txt`` (TREC qrels, gains 0/1/3); ``PATH`` is the dataset folder or
    its ``data/`` folder. ``eng`` (the default) is the cross-language task, English queries over the
    Chinese CSL documents; ``zho`` is the monolingual task. The CSL documents (JSONL
    ``{doc_id,title,abstract,keywords,category,discipline}``) are a separate release: pass their file
    (``docs=`` / ``--corpus``) or put it at ``PATH/docs.jsonl``, ``PATH/csl.jsonl`` or
    ``PATH/corpus.jsonl``.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from syntra_dspy.retrieval.corpus import Corpus, read_corpus
from syntra_dspy.jsonl import json_objects
from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.evaluation.trec import Qrels, read_qrels

logger = logging.getLogger(__name__)

NEUCLIRTECH_LANGUAGES = {"eng": "en", "zho": "zh"}
NEUCLIRTECH_DOC_FILES = ("docs.jsonl", "csl.jsonl", "corpus.jsonl")
DATASET_KINDS = ("beir", "neuclirtech")


@dataclass
class EvalDataset:
    """What an evaluation needs: queries, judgments, and (to retrieve, not to score a run) the corpus.

    ``language`` is the document language and ``query_language`` the query language (ISO 639-1);
    they differ for cross-language tasks. ``corpus`` may be ``None`` when only runs are scored.
    """

    name: str
    queries: dict[str, str]
    qrels: Qrels
    corpus: Corpus | None = None
    language: str = "en"
    query_language: str = "en"
    runs: dict[str, Path] = field(default_factory=dict)

    def __repr__(self) -> str:
        docs = f"{len(self.corpus)} docs" if self.corpus is not None else "no corpus"
        return (f"EvalDataset({self.name!r}, {len(self.queries)} queries, {len(self.qrels)} judged, {docs}, "
                f"{self.query_language}->{self.language})")

    @property
    def cross_language(self) -> bool:
        return self.language != self.query_language

    @property
    def judged_queries(self) -> list[str]:
        """Query ids that have both a text and judgments: the queries an evaluation scores."""
        return [q for q in self.queries if q in self.qrels]

    def require_corpus(self) -> Corpus:
        if self.corpus is None:
            raise ConfigError(f"dataset {self.name!r} was loaded without its documents",
                              hint="give the corpus file (--corpus / docs=)")
        return self.corpus


# --- queries --------------------------------------------------------------------------------------


def read_topics_tsv(path: str | Path) -> dict[str, str]:
    """NeuCLIRTech topics: ``topic_id<TAB>query`` per line, no header."""
    path = Path(path)
    if not path.is_file():
        raise InputError("topics file not found", path=path)
    topics: dict[str, str] = {}
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise InputError(f"not valid UTF-8 ({exc.reason})", path=path, line=lineno) from None
            if not line.strip():
                continue
            qid, sep, text = line.partition("\t")
            qid, text = qid.strip(), text.strip()
            if not sep or not qid or not text:
                raise InputError("expected 'topic_id<TAB>title description'", path=path, line=lineno,
                                 hint="one topic per line, id and text separated by a tab, no header")
            if qid in topics:
                raise InputError(f"topic {qid!r} appears twice", path=path, line=lineno, field="topic_id")
            topics[qid] = text
    if not topics:
        raise InputError("no topics in the file", path=path)
    return topics


def read_beir_queries(path: str | Path) -> dict[str, str]:
    """BEIR ``queries.jsonl``: one ``{"_id", "text"}`` object per line."""
    path = Path(path)
    if not path.is_file():
        raise InputError("queries file not found", path=path)
    queries: dict[str, str] = {}
    with path.open(encoding="utf-8-sig") as fh:
        for lineno, obj in json_objects(fh, source=path):
            for key in ("_id", "text"):
                if not isinstance(obj.get(key), (str, int)) or isinstance(obj.get(key), bool) \
                        or not str(obj[key]).strip():
                    raise InputError("missing or empty", path=path, line=lineno, field=key)
            queries[str(obj["_id"]).strip()] = str(obj["text"]).strip()
    if not queries:
        raise InputError("no queries in the file", path=path)
    return queries


# --- languages ------------------------------------------------------------------------------------


def _is_cjk(ch: str) -> bool:
    return "CJK" in unicodedata.name(ch, "") or "\u3040" <= ch <= "\u30ff"


def detect_language(texts: Iterable[str], *, sample: int = 200) -> str:
    """'zh' when CJK characters make up a third or more of the letters in a sample, else 'en'."""
    cjk = letters = 0
    for i, text in enumerate(texts):
        if i >= sample:
            break
        for ch in text:
            if ch.isalpha():
                letters += 1
                cjk += _is_cjk(ch)
    return "zh" if letters and cjk / letters >= 1 / 3 else "en"


# --- loaders --------------------------------------------------------------------------------------


def load_beir(path: str | Path, split: str | None = None, *, load_corpus: bool = True,
              language: str | None = None) -> EvalDataset:
    """A BEIR folder; the language (for BM25 tokenisation) is detected from the text unless given."""
    root = Path(path)
    if not root.is_dir():
        raise InputError("BEIR dataset folder not found", path=root,
                         hint="expected a folder with corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    qrels_dir = root / "qrels"
    if split is None:
        available = sorted(p.stem for p in qrels_dir.glob("*.tsv"))
        if "test" in available or not available:
            split = "test"
        elif len(available) == 1:
            split = available[0]
            logger.info("using the only qrels split there is: %s", split)
        else:
            raise ConfigError(f"no test split and several others: {', '.join(available)}", path=qrels_dir,
                              hint=f"name one, e.g. beir:{root}:{available[0]}")
    qrels_path = qrels_dir / f"{split}.tsv"
    if not qrels_path.is_file():
        available = ", ".join(sorted(p.stem for p in qrels_dir.glob("*.tsv"))) or "none"
        raise InputError(f"no qrels for split {split!r} (available: {available})", path=qrels_path)
    queries = read_beir_queries(root / "queries.jsonl")
    qrels = read_qrels(qrels_path)
    corpus = read_corpus(root / "corpus.jsonl", format="beir") if load_corpus else None
    doc_language = language or (detect_language(d.content for d in corpus) if corpus is not None
                                else detect_language(queries.values()))
    query_language = language or detect_language(queries.values())
    return EvalDataset(name=f"beir:{root.name}:{split}", queries=queries, qrels=qrels, corpus=corpus,
                       language=doc_language, query_language=query_language)


def _neuclirtech_data_dir(root: Path) -> Path:
    for candidate in (root / "data", root):
        if (candidate / "qrels.gains.txt").is_file():
            return candidate
    raise InputError("not a NeuCLIRTech folder: no data/qrels.gains.txt", path=root,
                     hint="point to the dataset folder holding data/eng.tsv, data/zho.tsv, "
                          "data/qrels.gains.txt")


def find_neuclirtech_docs(root: str | Path) -> Path | None:
    """The CSL documents file placed beside the dataset, if there is one."""
    root = Path(root)
    for base in (root, root / "data"):
        for name in NEUCLIRTECH_DOC_FILES:
            if (base / name).is_file():
                return base / name
    return None


def load_neuclirtech(path: str | Path, lang: str = "eng", *, docs: str | Path | None = None,
                     load_corpus: bool = True) -> EvalDataset:
    """NeuCLIRTech: ``eng`` (cross-language) or ``zho`` (monolingual) topics, gains qrels, CSL docs.

    The queries are the whole ``topic_id<TAB>title description`` text, as the paper's runs use them.
    ``runs`` lists ``PATH/runs/*.trec`` by file stem, so released runs can be rescored.
    """
    if lang not in NEUCLIRTECH_LANGUAGES:
        raise ConfigError(f"unknown NeuCLIRTech query language {lang!r}", field="lang",
                          hint="use eng (cross-language) or zho (monolingual)")
    root = Path(path)
    data = _neuclirtech_data_dir(root)
    dataset_root = data.parent if data.name == "data" else data
    queries = read_topics_tsv(data / f"{lang}.tsv")
    qrels = read_qrels(data / "qrels.gains.txt")
    corpus = None
    if load_corpus:
        docs_path = Path(docs) if docs is not None else find_neuclirtech_docs(dataset_root)
        if docs_path is None:
            raise ConfigError("no CSL documents file found for this NeuCLIRTech dataset", path=root,
                              hint="pass the CSL JSONL with --corpus (docs=), or place it at "
                                   f"{dataset_root / 'docs.jsonl'}")
        corpus = read_corpus(docs_path, format="neuclir")
    runs = {p.stem: p for p in sorted((dataset_root / "runs").glob("*.trec"))}
    task = "clir" if lang == "eng" else "mono"
    return EvalDataset(name=f"neuclirtech:{task}", queries=queries, qrels=qrels, corpus=corpus,
                       language="zh", query_language=NEUCLIRTECH_LANGUAGES[lang], runs=runs)


def parse_dataset_spec(spec: str) -> tuple[str, Path, str | None]:
    """``kind:PATH[:option]`` -> (kind, path, option); a colon inside an existing path is kept."""
    kind, sep, rest = spec.partition(":")
    if not sep or kind not in DATASET_KINDS or not rest:
        raise ConfigError(f"cannot read dataset spec {spec!r}", field="dataset",
                          hint="use beir:PATH[:split] or neuclirtech:PATH[:eng|zho]")
    option = None
    head, sep, tail = rest.rpartition(":")
    if sep and head and tail and "/" not in tail and "\\" not in tail and not Path(rest).exists():
        rest, option = head, tail
    return kind, Path(rest).expanduser(), option


def load_dataset(spec: str, *, docs: str | Path | None = None, load_corpus: bool = True,
                 language: str | None = None) -> EvalDataset:
    """Load ``beir:PATH[:split]`` or ``neuclirtech:PATH[:eng|zho]`` (see the module docstring)."""
    kind, path, option = parse_dataset_spec(spec)
    if kind == "beir":
        if docs is not None:
            raise ConfigError("a BEIR dataset reads PATH/corpus.jsonl; --corpus is for NeuCLIRTech",
                              field="corpus")
        return load_beir(path, option, load_corpus=load_corpus, language=language)
    return load_neuclirtech(path, option or "eng", docs=docs, load_corpus=load_corpus)
