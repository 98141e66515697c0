"""The ``syntra`` command itself: every subcommand is there, and a missing one is an error, not a gap."""

from __future__ import annotations

import pytest

from syntra_dspy import cli


def test_every_subcommand_registers():
    parser = cli.build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert set(choices) == set(cli._COMMANDS)


def test_a_missing_subcommand_module_fails_loudly(monkeypatch):
    monkeypatch.setattr(cli, "_COMMANDS", (*cli._COMMANDS, "vanished"))
    with pytest.raises(ImportError, match="'vanished' subcommand's module syntra_dspy.cli.vanished_cmd is missing.*"
                                          "reinstall"):
        cli.build_parser()


# --- one name per concept, help on every option, choices on every enumeration --------------------------------

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from syntra_dspy.cli._args import RenamedOption, rename  # noqa: E402

#: Options whose values are a fixed set: each must say so with choices (argparse's, or a CommaChoices type).
ENUMERATED = {
    "index": ["--corpus-format"],
    "compile": ["--strategy", "--keep", "--judge-mode", "--judge-feature", "--query-verifier"],
    "compare": ["--strategies", "--unjudged", "--keep", "--judge-mode", "--judge-feature", "--query-verifier"],
    "artifacts recalibrate": ["--judge-feature"],
    "artifacts diff": ["--loop"],
    "produce": ["--corpus-format", "--candidates"],
    "export": ["--format", "--negatives", "--positives"],
    "train": ["--loss", "--teacher", "--precision", "--report-to", "--lr-scheduler"],
    "eval": ["--missing"],
    "agreement": ["--judge-mode", "--compare-judge-mode"],
}
#: Old spellings kept for one release: (command, old argv, new argv) parse to the same settings.
RENAMED = [
    ("train", ["d", "--out", "o", "--base", "m", "--negatives", "3"], ["d", "--out", "o", "--encoder", "m",
                                                                      "--num-negatives", "3"]),
    ("eval", ["--model", "bm25", "--measure", "nDCG@20"], ["--encoder", "bm25", "--measures", "nDCG@20"]),
    ("compare", ["t.yaml", "--base-model", "m", "--judge", "written"],
     ["t.yaml", "--downstream-encoder", "m", "--judge-mode", "written"]),
    ("compile", ["t.yaml", "--judge", "graded"], ["t.yaml", "--judge-mode", "graded"]),
    ("agreement", ["a", "--dataset", "d", "--judge", "graded", "--compare-judge", "written"],
     ["a", "--dataset", "d", "--judge-mode", "graded", "--compare-judge-mode", "written"]),
    ("artifacts", ["recalibrate", "a", "--feature", "hybrid"], ["recalibrate", "a", "--judge-feature", "hybrid"]),
    ("export", ["r.db", "--out", "o", "--judge", "art"], ["r.db", "--out", "o", "--relabel-with", "art"]),
    ("index", ["--corpus", "c", "--format", "tsv"], ["--corpus", "c", "--corpus-format", "tsv"]),
]


def _commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(name, parser) of every command that runs something: the leaves of the subcommand tree."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix.strip(), parser
    for action in subs:
        for name, child in action.choices.items():
            yield from _commands(child, f"{prefix} {name}")


def test_every_option_has_help_and_every_enumeration_has_choices():
    leaves = dict(_commands(cli.build_parser()))
    missing_help, missing_choices = [], []
    for name, parser in leaves.items():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, RenamedOption)) or action.help == argparse.SUPPRESS:
                continue
            if not (action.help or "").strip():
                missing_help.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    for name, flags in ENUMERATED.items():
        for flag in flags:
            action = leaves[name]._option_string_actions[flag]
            if not (action.choices or getattr(action.type, "choices", None)):
                missing_choices.append(f"{name} {flag}")
    assert not missing_help and not missing_choices, (missing_help, missing_choices)
    hidden = sorted(f"{name} {a.option_strings[0]}" for name, p in leaves.items() for a in p._actions
                    if a.help == argparse.SUPPRESS and not isinstance(a, RenamedOption))
    assert hidden == ["eval --index-root"]  # the one deprecated option whose meaning changed (warns in eval)


def test_every_command_that_reports_can_say_it_as_json():
    without = [name for name, parser in _commands(cli.build_parser()) if "--json" not in parser._option_string_actions]
    assert without == []


def test_the_hidden_name_lists_match_the_packages_they_mirror():
    from syntra_dspy.cli.artifacts_cmd import LOOPS
    from syntra_dspy.cli.compile_cmd import STRATEGY_NAMES
    from syntra_dspy.optimizers import STRATEGIES
    from syntra_dspy.optimizers.metric import STAGE_NAMES

    assert set(STRATEGY_NAMES) == set(STRATEGIES) and LOOPS == STAGE_NAMES


@pytest.mark.parametrize(("command", "old", "new"), RENAMED, ids=[r[0] for r in RENAMED])
def test_old_spellings_still_work_for_one_release_with_a_deprecation_message(command, old, new, capsys):
    parser = cli.build_parser()
    before = vars(parser.parse_args([command, *new]))
    assert capsys.readouterr().err == ""
    assert vars(parser.parse_args([command, *old])) == before
    err = capsys.readouterr().err
    renamed = [flag for flag in old if flag.startswith("--") and flag not in new]
    for flag in renamed:
        assert f"syntra: {flag} is deprecated and will be removed in the next release; use --" in err
    assert err.count("deprecated") == len(renamed)
    shown = parser._subparsers._group_actions[0].choices[command]
    if command == "artifacts":
        shown = shown._subparsers._group_actions[0].choices[old[0]]
    assert not [f for f in renamed if re.search(rf"(?<![\w-]){f}(?![\w-])", shown.format_help())]  # hidden


def test_the_rename_helper_keeps_type_choices_and_exclusive_groups(capsys):
    parser = argparse.ArgumentParser(prog="t")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--new", type=int, choices=(1, 2), help="x")
    group.add_argument("--other", help="y")
    parser.add_argument("--flag-new", action="store_true", help="z")
    rename(parser, "--old", "--new")
    rename(parser, "--flag-old", "--flag-new")
    args = parser.parse_args(["--old", "2", "--flag-old"])
    assert (args.new, args.flag_new) == (2, True)
    assert capsys.readouterr().err.count("is deprecated") == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--old", "3"])  # the new option's choices
    with pytest.raises(SystemExit):
        parser.parse_args(["--old", "1", "--other", "x"])  # still exclusive with the group's others
    assert "invalid choice" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("syntra 0.")


@pytest.mark.parametrize("command", cli._COMMANDS)
def test_help_is_fast_and_loads_neither_dspy_nor_torch(command):
    code = ("import sys, time\nstarted = time.perf_counter()\nfrom syntra_dspy.cli import main\n"
            f"try:\n    main([{command!r}, '--help'])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps({'seconds': time.perf_counter() - started, 'heavy': sorted(m for m in "
            "('dspy', 'torch', 'transformers', 'sentence_transformers', 'datasets', 'litellm') if m in sys.modules)}))")
    seconds = []
    for _ in range(3):  # the fastest of three: a busy machine (another job on its cores) is not the CLI's time
        done = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["heavy"] == []
        seconds.append(report["seconds"])
        if report["seconds"] < 1.0:
            break
    assert min(seconds) < 1.0, seconds
