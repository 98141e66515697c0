"""syntra train: record loading and validation, example building, LoRA training on a few records."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.training import (
    DEFAULT_QUERY_FORMAT,
    TrainConfig,
    build_examples,
    load_training_data,
    records_from_dicts,
    train_embedding_model,
)
from syntra_dspy.training.data import sample_negatives
from syntra_dspy.training.train import _prompts

# Small enough for two shared cores: 2 optimizer steps of 6 queries x (1 positive + 2 negatives), 64 tokens.
FAST = {"max_steps": 2, "batch_size": 6, "num_negatives": 2, "max_seq_length": 64, "logging_steps": 1}
QUERY = "A deficiency of vitamin B12 increases blood levels of homocysteine."


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """Train on one thread unless SYNTRA_TORCH_THREADS says otherwise: on a shared 2-core machine two
    OpenMP threads per process fight the other processes and a step runs ~10x slower."""
    import torch

    before = torch.get_num_threads()
    if not os.environ.get("SYNTRA_TORCH_THREADS"):
        torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def records_file(fixtures: Path) -> Path:
    return fixtures / "train" / "scifact_train.jsonl"


def _record(**overrides) -> dict:
    rec = {"query": "q", "instruction": "find it", "pos": ["p1"], "neg": ["n1", "n2"], "query_id": "1",
           "source_doc_id": "d1", "artifact_version": "v1"}
    rec.update(overrides)
    return rec


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_public_api_is_sorted_and_importable() -> None:
    from syntra_dspy import training

    assert training.__all__ == sorted(training.__all__)
    assert all(hasattr(training, name) for name in training.__all__)


# --- loading -------------------------------------------------------------------------------------


def test_fixture_loads_with_provenance(records_file: Path) -> None:
    data = load_training_data(records_file)
    assert len(data) == 12
    assert data.artifact_versions == ["scifact-fixture-v1"]
    prov = data.provenance()
    assert prov["run_store"] == "runs/scifact-fixture.sqlite"
    assert prov["export_options"]["negatives"] == "hard"
    assert prov["format"] == "jsonl" and len(prov["sha256"]) == 64
    assert any(len(r.pos) > 1 for r in data.records)


def test_records_without_sidecar_take_version_from_records(tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps(_record()), json.dumps(_record(query="q2"))])
    data = load_training_data(path)
    assert data.meta is None
    assert data.provenance()["artifact_version"] == "v1"


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ("{not json", None, "not valid JSON"),
        ("[1, 2]", None, "must be a JSON object"),
        (json.dumps({k: v for k, v in _record().items() if k != "query"}), "query", "missing"),
        (json.dumps(_record(query="  ")), "query", "non-empty string"),
        (json.dumps(_record(pos=[])), "pos", "at least 1"),
        (json.dumps(_record(pos="p1")), "pos", "list of texts"),
        (json.dumps(_record(pos=["ok", 3])), "pos[1]", "non-empty string"),
        (json.dumps(_record(neg=[])), "neg", "at least 1"),
        (json.dumps(_record(instruction=7)), "instruction", "must be a string"),
    ],
)
def test_bad_record_names_file_line_and_field(tmp_path: Path, line: str, field: str | None,
                                              message: str) -> None:
    path = _write(tmp_path, [json.dumps(_record()), "", line])
    with pytest.raises(InputError, match=message) as info:
        load_training_data(path)
    err = info.value
    assert err.path == str(path) and err.line == 3 and err.field == field
    assert f"{path}:3" in str(err)


def test_negatives_optional_and_instruction_required_on_request(tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps(_record(neg=[], instruction=""))])
    assert load_training_data(path, require_negatives=False).records[0].neg == ()
    with pytest.raises(InputError, match="uses {instruction}") as info:
        load_training_data(path, require_negatives=False, require_instruction=True)
    assert info.value.field == "instruction"


def test_bad_sidecar_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps(_record())])
    meta = tmp_path / "records.jsonl.meta.json"
    meta.write_text("{oops", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_training_data(path)
    assert info.value.path == str(meta)


def test_empty_or_missing_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no training records"):
        load_training_data(_write(tmp_path, [""]))
    with pytest.raises(InputError, match="no such file"):
        load_training_data(tmp_path / "absent.jsonl")
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError, match="save_to_disk"):
        load_training_data(tmp_path / "folder")


def test_hf_dataset_folder(tmp_path: Path, records_file: Path) -> None:
    from datasets import Dataset, DatasetDict

    rows = [json.loads(line) for line in records_file.read_text(encoding="utf-8").splitlines()]
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "ds.meta.json").write_text(json.dumps({"artifact_version": "v9", "run_store": "r.sqlite"}))
    data = load_training_data(tmp_path / "ds")
    assert len(data) == 12 and data.format == "hf-dataset"
    assert data.records[0].query == rows[0]["query"]
    assert data.provenance()["artifact_version"] == "v9"

    bad = [dict(r) for r in rows[:3]]
    bad[2]["pos"] = []
    DatasetDict({"train": Dataset.from_list(bad)}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(InputError, match="row 3") as info:
        load_training_data(tmp_path / "dd")
    assert info.value.field == "pos"
    DatasetDict({"dev": Dataset.from_list(rows[:2])}).save_to_disk(str(tmp_path / "nodev"))
    with pytest.raises(InputError, match="'train' split"):
        load_training_data(tmp_path / "nodev")


# --- examples ------------------------------------------------------------------------------------


def test_negatives_repeated_when_fewer_than_asked() -> None:
    data = records_from_dicts([_record(neg=["a", "b"])])
    cols = build_examples(data, num_negatives=5, seed=42)
    negs = [cols[f"negative_{k}"][0] for k in range(1, 6)]
    assert sorted(cols) == ["anchor", *(f"negative_{k}" for k in range(1, 6)), "positive"]
    assert set(negs) == {"a", "b"}
    assert sorted(negs.count(x) for x in "ab") == [2, 3]  # each copy used before any is reused


def test_negatives_sampled_without_replacement_when_more() -> None:
    drawn = sample_negatives(tuple("abcdefgh"), 3, random.Random(0))
    assert len(set(drawn)) == 3
    assert sample_negatives(("x",), 0, random.Random(0)) == []
    no_negs = records_from_dicts([_record(), _record(neg=[])], require_negatives=False)
    assert build_examples(no_negs, num_negatives=0, seed=0)["anchor"] == ["q", "q"]
    with pytest.raises(InputError, match="record 2 has no negatives"):
        build_examples(no_negs, num_negatives=1, seed=0)


def test_examples_are_seeded_and_sample_one_positive(records_file: Path) -> None:
    data = load_training_data(records_file)
    one = build_examples(data, num_negatives=3, seed=42)
    assert one == build_examples(data, num_negatives=3, seed=42)
    assert all(len(col) == 12 for col in one.values())
    for rec, pos in zip(data.records, one["positive"]):
        assert pos in rec.pos
    multi = [i for i, r in enumerate(data.records) if len(r.pos) > 1]
    picks = {build_examples(data, num_negatives=0, seed=s)["positive"][multi[0]] for s in range(20)}
    assert picks == set(data.records[multi[0]].pos)


def test_instruction_prefix_only_when_asked(records_file: Path) -> None:
    data = load_training_data(records_file)
    plain = build_examples(data, num_negatives=1, seed=1)
    assert plain["anchor"][0] == data.records[0].query
    pref = build_examples(data, num_negatives=1, seed=1, query_format=DEFAULT_QUERY_FORMAT)
    assert pref["anchor"][0] == f"Instruct: {data.records[0].instruction}\nQuery: {data.records[0].query}"


# --- settings ------------------------------------------------------------------------------------


def test_config_defaults_follow_the_paper() -> None:
    cfg = TrainConfig()
    assert (cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout) == (32, 64, 0.1)
    assert (cfg.learning_rate, cfg.warmup_ratio, cfg.epochs, cfg.seed) == (1e-4, 0.1, 1, 42)
    assert cfg.query_format is None and cfg.scale == pytest.approx(50.0)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"lora_rank": 0}, "lora_rank"),
        ({"lora_dropout": 1.0}, "lora_dropout"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"num_negatives": -1}, "num_negatives"),
        ({"max_steps": 0}, "max_steps"),
        ({"loss": "triplet"}, "loss"),
        ({"query_format": "Instruct: {instruction}"}, "query_format"),
        ({"query_format": "{task}: {query}"}, "query_format"),
        ({"target_modules": ()}, "target_modules"),
    ],
)
def test_config_rejects_bad_settings(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        TrainConfig(**changes)
    assert info.value.field == field


def test_prompts_follow_the_base_model() -> None:
    data = records_from_dicts([_record(), _record(query="q2")])
    plain = SimpleNamespace(prompts={})
    assert _prompts(plain, data, TrainConfig()) == ({}, None)
    assert _prompts(plain, data, TrainConfig(query_format=DEFAULT_QUERY_FORMAT)) == (
        {}, "Instruct: find it\nQuery: ")
    gemma = SimpleNamespace(prompts={"query": "task: search result | query: ", "document": "title: none | text: "})
    prompts, saved = _prompts(gemma, data, TrainConfig(num_negatives=1))
    assert prompts == {"anchor": "task: search result | query: ", "positive": "title: none | text: ",
                       "negative_1": "title: none | text: "}
    assert saved is None
    assert _prompts(gemma, data, TrainConfig(use_model_prompts=False)) == ({}, None)
    mixed = records_from_dicts([_record(), _record(instruction="other")])
    assert _prompts(plain, mixed, TrainConfig(query_format=DEFAULT_QUERY_FORMAT)) == ({}, None)


def test_loss_follows_the_settings(minilm) -> None:
    from sentence_transformers.sentence_transformer import losses

    from syntra_dspy.training.losses import build_loss as _loss

    default = _loss(minilm.model, TrainConfig())
    assert isinstance(default, losses.CachedMultipleNegativesRankingLoss)
    assert default.scale == pytest.approx(50.0) and default.mini_batch_size == 8
    plain = _loss(minilm.model, TrainConfig(loss="mnrl", temperature=0.05))
    assert type(plain) is losses.MultipleNegativesRankingLoss and plain.scale == pytest.approx(20.0)


def test_the_bounded_memory_loss_equals_the_plain_one(minilm, records_file: Path) -> None:
    """The default (cached, a mini-batch of texts at a time) computes the same InfoNCE value and gradients as
    one forward pass over every text of the step: only memory differs (dropout off, so both see the same model)."""
    import torch

    from syntra_dspy.training.losses import build_loss as _loss

    model = minilm.model
    rows = [json.loads(line) for line in records_file.read_text(encoding="utf-8").splitlines()][:6]
    columns = [[r["query"] for r in rows], [r["pos"][0] for r in rows],
               *([(r["neg"] * 2)[i] for r in rows] for i in range(2))]
    was_training = model.training
    model.eval()
    found = []
    try:
        for config in (TrainConfig(loss="mnrl", temperature=0.5),
                       TrainConfig(mini_batch_size=4, temperature=0.5)):
            model.zero_grad()
            features = [dict(model.tokenize(texts)) for texts in columns]
            value = _loss(model, config)(features, torch.zeros(len(rows)))
            value.backward()
            grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
            found.append((float(value), grads))
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    (plain, plain_grads), (cached, cached_grads) = found
    assert plain > 0.01 and cached == pytest.approx(plain, rel=1e-5)
    assert torch.allclose(plain_grads, cached_grads, rtol=1e-4, atol=1e-6)


def test_cli_reports_bad_input(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from syntra_dspy.cli import main

    bad = _write(tmp_path, [json.dumps(_record(pos=[]))])
    # the records are read in the child that trains: its error and exit code reach the user unchanged
    assert main(["train", str(bad), "--encoder", "all-MiniLM-L6-v2", "--out", str(tmp_path / "m")]) == 2
    err = capfd.readouterr().err
    assert f"{bad}:1 field 'pos'" in err and "Traceback" not in err
    assert main(["train", str(bad), "--encoder", "x", "--out", str(tmp_path / "m"), "--lora-rank", "0"]) == 2
    assert "lora_rank" in capfd.readouterr().err
    assert not (tmp_path / "m").exists()


def test_a_training_killed_for_memory_is_reported_with_the_settings_to_lower(capsys) -> None:
    import subprocess
    import sys

    from syntra_dspy.cli._child import ProcessKilled, run_child

    suicide = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    with pytest.raises(ProcessKilled, match=r"killed by the operating system \(SIGKILL\).*out of memory.*"
                                            r"lower --mini-batch-size"):
        run_child(suicide, what="training", on_kill="lower --mini-batch-size (now 8)")
    assert run_child([sys.executable, "-c", "raise SystemExit(3)"], what="x", on_kill="") == 3
    # a SIGTERM to the parent stops the child (a Timer sends it while the parent waits)
    import os
    import signal
    import threading
    import time

    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    started = time.monotonic()
    with pytest.raises(ProcessKilled, match="ended by SIGTERM"):
        run_child([sys.executable, "-c", "import time; time.sleep(60)"], what="x", on_kill="")
    assert time.monotonic() - started < 30 and signal.getsignal(signal.SIGTERM) is before
    # through the command line: exit code 2 and the message, not a bare "Killed"
    done = subprocess.run([sys.executable, "-c", (
        "import sys, subprocess\n"
        "from syntra_dspy.cli import _child\n"
        "popen = subprocess.Popen\n"
        "_child.subprocess.Popen = lambda cmd, env: popen("
        "[sys.executable, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'])\n"
        "from syntra_dspy.cli import main\n"
        "sys.exit(main(['train', 'records.jsonl', '--encoder', 'b', '--out', 'o', '--mini-batch-size', '4']))")],
        capture_output=True, text=True)
    assert done.returncode == 2
    assert "error: training was killed by the operating system (SIGKILL)" in done.stderr
    assert "lower --mini-batch-size (now 4)" in done.stderr


def test_cli_maps_flags_onto_the_config() -> None:
    from syntra_dspy.cli import build_parser
    from syntra_dspy.cli.train_cmd import config_from_args

    args = build_parser().parse_args(["train", "d.jsonl", "--encoder", "b", "--out", "o", "--lora-rank", "8",
                                      "--target-modules", "query,value", "--instruction-prefix",
                                      "--num-negatives", "3", "--no-model-prompts"])
    cfg = config_from_args(args)
    assert (cfg.lora_rank, cfg.lora_alpha, cfg.num_negatives) == (8, 64, 3)
    assert cfg.target_modules == ("query", "value")
    assert cfg.query_format == DEFAULT_QUERY_FORMAT and cfg.use_model_prompts is False
    args = build_parser().parse_args(["train", "d", "--encoder", "b", "--out", "o",
                                      "--instruction-prefix", r"{instruction}\n{query}"])
    assert config_from_args(args).query_format == "{instruction}\n{query}"


# --- training ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, records_file: Path) -> Path:
    """One short run through the command line, shared by the checks below."""
    from syntra_dspy.cli import main

    out = tmp_path_factory.mktemp("train") / "model"
    argv = ["train", str(records_file), "--encoder", "all-MiniLM-L6-v2", "--out", str(out), "--no-progress",
            "--instruction-prefix"]
    for key, value in FAST.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    assert main(argv) == 0
    return out


def test_training_writes_adapter_merged_card_and_report(trained: Path) -> None:
    assert (trained / "adapter" / "adapter_config.json").is_file()
    assert (trained / "adapter" / "adapter_model.safetensors").is_file()
    assert not (trained / "adapter" / "model.safetensors").exists()
    assert (trained / "merged" / "model.safetensors").is_file()
    assert not (trained / "merged" / "adapter_config.json").exists()
    assert not list(trained.parent.glob(".model.partial-*"))
    report = json.loads((trained / "training.json").read_text(encoding="utf-8"))
    assert report["steps"] == 2 and report["examples"] == 12 and report["data"]["records"] == 12
    assert np.isfinite(report["final_loss"]) and report["seconds"] > 0
    assert report["effective"]["target_modules"] == ["dense", "key", "query", "value"]
    assert report["effective"]["adapted_layers"] == 36
    assert report["settings"]["lora_rank"] == 32 and report["settings"]["max_steps"] == 2


def test_model_card_names_the_data_and_settings(trained: Path) -> None:
    card = (trained / "README.md").read_text(encoding="utf-8")
    assert "scifact-fixture-v1" in card and "runs/scifact-fixture.sqlite" in card
    assert '"negatives": "hard"' in card  # export options
    for row in ("| LoRA rank | 32 |", "| LoRA alpha | 64.0 |", "| LoRA dropout | 0.1 |",
                "| learning rate | 0.0001 |", "| warmup ratio | 0.1 |", "| seed | 42 |",
                "| hard negatives per query | 2 |"):
        assert row in card
    assert (trained / "merged" / "README.md").read_text(encoding="utf-8") == card


def test_trained_model_differs_from_base_and_loads_back(trained: Path, minilm) -> None:
    from sentence_transformers import SentenceTransformer

    from syntra_dspy.retrieval.encoder import load_encoder

    merged = load_encoder(str(trained / "merged"))
    assert merged.query_prompt == "query"  # the instruction prefix travels with the model
    assert merged.model.prompts["query"].startswith("Instruct: Given a scientific claim")
    assert merged.model.max_seq_length == minilm.model.max_seq_length  # training length not baked in

    base_vec = minilm.encode_documents([QUERY])
    merged_vec = merged.encode_documents([QUERY])
    assert float(np.abs(base_vec - merged_vec).max()) > 1e-4

    adapter = SentenceTransformer(str(trained / "adapter"), device="cpu")
    adapter_vec = adapter.encode([QUERY], normalize_embeddings=True, prompt="")
    np.testing.assert_allclose(adapter_vec, merged_vec, atol=1e-5)
    q_with_prompt = merged.encode_queries([QUERY])
    assert float(np.abs(q_with_prompt - merged_vec).max()) > 1e-3


def test_same_seed_same_model(trained: Path, records_file: Path, tmp_path: Path) -> None:
    from syntra_dspy.retrieval.encoder import load_encoder

    cfg = TrainConfig(query_format=DEFAULT_QUERY_FORMAT, **FAST)
    result = train_embedding_model(records_file, base="all-MiniLM-L6-v2", out=tmp_path / "again",
                                   config=cfg, progress=False)
    assert result.steps == 2 and result.records == 12
    first = load_encoder(str(trained / "merged")).encode_queries([QUERY])
    second = load_encoder(str(result.merged_dir)).encode_queries([QUERY])
    np.testing.assert_allclose(first, second, atol=1e-6)
    report = json.loads((trained / "training.json").read_text(encoding="utf-8"))
    assert result.final_loss == pytest.approx(report["final_loss"], abs=1e-6)


def test_refuses_to_overwrite_without_asking(trained: Path, records_file: Path) -> None:
    with pytest.raises(InputError, match="already exists") as info:
        train_embedding_model(records_file, base="all-MiniLM-L6-v2", out=trained, config=TrainConfig(**FAST))
    assert info.value.field == "out"


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random two-layer Gemma3 laid out like EmbeddingGemma: query/document prompts, a Dense head."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling
    from transformers import AutoTokenizer, Gemma3TextConfig, Gemma3TextModel

    from syntra_dspy.retrieval.encoder import bundled_minilm_path

    root = tmp_path_factory.mktemp("gemma")
    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=30522, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                              max_position_embeddings=256, sliding_window=64)
    Gemma3TextModel(config).save_pretrained(root / "hf")
    AutoTokenizer.from_pretrained(str(bundled_minilm_path())).save_pretrained(root / "hf")
    model = SentenceTransformer(
        modules=[Transformer(str(root / "hf"), max_seq_length=64), Pooling(32, "mean"), Dense(32, 16),
                 Normalize()],
        prompts={"query": "task: search result | query: ", "document": "title: none | text: "},
    )
    model.save(str(root / "st"), create_model_card=False)
    return root / "st"


def test_gemma_layout_prompts_and_dense_head(tiny_gemma: Path, records_file: Path, tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from syntra_dspy.retrieval.encoder import load_encoder

    cfg = TrainConfig(**{**FAST, "learning_rate": 1e-3})
    result = train_embedding_model(records_file, base=str(tiny_gemma), out=tmp_path / "g", config=cfg,
                                   progress=False)
    report = json.loads(result.report_path.read_text(encoding="utf-8"))
    eff = report["effective"]
    assert eff["target_modules"] == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj",
                                     "v_proj"]
    assert eff["training_prompts"]["anchor"] == "task: search result | query: "
    assert eff["training_prompts"]["negative_2"] == "title: none | text: "

    base = SentenceTransformer(str(tiny_gemma), device="cpu")
    merged = load_encoder(str(result.merged_dir))
    assert merged.model.prompts == base.prompts  # the model's own prompts are kept
    np.testing.assert_allclose(merged.model[2].linear.weight.detach().numpy(), base[2].linear.weight.detach().numpy())
    base_vec = base.encode([QUERY], prompt_name="query", normalize_embeddings=True)
    merged_vec = merged.encode_queries([QUERY])
    assert float(np.abs(base_vec - merged_vec).max()) > 1e-5
    adapter = SentenceTransformer(str(result.adapter_dir), device="cpu")
    adapter_vec = adapter.encode([QUERY], prompt_name="query", normalize_embeddings=True)
    np.testing.assert_allclose(adapter_vec, merged_vec, atol=1e-5)


def test_the_final_loss_is_the_last_steps_even_when_it_falls_between_logging_steps(records_file: Path,
                                                                                  tmp_path: Path) -> None:
    """A run shorter than ``logging_steps`` used to log only step 1, and report that as the final loss."""
    cfg = TrainConfig(query_format=DEFAULT_QUERY_FORMAT, **{**FAST, "max_steps": 3, "logging_steps": 10})
    result = train_embedding_model(records_file, base="all-MiniLM-L6-v2", out=tmp_path / "short", config=cfg,
                                   progress=False)
    report = json.loads((tmp_path / "short" / "training.json").read_text(encoding="utf-8"))
    steps = [h["step"] for h in report["loss_history"]]
    assert steps[0] == 1 and steps[-1] == 3 == result.steps
    assert result.final_loss == pytest.approx(report["loss_history"][-1]["loss"])


def test_report_to_passes_through_to_the_trainer_and_keeps_tensorboard_logs(records_file: Path,
                                                                            tmp_path: Path) -> None:
    """``--report-to tensorboard``: the transformers trainer writes its event files, kept in OUT/runs."""
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from syntra_dspy.cli import build_parser
    from syntra_dspy.cli.train_cmd import config_from_args

    args = build_parser().parse_args(["train", "d.jsonl", "--encoder", "b", "--out", "o", "--report-to", "tensorboard"])
    assert config_from_args(args).report_to == "tensorboard"
    cfg = TrainConfig(**{**FAST, "max_steps": 1, "warmup_ratio": 0.0}, report_to="tensorboard")
    train_embedding_model(records_file, base="all-MiniLM-L6-v2", out=tmp_path / "tb", config=cfg, progress=False)
    events = list((tmp_path / "tb" / "runs").rglob("events.out.tfevents.*"))
    assert events
    logged = EventAccumulator(str(events[0].parent))
    logged.Reload()
    assert "train/loss" in logged.Tags()["scalars"]
    assert json.loads((tmp_path / "tb" / "training.json").read_text())["settings"]["report_to"] == "tensorboard"


def test_report_to_an_integration_that_is_not_installed_is_refused_before_loading(records_file: Path,
                                                                                  tmp_path: Path) -> None:
    from transformers.integrations import get_available_reporting_integrations

    from syntra_dspy.errors import DependencyError
    from syntra_dspy.training.config import REPORTERS
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    assert set(REPORTERS) == {"none", "all", *INTEGRATION_TO_CALLBACK}  # the choices are transformers' own
    missing = next((r for r in ("neptune", "dagshub", "flyte") if r not in get_available_reporting_integrations()),
                   None)
    if missing is None:
        pytest.skip("every candidate integration is installed")
    with pytest.raises(DependencyError, match=f"--report-to {missing}"):
        train_embedding_model(records_file, base="all-MiniLM-L6-v2", out=tmp_path / "x",
                              config=TrainConfig(**FAST, report_to=missing), progress=False)
    with pytest.raises(ConfigError, match="unknown reporting integration"):
        TrainConfig(report_to="nowhere")
