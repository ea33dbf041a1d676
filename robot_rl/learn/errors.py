"""Errors of the learning commands whose message is meant for the person at the terminal (no torch import)."""

from __future__ import annotations

from robot_rl.core.errors import RobotRLError


class CheckpointError(RobotRLError, ValueError):
    """A checkpoint does not fit the task or robot it is being loaded for (or is not a checkpoint)."""
