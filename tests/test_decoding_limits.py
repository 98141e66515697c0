"""Production's ``--max-identifiers``: the extract step keeps at most that many identifiers, and an engine that
compiles schemas into grammars (the embedded one) is held to them while it decodes. Only the schema sent changes,
never the prompt."""

from __future__ import annotations

import json

import dspy
import pytest

from syntra_dspy.lm.llamacpp.engine import grammar_safe_literals, require_nonempty_lists
from syntra_dspy.lm.scripted import ScriptedLM
from syntra_dspy.production import produce
from syntra_dspy.production.config import ProduceConfig
from syntra_dspy.programs.narrowing import identifier_list_schema
from syntra_dspy.testing import SyntraBrain, scripted_lm

from test_produce_support import mini_artifact, rows
from test_query_form import DOC
from test_query_writing import program

ANSWER = {"identifiers": [{"kind": "entity", "text": name} for name in ("Notch", "Jagged1", "myeloma", "stroma")],
          "attributes": [{"dimension": "specificity", "options": ["specific", "general"]}]}


def test_the_extract_call_is_held_to_max_identifiers_and_keeps_the_first():
    lm = ScriptedLM(lambda call: ANSWER)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        limited = program().extract_features(DOC, max_identifiers=3)
        free = program().extract_features(DOC)
    sent_limited, sent_free = (c.response_format["schema"]["properties"]["identifiers"] for c in lm.calls)
    assert (sent_limited["minItems"], sent_limited["maxItems"]) == (1, 3) and "maxItems" not in sent_free
    assert lm.calls[0].messages == lm.calls[1].messages  # the artifact's prompt, whatever the schema
    # a route that sends no narrowed schema (or a model that ignores it) still gets the first three kept
    assert [i.text for i in limited.identifiers] == ["Notch", "Jagged1", "myeloma"]
    assert len(free.identifiers) == 4


def test_llama_cpp_compiles_the_identifier_schema_with_its_bound():
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    full = grammar_safe_literals(require_nonempty_lists(
        {"type": "object", "properties": {"identifiers": identifier_list_schema(2)}, "required": ["identifiers"]}))
    gbnf = grammar.json_schema_to_gbnf(json.dumps(full))
    grammar.LlamaGrammar.from_string(gbnf, verbose=False)  # llama.cpp parses it (a bad grammar kills the process)
    line = next(x for x in gbnf.splitlines() if x.startswith("identifiers ::="))
    assert line.count("identifiers-item") == 2  # one item, then at most one more


def test_the_setting_is_bounded():
    assert ProduceConfig(max_identifiers=3).max_identifiers == 3
    with pytest.raises(Exception, match="max_identifiers"):
        ProduceConfig(max_identifiers=0)


def test_six_identifiers_and_hidden_copies_are_the_defaults_and_the_command_line_turns_them_off():
    """Both were measured on held-out SciFact documents before they became defaults (benchmarks/results/
    paired_produce/scifact-embedded-4); a user who wants the old behaviour says so on the command line."""
    from syntra_dspy.cli import build_parser
    from syntra_dspy.cli.produce_cmd import config_from_args

    default = ProduceConfig()
    assert (default.max_identifiers, default.hide_copied) == (6, True)
    parser = build_parser()
    for argv, expected in ((["produce", "A", "--store", "r.db"], (6, True)),
                           (["produce", "A", "--store", "r.db", "--max-identifiers", "all", "--no-hide-copied"],
                            ("all", False)),
                           (["produce", "A", "--store", "r.db", "--max-identifiers", "2", "--hide-copied"],
                            (2, True))):
        config = config_from_args(parser.parse_args(argv))
        assert (config.max_identifiers, config.hide_copied) == expected, argv


def test_all_identifiers_sends_no_bound(tmp_path_factory):
    from syntra_dspy.artifacts.store import load_artifact
    from syntra_dspy.production.setup import unit_settings

    art, _ = mini_artifact(tmp_path_factory)
    artifact = load_artifact(art)
    assert unit_settings(ProduceConfig(max_identifiers="all"), artifact, 10).max_identifiers is None
    assert unit_settings(ProduceConfig(), artifact, 10).max_identifiers == 6


def test_a_run_extracts_at_most_max_identifiers_and_records_it_per_session(tmp_path_factory, minilm):
    art, index = mini_artifact(tmp_path_factory)
    store = tmp_path_factory.mktemp("ids") / "run.db"
    lm = scripted_lm(SyntraBrain())
    produce(art, store, generator=lm, index_dir=index, encoder=minilm, progress=False, docs=2, queries_per_doc=1,
            top_k=3, max_identifiers=1, hide_copied=True, copy_guard=6)
    features = [json.loads(f) for (f,) in rows(store, "SELECT features FROM documents")]
    options = [json.loads(o) for (o,) in rows(store, "SELECT options FROM sessions")]
    assert features and all(len(f["identifiers"]) == 1 for f in features)
    assert options[-1]["max_identifiers"] == 1 and options[-1]["hide_copied"] is True
    assert options[-1]["copy_guard"] == 6
    writes = [c for c in lm.calls if "queries" in c.output_fields]
    assert writes and all("x-syntra-copy-guard" in c.response_format["schema"]["properties"]["queries"]
                          for c in writes)  # every write call asked the engine to decode without copies
