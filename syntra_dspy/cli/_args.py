"""Argument types shared by subcommands."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any


def positive_int(value: str) -> int:
    """argparse type: an integer of at least 1, with a message naming the bad value."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def count_or_all(value: str) -> int | str:
    """argparse type: a positive integer, or 'all' (kept as the string: "every one", distinct from not given)."""
    if value.strip().lower() == "all":
        return "all"
    try:
        return positive_int(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {value!r}") from None


def positive_int_or_all(value: str) -> int | None:
    """argparse type: a positive integer, or 'all' (or 'none'; None: no limit)."""
    count = count_or_all("all" if value.strip().lower() == "none" else value)
    return None if count == "all" else int(count)


def _finite(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {value!r}")
    return number


def positive_seconds(value: str) -> float:
    """argparse type: a finite number of seconds above 0."""
    number = _finite(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return number


def temperature(value: str) -> float:
    """argparse type: a sampling temperature from 0 to 2 (``nan`` and ``inf`` are refused)."""
    number = _finite(value)
    if not 0 <= number <= 2:
        raise argparse.ArgumentTypeError(f"expected a temperature from 0 to 2, got {value!r}")
    return number


def fraction(value: str) -> float:
    """argparse type: a number strictly between 0 and 1."""
    number = _finite(value)
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1 (e.g. 0.1), got {value!r}")
    return number


# --- one name per concept: old spellings kept for one release --------------------------------------------------

#: The release after which the old spellings stop working.
REMOVED_IN = "the next release"


def warn_deprecated(old: str, new: str) -> None:
    """Say on stderr that ``old`` is an old spelling of ``new``: the one message every renamed option prints."""
    print(f"syntra: {old} is deprecated and will be removed in {REMOVED_IN}; use {new}", file=sys.stderr)


class RenamedOption(argparse.Action):
    """An old spelling of an option: takes what the new one takes, does what it does, and warns (hidden in --help)."""

    def __init__(self, option_strings: list[str], dest: str, *, target: argparse.Action, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=target.nargs, const=target.const, default=argparse.SUPPRESS,
                         type=target.type, choices=target.choices, metavar=target.metavar, help=argparse.SUPPRESS)
        self.target = target

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        new = self.target.option_strings[-1]
        warn_deprecated(option_string or self.option_strings[0], new)
        self.target(parser, namespace, values, new)


def rename(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Keep ``old`` working for one more release as a spelling of the option ``new`` (already added to ``parser``):
    the same destination, type and choices, hidden from --help, with a deprecation message on stderr when used."""
    target = parser._option_string_actions[new]
    group = next((g for g in parser._mutually_exclusive_groups if target in g._group_actions), None)
    if group is None and target.required:
        # a required option given by its old name counts as given: the two form a required either-or
        group = parser.add_mutually_exclusive_group(required=True)
        group._group_actions.append(target)
        target.required = False
    (group or parser).add_argument(old, dest=target.dest, action=RenamedOption, target=target)


class CommaChoices:
    """argparse type: a comma-separated list of values from ``choices`` (``graded,written``), as a list."""

    def __init__(self, choices: Sequence[str]) -> None:
        self.choices = tuple(choices)

    def __call__(self, value: str) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in self.choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"expected {' or '.join(self.choices)}, several separated by commas; got "
                                             + (f"unknown {bad[0]!r}" if bad else "nothing"))
        return items

    def __repr__(self) -> str:  # argparse names the type in some messages
        return "comma-separated " + "|".join(self.choices)
