"""The task file's ``encoder`` setting: parsing, prompts and ids, the languages rule, the compile-time refusal for
cross-language tasks, the manifest record and production reloading it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from syntra_dspy.retrieval.encoder import Encoder
from syntra_dspy.retrieval.encoder_languages import check_encoder_languages, encoder_languages, guess_task_languages
from syntra_dspy.errors import ConfigError
from syntra_dspy.task import EncoderSpec, TaskDefinition, load_task, parse_task

from helpers import MINI_TASK, scripted_roles

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "templates" / "neuclirtech-clir.yaml"
INSTALL = "python -m syntra_dspy.models install embeddinggemma-300m"
BASE = {"name": "t", "corpus": {"path": "c.jsonl"},
        "examples": [{"query": q, "positive_id": str(n)} for n, q in enumerate("abc")]}
CLIR = TaskDefinition(query_type="q", doc_type="d", relevance_definition="r", query_language="en",
                      document_language="zh")
MONO = CLIR.model_copy(update={"document_language": "en"})


class FakeST:
    """The part of a SentenceTransformer an Encoder touches; remembers how ``encode`` was asked."""

    prompts = {"query": "task: search | query: ", "document": "title: none | text: ", "Retrieval-query": "find: "}
    default_prompt_name = None

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def encode(self, texts, **kwargs):
        self.calls.append({k: kwargs.get(k) for k in ("prompt_name", "prompt")})
        return np.ones((len(texts), 4), dtype=np.float32)

    def get_sentence_embedding_dimension(self) -> int:
        return 4

    def state_dict(self) -> dict:
        return {}


# -- the task-file setting ------------------------------------------------------------------------------------


def test_encoder_is_a_name_or_a_mapping():
    assert parse_task({**BASE, "encoder": "embeddinggemma-300m"}).encoder == EncoderSpec(model="embeddinggemma-300m")
    spec = parse_task({**BASE, "encoder": {"model": "m", "query_prefix": "query: ", "languages": ["EN", "zho"]}})
    assert spec.encoder.query_prefix == "query: " and spec.encoder.languages == ["en", "zho"]
    assert parse_task(BASE).encoder is None and parse_task(BASE).candidates == "dense"


@pytest.mark.parametrize(("encoder", "message"), [
    ({"model": "m", "query_prompt": "query", "query_prefix": "q: "}, "query_prompt .* or query_prefix"),
    ({"model": "m", "languages": ["en"], "multilingual": True}, "not both"),
    ({"model": "m", "multilingual": False}, "languages: \\[en\\]"),
    ({"model": "m", "languages": ["english"]}, "ISO 639"),
    ({"model": "m", "surprise": 1}, "Extra inputs"),
])
def test_bad_encoder_settings_name_the_field(tmp_path, encoder, message):
    path = tmp_path / "task.yaml"
    path.write_text(json.dumps({**BASE, "encoder": encoder}))
    with pytest.raises(ConfigError, match=message) as err:
        load_task(path)
    assert err.value.field.startswith("encoder") and str(path) in str(err.value)


def test_a_relative_encoder_folder_is_read_from_the_task_files_folder(tmp_path, monkeypatch):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "task.yaml").write_text(json.dumps({**BASE, "encoder": "models/mine"}))
    monkeypatch.chdir(REPO)  # not where the task file is
    assert load_task(tmp_path / "task.yaml").encoder.model == str(tmp_path / "models" / "mine")
    (tmp_path / "task.yaml").write_text(json.dumps({**BASE, "encoder": "org/some-model"}))
    assert load_task(tmp_path / "task.yaml").encoder.model == "org/some-model"  # a name stays a name


# -- prompts and ids ------------------------------------------------------------------------------------------


def test_the_models_own_prompts_are_the_default_and_keep_the_id():
    model = FakeST()
    auto = Encoder(model, name="fake")
    auto.encode_queries(["q"])
    auto.encode_documents(["d"])
    assert model.calls == [{"prompt_name": "query", "prompt": None}, {"prompt_name": "document", "prompt": None}]
    same = Encoder(FakeST(), name="fake", query_prompt="query", document_prompt="document")
    assert same.id == auto.id  # naming the prompts it would use anyway changes nothing


def test_other_prompts_or_prefixes_change_the_id():
    auto = Encoder(FakeST(), name="fake")
    named = Encoder(FakeST(), name="fake", query_prompt="Retrieval-query")
    model = FakeST()
    prefixed = Encoder(model, name="fake", query_prefix="query: ", document_prefix="passage: ")
    prefixed.encode_queries(["q"])
    prefixed.encode_documents(["d"])
    assert model.calls == [{"prompt_name": None, "prompt": "query: "}, {"prompt_name": None, "prompt": "passage: "}]
    assert len({auto.id, named.id, prefixed.id}) == 3
    assert named.id.startswith(auto.id.split("+")[0] + "+p")
    assert prefixed.spec() == EncoderSpec(model="fake", query_prefix="query: ", document_prefix="passage: ")


def test_an_unknown_prompt_name_lists_the_models_prompts():
    with pytest.raises(ConfigError, match=r"no prompt named 'search'.*Retrieval-query, document, query") as err:
        Encoder(FakeST(), name="fake", query_prompt="search")
    assert err.value.field == "encoder.query_prompt"


# -- the languages rule ---------------------------------------------------------------------------------------


def test_the_task_file_wins_over_the_known_list(tmp_path):
    assert encoder_languages(EncoderSpec(model="all-MiniLM-L6-v2")).describe() == "en"
    assert encoder_languages(EncoderSpec(model="sentence-transformers/all-MiniLM-L6-v2")).covers("zh") is False
    told = encoder_languages(EncoderSpec(model="all-MiniLM-L6-v2", languages=["en", "zho"]))
    assert told.covers("zh") and told.source == "task file"
    assert encoder_languages(EncoderSpec(model="google/embeddinggemma-300m")).covers("zh")
    assert encoder_languages(EncoderSpec(model="intfloat/multilingual-e5-small")).codes is None
    assert encoder_languages(EncoderSpec(model=str(tmp_path))).covers("en") is None  # unknown
    assert encoder_languages(EncoderSpec(model=str(tmp_path), multilingual=True)).covers("zh")


def test_an_installed_folder_is_known_by_its_install_record(tmp_path):
    folder = tmp_path / "whatever"
    folder.mkdir()
    (folder / ".syntra-model.json").write_text(json.dumps({"name": "embeddinggemma-300m"}))
    assert encoder_languages(EncoderSpec(model=str(folder))).source == "known models"


@pytest.mark.parametrize(("encoder", "message"), [
    (EncoderSpec(model="all-MiniLM-L6-v2"), r"reads only en \(known models\), not zh"),
    (EncoderSpec(model="my-own-model"), "which languages encoder 'my-own-model' reads is unknown"),
    (EncoderSpec(model="all-MiniLM-L6-v2", languages=["en"]), r"reads only en \(task file\)"),
])
def test_a_cross_language_task_refuses_english_only_and_unknown_encoders(encoder, message):
    with pytest.raises(ConfigError, match=message) as err:
        check_encoder_languages(CLIR, encoder, source="task.yaml")
    assert err.value.field == "encoder" and err.value.path == "task.yaml"
    assert "encoder: embeddinggemma-300m" in err.value.hint and INSTALL in err.value.hint
    assert "languages: [en, zh]" in err.value.hint


def test_multilingual_encoders_pass_and_a_monolingual_task_trusts_an_unknown_one():
    check_encoder_languages(CLIR, EncoderSpec(model="embeddinggemma-300m"))
    check_encoder_languages(CLIR, EncoderSpec(model="my-own-model", languages=["zh", "en"]))
    check_encoder_languages(MONO, EncoderSpec(model="my-own-model"))
    check_encoder_languages(MONO, EncoderSpec(model="all-MiniLM-L6-v2"))
    zho = TaskDefinition.model_validate({**CLIR.model_dump(), "query_language": "zho"})  # zho is zh: monolingual
    assert zho.query_language == "zh" and not zho.cross_language
    check_encoder_languages(zho, EncoderSpec(model="my-own-model"))
    check_encoder_languages(zho, EncoderSpec(model="embeddinggemma-300m"))
    check_encoder_languages(zho, EncoderSpec(model="all-MiniLM-L6-v2", languages=["zh"]))


def test_a_monolingual_task_refuses_an_encoder_known_to_read_other_languages_only():
    """Chinese requests over Chinese abstracts with the English-only default: refused, naming the fix."""
    zho = TaskDefinition.model_validate({**CLIR.model_dump(), "query_language": "zh"})
    with pytest.raises(ConfigError, match=r"queries and documents are in zh, but encoder 'all-MiniLM-L6-v2' reads "
                                          r"only en \(known models\), not zh ") as err:
        check_encoder_languages(zho, EncoderSpec(model="all-MiniLM-L6-v2"), source="task.yaml")
    assert err.value.field == "encoder" and "encoder: embeddinggemma-300m" in err.value.hint
    assert "languages: [zh]" in err.value.hint


def test_languages_are_guessed_from_the_examples_scripts():
    assert guess_task_languages(["battery heat"], ["锂离子电池热管理"]) == ("en", "zh")
    assert guess_task_languages(["电池"], ["A study of batteries."]) == ("zh", "en")
    assert guess_task_languages(["battery heat"], ["A study of batteries."]) == ("en", "en")
    assert guess_task_languages(["电池热管理"], ["锂离子电池"]) == ("zh", "zh")
    assert guess_task_languages(["battery heat", "电池"], ["锂离子电池"]) is None  # mixed: no guess


# -- compile --------------------------------------------------------------------------------------------------


def _template(tmp_path, **changes) -> Path:
    import yaml

    data = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    data["corpus"]["path"] = str((TEMPLATE.parent / data["corpus"]["path"]).resolve())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = tmp_path / "clir.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def _no_encoder_load(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the encoder was loaded before the languages were checked")

    monkeypatch.setattr("syntra_dspy.compiler.load_encoder", refuse)


def test_compile_refuses_an_english_encoder_for_the_cross_language_template(tmp_path, monkeypatch):
    from syntra_dspy.compiler import compile_task

    _no_encoder_load(monkeypatch)
    task = _template(tmp_path, encoder="all-MiniLM-L6-v2")
    with pytest.raises(ConfigError, match="cross-language .en queries over zh documents") as err:
        compile_task(task, lms=scripted_roles()[0], out=tmp_path / "artifacts")
    assert err.value.path == str(task) and err.value.field == "encoder" and INSTALL in str(err.value)
    assert not list(tmp_path.rglob("manifest.json"))  # no artifact


def test_compile_refuses_the_default_encoder_when_the_definition_is_left_to_inference(tmp_path, monkeypatch):
    from syntra_dspy.compiler import compile_task

    _no_encoder_load(monkeypatch)
    task = _template(tmp_path, encoder=None, task_definition=None)  # English examples, Chinese positives
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2' reads only en"):
        compile_task(task, lms=scripted_roles()[0], out=tmp_path / "artifacts")


def test_a_command_line_encoder_replaces_the_task_files_setting(tmp_path, monkeypatch):
    from syntra_dspy.compiler import compile_task

    _no_encoder_load(monkeypatch)
    with pytest.raises(ConfigError, match="'all-MiniLM-L6-v2' reads only en"):
        compile_task(_template(tmp_path), encoder="all-MiniLM-L6-v2", lms=scripted_roles()[0], out=tmp_path / "a")


@pytest.fixture(scope="module")
def prefixed_artifact(tmp_path_factory):
    """The mini task compiled with MiniLM and a literal query prefix (no refinement: only the record matters)."""
    from syntra_dspy.compiler import compile_task
    from syntra_dspy.optimizers import CompileSettings

    root = tmp_path_factory.mktemp("prefixed")
    spec = load_task(MINI_TASK).model_copy(update={"encoder": EncoderSpec(model="all-MiniLM-L6-v2",
                                                                           query_prefix="claim: ")})
    artifact = compile_task(spec, strategy="none", out=root / "artifacts", lms=scripted_roles()[0],
                            index_dir=root / "index", settings=CompileSettings(sample_docs=2, selection_target=10))
    return artifact, root / "index"


def test_the_manifest_records_the_encoder_setting_and_its_id(prefixed_artifact):
    artifact, _ = prefixed_artifact
    record = artifact.meta.encoder
    assert record.model == "all-MiniLM-L6-v2" and record.query_prefix == "claim: "
    assert record.id == artifact.meta.fingerprints.encoder and "+p" in record.id
    assert artifact.meta.task_spec.candidates == "dense"


def test_production_loads_the_artifacts_encoder_with_its_prompts(prefixed_artifact, minilm):
    from syntra_dspy.production.config import ProduceConfig
    from syntra_dspy.production.setup import load_inputs

    artifact, index = prefixed_artifact
    inputs = load_inputs(artifact.path, ProduceConfig(index_dir=index))
    assert inputs.encoder.query_prefix == "claim: " and inputs.encoder.id == artifact.meta.fingerprints.encoder
    assert inputs.index.fingerprint == artifact.meta.fingerprints.index  # the compile's index, reused
    plain = load_inputs(artifact.path, ProduceConfig(index_dir=index.parent / "other-index"),
                        encoder="all-MiniLM-L6-v2")
    assert plain.encoder.id == minilm.id != inputs.encoder.id  # named deliberately: another id, another index


def test_an_older_manifest_without_the_record_still_loads_its_encoder(prefixed_artifact, tmp_path):
    """Artifacts from before the record name their encoder only in fingerprints.encoder."""
    from syntra_dspy.production.setup import resolve_encoder

    artifact, _ = prefixed_artifact
    plain_id = resolve_encoder(None, "all-MiniLM-L6-v2").id
    assert resolve_encoder(plain_id, None, setting=None).query_prefix is None
    assert resolve_encoder(artifact.meta.fingerprints.encoder, None, setting=artifact.meta.encoder).query_prefix \
        == "claim: "
    with pytest.raises(ConfigError, match="other weights"):
        resolve_encoder(artifact.meta.fingerprints.encoder, None, setting=None)  # the prefix is lost: refused


def test_syntra_index_uses_the_task_files_encoder(tmp_path, capsys):
    from syntra_dspy.cli import main

    task = tmp_path / "task.yaml"
    text = (MINI_TASK.read_text().replace("corpus.jsonl", str(MINI_TASK.parent / "corpus.jsonl"))
            + "encoder: {model: all-MiniLM-L6-v2, document_prefix: 'abstract: '}\n")
    task.write_text(text)
    assert main(["index", str(task), "--index-dir", str(tmp_path / "ix"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "encoder all-MiniLM-L6-v2@" in out and "+p" in out
    shutil.rmtree(tmp_path / "ix")
