"""The full-corpus dense index: FAISS inner product over L2-normalised vectors, cached on disk.

The cache key is ``sha256(corpus.fingerprint + encoder.id)``: the same corpus with the same weights is
never encoded twice, and any change to either rebuilds. The vectors are kept beside the FAISS index
(``vectors.npy``) so diversity-aware selection can reuse them without reading them back out of FAISS.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.outputs import check_replaceable_folder, swap_folder_into_place

if TYPE_CHECKING:
    from syntra_dspy.retrieval.corpus import Corpus
    from syntra_dspy.retrieval.encoder import Encoder

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
KIND = "syntra-corpus-index"  # the marker in meta.json: only a folder that carries it is ever replaced
INDEX_FILE, IDS_FILE, VECTORS_FILE, META_FILE = "index.faiss", "ids.json", "vectors.npy", "meta.json"
_FILES = frozenset({INDEX_FILE, IDS_FILE, VECTORS_FILE, META_FILE})
_GPU_MAX_K = 2048
_ENCODE_CHUNK = 1024  # texts per encoder call: large enough for length bucketing, small enough for progress


def index_fingerprint(corpus: Corpus, encoder: Encoder) -> str:
    """The cache key of an index: changes when the corpus text or the encoder weights change."""
    return hashlib.sha256((corpus.fingerprint + encoder.id).encode("utf-8")).hexdigest()


def _faiss() -> Any:
    import faiss

    return faiss


def _maybe_to_gpu(cpu_index: Any) -> Any:
    """Move a flat index to all GPUs when this faiss build has any; otherwise keep it on the CPU."""
    faiss = _faiss()
    get_num_gpus = getattr(faiss, "get_num_gpus", None)
    try:
        ngpu = int(get_num_gpus()) if get_num_gpus is not None else 0
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not stop CPU search
        ngpu = 0
    if ngpu <= 0 or os.environ.get("SYNTRA_FAISS_CPU") == "1":
        return cpu_index
    try:
        gpu_index = faiss.index_cpu_to_all_gpus(cpu_index)
    except Exception as exc:  # noqa: BLE001 - fall back to CPU with a note
        logger.warning("could not move the index to %d GPU(s) (%s); searching on the CPU", ngpu, exc)
        return cpu_index
    logger.info("index moved to %d GPU(s)", ngpu)
    return gpu_index


class CorpusIndex:
    """Document vectors, their ids and a FAISS ``IndexFlatIP`` over them (exact cosine search)."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, *, fingerprint: str | None = None,
                 encoder_id: str | None = None, faiss_index: Any | None = None,
                 path: Path | None = None) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(ids):
            raise ValueError(f"vectors must be (len(ids), dim); got {vectors.shape} for {len(ids)} ids")
        if len(ids) == 0:
            raise ValueError("an index needs at least one document")
        self.ids: list[str] = list(ids)
        self._pos = {doc_id: i for i, doc_id in enumerate(self.ids)}
        if len(self._pos) != len(self.ids):
            raise ValueError("document ids in an index must be unique")
        self.vectors = vectors
        self.encoder_id = encoder_id
        self.path = path
        if fingerprint is None:
            h = hashlib.sha256()
            h.update(json.dumps(self.ids).encode("utf-8"))
            h.update(vectors.tobytes())
            fingerprint = h.hexdigest()
        self.fingerprint = fingerprint
        if faiss_index is None:
            faiss_index = _faiss().IndexFlatIP(vectors.shape[1])
            faiss_index.add(vectors)
        self._cpu_index = faiss_index
        self._index = _maybe_to_gpu(faiss_index)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"CorpusIndex({len(self)} docs, dim={self.dim}, fingerprint={self.fingerprint[:12]})"

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def faiss_index(self) -> Any:
        """The CPU FAISS index (what is saved); searches may run on a GPU copy."""
        return self._cpu_index

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def from_vectors(cls, ids: Sequence[str], vectors: np.ndarray, *, normalize: bool = True,
                     encoder_id: str | None = None) -> CorpusIndex:
        """An in-memory index from precomputed vectors (L2-normalised here unless ``normalize=False``)."""
        from syntra_dspy.retrieval.encoder import normalize as _normalize

        vecs = _normalize(vectors) if normalize else np.asarray(vectors, dtype=np.float32)
        return cls(ids, vecs, encoder_id=encoder_id)

    @classmethod
    def build(cls, corpus: Corpus, encoder: Encoder, *, batch_size: int = 32,
              progress: bool = True) -> CorpusIndex:
        """Encode every document (title + text) and index the vectors; nothing is written."""
        from tqdm.auto import tqdm

        ids = corpus.ids
        texts = [doc.content for doc in corpus]
        parts: list[np.ndarray] = []
        with tqdm(total=len(texts), desc="encoding corpus", unit="doc", disable=not progress) as bar:
            for start in range(0, len(texts), _ENCODE_CHUNK):
                chunk = texts[start:start + _ENCODE_CHUNK]
                parts.append(encoder.encode_documents(chunk, batch_size=batch_size))
                bar.update(len(chunk))
        vectors = np.concatenate(parts, axis=0)
        return cls(ids, vectors, fingerprint=index_fingerprint(corpus, encoder), encoder_id=encoder.id)

    @classmethod
    def load_or_build(cls, corpus: Corpus, encoder: Encoder, index_dir: str | Path, *,
                      batch_size: int = 32, progress: bool = True) -> CorpusIndex:
        """Reuse the index in ``index_dir`` when its fingerprint matches, else build and save it."""
        index_dir = Path(index_dir)
        wanted = index_fingerprint(corpus, encoder)
        reason = _stale_reason(index_dir, wanted)
        if reason is None:
            try:
                index = cls.load(index_dir)
            except InputError as exc:
                reason = f"the saved index is unreadable ({exc})"
            else:
                logger.info("reusing index %s (%d docs, fingerprint %s)", index_dir, len(index), wanted[:12])
                return index
        check_replaceable(index_dir)  # before encoding: a folder we may not replace fails at once
        logger.info("building index in %s: %s", index_dir, reason)
        index = cls.build(corpus, encoder, batch_size=batch_size, progress=progress)
        index.save(index_dir)
        return index

    # -- persistence ----------------------------------------------------------------------------

    def save(self, index_dir: str | Path) -> Path:
        """Write the four files to a temporary folder and swap it into place atomically."""
        faiss = _faiss()
        index_dir = Path(index_dir)
        check_replaceable(index_dir)
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.tmp-", dir=index_dir.parent))
        try:
            faiss.write_index(self._cpu_index, str(tmp / INDEX_FILE))
            np.save(tmp / VECTORS_FILE, self.vectors, allow_pickle=False)
            (tmp / IDS_FILE).write_text(json.dumps(self.ids, ensure_ascii=False), encoding="utf-8")
            meta = {
                "schema_version": SCHEMA_VERSION,
                "kind": KIND,
                "fingerprint": self.fingerprint,
                "encoder_id": self.encoder_id,
                "dims": self.dim,
                "count": len(self),
                "metric": "inner_product",
                "faiss_version": getattr(faiss, "__version__", None),
                "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }
            (tmp / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
            swap_folder_into_place(tmp, index_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.path = index_dir
        return index_dir

    @classmethod
    def load(cls, index_dir: str | Path) -> CorpusIndex:
        """Read a saved index; any missing or inconsistent file raises :class:`InputError`."""
        faiss = _faiss()
        index_dir = Path(index_dir)
        meta = _read_meta(index_dir)
        if meta is None:
            raise InputError("no saved index here", path=index_dir / META_FILE,
                             hint="build one with `syntra index`")
        try:
            ids = json.loads((index_dir / IDS_FILE).read_text(encoding="utf-8"))
            vectors = np.load(index_dir / VECTORS_FILE, allow_pickle=False)
            faiss_index = faiss.read_index(str(index_dir / INDEX_FILE))
        except (OSError, ValueError, RuntimeError) as exc:
            raise InputError(f"cannot read the saved index ({exc})", path=index_dir,
                             hint="delete the folder to rebuild it") from None
        count = meta.get("count")
        if not (isinstance(ids, list) and len(ids) == count == vectors.shape[0] == faiss_index.ntotal):
            raise InputError("the saved index files disagree on the document count", path=index_dir,
                             field="count", hint="delete the folder to rebuild it")
        if vectors.ndim != 2 or vectors.shape[1] != meta.get("dims") or faiss_index.d != meta.get("dims"):
            raise InputError("the saved index files disagree on the dimension", path=index_dir,
                             field="dims", hint="delete the folder to rebuild it")
        return cls(ids, vectors, fingerprint=meta["fingerprint"], encoder_id=meta.get("encoder_id"),
                   faiss_index=faiss_index, path=index_dir)

    # -- queries --------------------------------------------------------------------------------

    def vector(self, doc_id: str) -> np.ndarray:
        """The stored (normalised) vector of a document."""
        try:
            return self.vectors[self._pos[doc_id]]
        except KeyError:
            raise KeyError(f"no document with id {doc_id!r} in the index") from None

    def position(self, doc_id: str) -> int:
        """Row of ``doc_id`` in :attr:`vectors`."""
        return self._pos[doc_id]

    def search(self, query_vectors: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` (doc id, cosine) per query vector, best first."""
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}", field="k")
        q = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if q.ndim == 1:
            q = q[None, :]
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"query vectors must have dimension {self.dim}, got shape {q.shape}")
        if q.shape[0] == 0:
            return []
        k = min(k, len(self))
        backend = self._index if k <= _GPU_MAX_K else self._cpu_index  # GPU flat search caps k
        scores, rows = backend.search(q, k)
        return [[(self.ids[r], float(s)) for r, s in zip(row_ids, row_scores) if r >= 0]
                for row_ids, row_scores in zip(rows, scores)]

    def search_texts(self, encoder: Encoder, queries: Sequence[str], k: int,
                     batch_size: int = 32) -> list[list[tuple[str, float]]]:
        """Encode queries (with the encoder's query prompt) and search."""
        if self.encoder_id is not None and encoder.id != self.encoder_id:
            raise ConfigError(f"this index was built with {self.encoder_id}, not {encoder.id}",
                              field="encoder", hint="use the same encoder for queries and documents")
        return self.search(encoder.encode_queries(list(queries), batch_size=batch_size), k)


def _read_meta(index_dir: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((index_dir / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _stale_reason(index_dir: Path, wanted: str) -> str | None:
    """Why the saved index cannot be reused, or None when it can."""
    if not (index_dir / META_FILE).exists():
        return "no saved index"
    meta = _read_meta(index_dir)
    if meta is None:
        return "meta.json is unreadable"
    if meta.get("schema_version") != SCHEMA_VERSION:
        return f"saved schema {meta.get('schema_version')} != {SCHEMA_VERSION}"
    if meta.get("fingerprint") != wanted:
        return "the corpus or the encoder changed (fingerprint mismatch)"
    missing = [f for f in (INDEX_FILE, IDS_FILE, VECTORS_FILE) if not (index_dir / f).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    return None


def check_replaceable(index_dir: Path) -> None:
    """Refuse to replace anything but a folder this module wrote: only index files in it, and a ``meta.json``
    with the index marker and a fingerprint. An empty or missing folder is fine. Raises ConfigError."""
    hint = "give --index-dir a new or empty folder (the default is .syntra/index/<fingerprint>)"
    check_replaceable_folder(index_dir, marker=META_FILE, kind=KIND, files=_FILES, required=("fingerprint",),
                             what="an index folder", field="index_dir", hint=hint)
