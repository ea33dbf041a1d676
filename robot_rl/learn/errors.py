"""Errors of the learning commands whose message is meant for the person at the terminal (no torch import)."""

from __future__ import annotations

from robot_rl.robots.assets import ModelSourceError
from robot_rl.tasks.registry import UnknownTaskError
from robot_rl.typed_yaml import ConfigError


class CheckpointError(ValueError):
    """A checkpoint does not fit the task or robot it is being loaded for (or is not a checkpoint)."""


# The scripts print these as one line (``error: …``) instead of a traceback; ConfigError covers a bad
# randomization override (UnknownRandomizationKey).
USER_ERRORS: tuple[type[BaseException], ...] = (CheckpointError, UnknownTaskError, ConfigError, ModelSourceError)
