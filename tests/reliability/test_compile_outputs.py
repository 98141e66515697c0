"""`syntra compile` checks where the artifact will go, the task name and its settings before the first LM call."""

from __future__ import annotations

from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.compiler import compile_task
from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers import CompileSettings
from syntra_dspy.task import load_task

from helpers import MINI_TASK, scripted_roles


def refused_before_any_lm_call(tmp_path: Path, match: str, *, task=MINI_TASK, out: Path | None = None) -> None:
    """Compile must raise a ConfigError matching ``match`` without a single LM call."""
    roles, brain = scripted_roles()
    with pytest.raises(ConfigError, match=match):
        compile_task(task, out=out or tmp_path / "artifacts", lms=roles, index_dir=tmp_path / "index",
                     settings=CompileSettings(sample_docs=2, selection_target=10))
    assert brain.calls == {}


def test_compile_out_that_is_a_file_fails_before_any_lm_call(tmp_path):
    out = tmp_path / "artifacts"
    out.write_text("a file, not a folder", encoding="utf-8")
    refused_before_any_lm_call(tmp_path, "not a folder", out=out)
    assert out.read_text(encoding="utf-8") == "a file, not a folder"


def test_compile_task_folder_that_is_a_file_fails_before_any_lm_call(tmp_path):
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "mini").write_text("in the way", encoding="utf-8")
    refused_before_any_lm_call(tmp_path, "not a folder")


def test_overlong_task_name_fails_before_any_lm_call(tmp_path):
    text = MINI_TASK.read_text(encoding="utf-8").replace("name: mini", "name: " + "n" * 300)
    task = tmp_path / "task.yaml"
    task.write_text(text.replace("path: corpus.jsonl", f"path: {MINI_TASK.parent / 'corpus.jsonl'}"),
                    encoding="utf-8")
    with pytest.raises(ConfigError, match="name"):
        load_task(task)
    spec = load_task(MINI_TASK).model_copy(update={"name": "n" * 300})  # built in code, not validated by pydantic
    refused_before_any_lm_call(tmp_path, "name", task=spec)


def test_task_name_with_path_characters_is_refused(tmp_path):
    spec = load_task(MINI_TASK).model_copy(update={"name": "../escape"})
    refused_before_any_lm_call(tmp_path, "name", task=spec)
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("flag, value", [("--max-attempts", "-1"), ("--sample-docs", "0"),
                                         ("--selection-target", "-5"), ("--selection-tau", "nan"),
                                         ("--max-doc-chars", "-100")])
def test_negative_compile_settings_are_clear_errors(flag, value, tmp_path, capsys):
    code = main(["compile", str(MINI_TASK), "--out", str(tmp_path / "a"), "--index-dir", str(tmp_path / "i"),
                 flag, value])
    err = capsys.readouterr().err
    assert code == 2 and flag in err and "Traceback" not in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "i").exists()
