"""Every compile leaves its own record; compiles with the same outcome share a program id."""

from __future__ import annotations

import dspy
import pytest
from dspy.utils.callback import BaseCallback
from helpers import compile_mini

from syntra_dspy.artifacts import list_artifacts, load_artifact


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


def test_a_recompile_with_the_same_outcome_writes_its_own_manifest(tmp_path, index_dir):
    first, _ = compile_mini(tmp_path, strategy="none", index_dir=index_dir)
    second, _ = compile_mini(tmp_path, strategy="none", index_dir=index_dir)
    assert second.program_id == first.program_id  # the same program ...
    assert second.path != first.path and second.version != first.version  # ... and a record of each compile
    assert (first.path / "program.json").read_bytes() == (second.path / "program.json").read_bytes()
    assert load_artifact(first.path).manifest["created_at"] == first.manifest["created_at"]
    rows = list_artifacts(tmp_path / "artifacts")
    assert sorted(r["version"] for r in rows) == sorted([first.version, second.version])
    assert {r["program_id"] for r in rows} == {first.program_id}


class CompileRecorder(BaseCallback):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_compile_start(self, call_id, instance, inputs):
        self.events.append(f"start {type(instance).__name__}")

    def on_compile_end(self, call_id, outputs, exception=None):
        self.events.append("end" if exception is None else f"failed {exception}")


def test_compile_task_goes_through_the_teleprompter_so_callbacks_see_it(tmp_path, index_dir):
    recorder = CompileRecorder()
    with dspy.context(callbacks=[recorder]):
        compile_mini(tmp_path, strategy="none", index_dir=index_dir)
    assert recorder.events == ["start NoRefinement", "end"]


def test_a_compile_is_configured_by_one_config_or_its_fields_as_keywords(tmp_path, index_dir):
    from helpers import MINI_TASK

    from syntra_dspy.compiler import CompileConfig, compile_task
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.optimizers import CompileSettings

    config = CompileConfig(strategy="none", settings=None, index_dir=index_dir)
    assert config.settings == CompileSettings() and config.lm_overrides is None
    with pytest.raises(ConfigError, match="unknown strategy 'nope'"):
        CompileConfig(strategy="nope")
    with pytest.raises(ConfigError, match="unknown compile setting 'strategies'"):
        CompileConfig(strategies="none")
    with pytest.raises(ConfigError, match="not both") as info:
        compile_task(MINI_TASK, config, strategy="self-improve", out=tmp_path)
    assert info.value.field == "strategy"
