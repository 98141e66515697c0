"""Argument types shared by subcommands."""

from __future__ import annotations

import argparse


def positive_int(value: str) -> int:
    """argparse type: an integer of at least 1, with a message naming the bad value."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def positive_int_or_all(value: str) -> int | None:
    """argparse type: a positive integer, or 'all' (None: no limit)."""
    if value.strip().lower() in {"all", "none"}:
        return None
    try:
        return positive_int(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'all', got {value!r}") from None
