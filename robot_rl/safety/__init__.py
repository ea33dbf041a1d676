"""The safety chain between a learned policy and a robot: pure filters, composed in a fixed order."""

from robot_rl.safety.chain import (
    FilterState,
    SafetyChain,
    SafetyOutput,
    SafetyReport,
    chain_step,
    damping_command,
    late_check,
)
from robot_rl.safety.deadlines import missed_deadlines
from robot_rl.safety.filters import (
    FILTER_ORDER,
    ActionClip,
    SafetyEvent,
    SafetyLimits,
)

__all__ = [
    "FILTER_ORDER",
    "ActionClip",
    "FilterState",
    "SafetyChain",
    "SafetyEvent",
    "SafetyLimits",
    "SafetyOutput",
    "SafetyReport",
    "chain_step",
    "damping_command",
    "late_check",
    "missed_deadlines",
]
