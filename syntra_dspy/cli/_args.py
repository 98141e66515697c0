"""Argument types shared by subcommands."""

from __future__ import annotations

import argparse
import math


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
