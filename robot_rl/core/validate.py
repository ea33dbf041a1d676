"""Range checks for command-line arguments: one line naming the flag, raised as :class:`ArgumentError`
(a :class:`RobotRLError`: the command line prints it and exits 2).

Each check takes keyword arguments named like the function's parameters; the flag in the message is the
one tyro shows (``duration_s`` → ``--duration-s``). ``None`` passes (an optional argument left unset).
Every number must also be finite: NaN and infinity are refused everywhere.

    positive(duration_s=duration_s)                  # > 0
    non_negative(domain_id=domain_id, seed=seed)     # >= 0
    in_range(0.0, 1.0, drop=drop)                    # low <= value <= high
"""

from __future__ import annotations

import math
from numbers import Real

from robot_rl.core.errors import RobotRLError


class ArgumentError(RobotRLError, ValueError):
    """A command-line argument outside the values it can take (the message names the flag)."""


def flag(name: str) -> str:
    """The command-line spelling of a parameter name: ``duration_s`` → ``--duration-s``."""
    return "--" + name.replace("_", "-")


def _check(name: str, value: object, ok: bool, wanted: str) -> None:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ArgumentError(f"{flag(name)} must be a number {wanted}, got {value!r}")
    if not (math.isfinite(value) and ok):
        raise ArgumentError(f"{flag(name)} must be a finite number {wanted}, got {value!r}")


def positive(**values: float | None) -> None:
    """Each value is None or a finite number > 0 (durations, rates, periods)."""
    for name, value in values.items():
        if value is not None:
            _check(name, value, isinstance(value, Real) and value > 0, "> 0")


def non_negative(**values: float | None) -> None:
    """Each value is None or a finite number >= 0 (counts, delays, ids, seeds)."""
    for name, value in values.items():
        if value is not None:
            _check(name, value, isinstance(value, Real) and value >= 0, ">= 0")


def in_range(low: float, high: float, /, **values: float | None) -> None:
    """Each value is None or a finite number in [low, high] (probabilities, ids with a protocol limit)."""
    for name, value in values.items():
        if value is not None:
            _check(name, value, isinstance(value, Real) and low <= value <= high, f"in [{low:g}, {high:g}]")
