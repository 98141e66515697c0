from __future__ import annotations

import pytest

from syntra_dspy.errors import ConfigError
from syntra_dspy.task import load_task

GOOD = """name: t
corpus: {path: corpus.jsonl, format: beir}
examples:
  - {query: a, positive_id: "1"}
  - {query: b, positive_id: "2"}
  - {query: c, positive_text: some text}
"""


def write(tmp_path, text):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return path


def test_good_task_resolves_corpus_relative_to_file(tmp_path):
    spec = load_task(write(tmp_path, GOOD))
    assert spec.corpus.path == str(tmp_path / "corpus.jsonl")
    assert spec.task_definition is None and len(spec.examples) == 3


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (GOOD.replace("format: beir", "format: csv"), "corpus.format", "beir"),
        (GOOD.replace("name: t", "name: 'bad name'"), "name", "pattern"),
        (GOOD.replace('  - {query: c, positive_text: some text}\n', ""), "examples", "at least 3"),
        (GOOD.replace('positive_text: some text', 'positive_text: x, positive_id: "3"'), "examples.2", "exactly one"),
        (GOOD + "surprise: 1\n", "surprise", "Extra inputs"),
        (GOOD + "task_definition: {query_type: claim}\n", "task_definition.doc_type", "required"),
    ],
)
def test_bad_task_names_file_and_field(tmp_path, text, field, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_task(path)
    assert err.value.field == field
    assert str(path) in str(err.value)
    assert message in str(err.value)


def test_invalid_yaml_names_line(tmp_path):
    path = write(tmp_path, GOOD + "examples: [\n")
    with pytest.raises(ConfigError, match=r"task.yaml:\d+"):
        load_task(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_task(tmp_path / "nope.yaml")
