"""Fault injection for the sim bridge: what goes wrong on the link to a robot, decided purely.

Every decision is a function of the bridge's time (seconds of simulated time since the bridge started)
or of a message's index, and of the config's seed. Nothing here reads a clock or draws from a global
random generator, so a fault schedule is reproducible and the decisions are testable on their own.

Faults (all off by default):

- ``drop_probability`` / ``drop_windows``: a published ``LowState`` is not sent (lossy link, a switch
  dropping frames). Random drops are independent per state, drawn from a counter-based hash of
  ``(seed, index)``; windows drop every state whose time falls in ``[start, end)``.
- ``delay_s``: every ``LowState`` leaves the bridge this long after it was measured (a slow link or a
  busy sender): the controller acts on old measurements.
- ``freeze_at_s``: from then on the sensor stream is stuck: messages keep arriving at the full rate but
  carry the same tick and values (a hung driver). Only ``tick`` reveals it.
- ``corrupt_state_crc``: every published ``LowState`` carries a wrong CRC (the reader must drop it).
- ``corrupt_command_probability``: an incoming ``LowCmd`` is corrupted on the "wire" before the bridge
  checks its CRC, so the firmware-style rejection path and its counter are exercised.
- ``kill_at_s``: the bridge process exits abruptly (a crashed robot computer, a pulled cable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from robot_rl.core.errors import RobotRLError

_MASK64 = (1 << 64) - 1
_STATE_STREAM, _COMMAND_STREAM = 0x5A17E, 0xC0FFEE  # separate random streams for the two directions


class FaultConfigError(RobotRLError, ValueError):
    """A fault parameter is out of range; the message names the parameter and the value."""


def _splitmix64(x: int) -> int:
    """One round of splitmix64: a well-mixed 64-bit hash, cheap and portable (no numpy state)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def uniform(seed: int, stream: int, index: int) -> float:
    """A uniform number in [0, 1) that depends only on (seed, stream, index)."""
    h = _splitmix64(_splitmix64(_splitmix64(seed & _MASK64) ^ stream) ^ (index & _MASK64))
    return (h >> 11) / float(1 << 53)


@dataclass(frozen=True)
class FaultConfig:
    drop_probability: float = 0.0  # chance that one LowState is dropped
    drop_windows: tuple[tuple[float, float], ...] = ()  # [start, end) bridge seconds: every LowState dropped
    delay_s: float = 0.0  # LowState leaves this long after it was measured
    freeze_at_s: float | None = None  # state stream frozen from this bridge time on
    corrupt_state_crc: bool = False  # every published LowState has a bad CRC
    corrupt_command_probability: float = 0.0  # chance that an incoming LowCmd is corrupted before its CRC check
    kill_at_s: float | None = None  # the bridge exits at this bridge time
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("drop_probability", "corrupt_command_probability"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise FaultConfigError(f"fault {name} must be a probability in [0, 1], got {value!r}")
        if not (isinstance(self.delay_s, (int, float)) and math.isfinite(self.delay_s) and self.delay_s >= 0):
            raise FaultConfigError(f"fault delay_s must be a finite number >= 0, got {self.delay_s!r}")
        for name in ("freeze_at_s", "kill_at_s"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise FaultConfigError(f"fault {name} must be None or a time in seconds >= 0, got {value!r}")
        for i, window in enumerate(self.drop_windows):
            if len(window) != 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in window):
                raise FaultConfigError(f"fault drop_windows[{i}] must be (start_s, end_s), got {window!r}")
            if not 0 <= window[0] < window[1]:
                raise FaultConfigError(f"fault drop_windows[{i}] = {window!r}: need 0 <= start < end")

    @property
    def any(self) -> bool:
        """Whether any fault is switched on."""
        return self != FaultConfig(seed=self.seed)

    def drop_state(self, index: int, t: float) -> bool:
        """Whether the ``index``-th LowState, measured at bridge time ``t``, is dropped."""
        if any(start <= t < end for start, end in self.drop_windows):
            return True
        return self.drop_probability > 0 and uniform(self.seed, _STATE_STREAM, index) < self.drop_probability

    def release_time(self, t: float) -> float:
        """When a LowState measured at bridge time ``t`` may leave the bridge."""
        return t + self.delay_s

    def frozen(self, t: float) -> bool:
        """Whether the state stream is frozen at bridge time ``t`` (the last state before it is repeated)."""
        return self.freeze_at_s is not None and t >= self.freeze_at_s

    def corrupt_command(self, index: int) -> bool:
        """Whether the ``index``-th received LowCmd is corrupted before the bridge checks its CRC."""
        p = self.corrupt_command_probability
        return p > 0 and (p >= 1.0 or uniform(self.seed, _COMMAND_STREAM, index) < p)

    def killed(self, t: float) -> bool:
        """Whether the bridge must be gone at bridge time ``t``."""
        return self.kill_at_s is not None and t >= self.kill_at_s

    def describe(self) -> str:
        """One line naming the active faults (for the bridge's start-up message)."""
        parts = []
        if self.drop_probability:
            parts.append(f"drop {self.drop_probability:g}")
        if self.drop_windows:
            parts.append("drop windows " + ", ".join(f"[{a:g}, {b:g})s" for a, b in self.drop_windows))
        if self.delay_s:
            parts.append(f"delay {1e3 * self.delay_s:g} ms")
        if self.freeze_at_s is not None:
            parts.append(f"freeze at {self.freeze_at_s:g} s")
        if self.corrupt_state_crc:
            parts.append("corrupt LowState CRC")
        if self.corrupt_command_probability:
            parts.append(f"corrupt LowCmd {self.corrupt_command_probability:g}")
        if self.kill_at_s is not None:
            parts.append(f"kill at {self.kill_at_s:g} s")
        return ", ".join(parts) or "none"
