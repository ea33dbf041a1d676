"""Evaluation of exported policies: the sim2sim gate (MuJoCo and PyBullet through the deploy runtime), its
scripted scenarios, thresholds and report, and the demo (the main job).

Simulators, onnxruntime and matplotlib are imported only when a gate runs, so importing this package is cheap.
"""

from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.scenarios import Scenario, Segment, reach_scenario, scenario_for, velocity_scenario

__all__ = ["GateConfig", "Scenario", "Segment", "reach_scenario", "scenario_for", "velocity_scenario"]
