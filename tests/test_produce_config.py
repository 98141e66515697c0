"""Production settings live in one place: ``ProduceConfig`` defines, documents and validates them; the ``syntra
produce`` flags, their defaults and help are generated from it; Python callers build it or pass its fields."""

from __future__ import annotations

import math

import pytest

from syntra_dspy.cli import build_parser
from syntra_dspy.cli.produce_cmd import config_from_args
from syntra_dspy.errors import ConfigError
from syntra_dspy.production import ProduceConfig, RayOptions, produce


def _args(*flags: str):
    return build_parser().parse_args(["produce", "art", "--store", "r.db", *flags])


def test_the_command_line_without_flags_gives_the_configs_defaults():
    config = config_from_args(_args())
    assert config == ProduceConfig()
    assert (config.top_k, config.queries_per_doc, config.retry_temperature) == (20, 4, 0.7)
    # open until the run knows its artifact and engine: 10 documents for a new store, 1 call in flight embedded
    assert config.docs is None and config.chunk_size is None and config.candidates is None
    assert config.concurrency is None


def test_every_flag_lands_in_its_field():
    config = config_from_args(_args("--docs", "7", "--queries-per-doc", "2", "--top-k", "5", "--chunk-size", "3",
                                    "--concurrency", "2", "--candidates", "bm25-translated", "--retry-failed",
                                    "--retry-temperature", "0.3", "--timeout", "9", "--retries", "1",
                                    "--api-key-env", "K", "--artifact-key-env", "T", "--index-dir", "ix",
                                    "--corpus-format", "tsv", "--ray", "auto", "--ray-workers", "2",
                                    "--no-progress"))
    assert config == ProduceConfig(docs=7, queries_per_doc=2, top_k=5, chunk_size=3, concurrency=2,
                                   candidates="bm25-translated", retry_failed=True, retry_temperature=0.3,
                                   timeout=9.0, retries=1, api_key_env="K", artifact_key_env="T", index_dir="ix",
                                   corpus_format="tsv", ray=RayOptions(address="auto", workers=2), progress=False)
    assert config_from_args(_args("--docs", "all")).docs == "all"
    with pytest.raises(ConfigError, match="--ray-workers needs --ray"):
        config_from_args(_args("--ray-workers", "2"))


def test_the_help_shows_the_configs_defaults(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in ("top_k", "queries_per_doc", "retry_temperature"):
        field = ProduceConfig.model_fields[name]
        assert f"{field.description} (default {field.default})" in text
    for name in ("docs", "concurrency"):  # defaults that depend on the run: the description says them
        assert ProduceConfig.model_fields[name].description in text


@pytest.mark.parametrize(("values", "field"), [({"concurrency": 0}, "concurrency"), ({"top_k": True}, "top_k"),
                                               ({"retry_temperature": math.nan}, "retry_temperature"),
                                               ({"docs": 0}, "docs"), ({"candidates": "sparse"}, "candidates"),
                                               ({"topk": 5}, "topk")])
def test_a_bad_setting_is_a_config_error_naming_it(values, field):
    with pytest.raises(ConfigError) as raised:
        ProduceConfig(**values)
    assert raised.value.field == field


def test_produce_takes_a_config_or_its_fields_not_both(tmp_path):
    with pytest.raises(ConfigError, match="either a ProduceConfig or its settings"):
        produce(tmp_path / "art", tmp_path / "run.db", ProduceConfig(), top_k=5)
    with pytest.raises(ConfigError, match="unknown production setting 'topk'"):
        produce(tmp_path / "art", tmp_path / "run.db", topk=5)
    assert not (tmp_path / "run.db").exists()
