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
