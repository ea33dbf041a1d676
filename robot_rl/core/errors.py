"""One base for every error this project raises on purpose.

The command line catches :class:`RobotRLError` once and prints its message as one line (exit 2); anything
else is a bug and keeps its traceback. Subclasses keep their builtin bases (``ValueError``,
``FileNotFoundError``, …) so callers that already catch those keep working.
"""

from __future__ import annotations


class RobotRLError(Exception):
    """An expected failure with a message a user can act on: bad input, a missing file, a broken contract."""
