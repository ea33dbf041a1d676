"""Residual off-policy fine-tuning on hardware: base policy + a bounded residual learned with SAC.

The control loop runs :class:`ResidualPolicy` (base ONNX + numpy residual actor) inside the unchanged deploy
runtime, upstream of its safety chain; a spawned learner process (:class:`LearnerProcess`) trains the residual
from the loop's transitions and publishes weights through shared memory. ``finetune`` is the command;
``export_residual`` writes base + residual as one ONNX policy with the base's contract.

Heavy modules (torch, the learner) are imported where they are used.
"""

from robot_rl.learn.residual.actor import ResidualPolicy, residual_bound
from robot_rl.learn.residual.config import LearnerCfg, ReplayCfg, ResidualCfg, SACCfg
from robot_rl.learn.residual.shifted_sim import RealityShift, ShiftedSimRobot, shifted_vec_env

__all__ = [
    "LearnerCfg",
    "RealityShift",
    "ReplayCfg",
    "ResidualCfg",
    "ResidualPolicy",
    "SACCfg",
    "ShiftedSimRobot",
    "residual_bound",
    "shifted_vec_env",
]
