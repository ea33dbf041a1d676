"""Thresholds of the sim2sim gate: one frozen dataclass, defaults documented, overridable from YAML.

Every threshold is an upper bound (a measured value passes when it is ``<=`` the limit), except the robustness
suite's ``robust_tracking_ratio_min``, a lower bound. A YAML override
file holds any subset of the fields, e.g.::

    # gate.yaml
    settle_s: 1.5
    lin_vel_error_mean_max_m_s: 0.2

and is loaded with :meth:`GateConfig.from_yaml` (unknown keys and wrong types are refused with the file,
key and value named). Robot facts the gate needs (nominal base height, policy period) come from the
robot spec; only fractions of them live here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from robot_rl.core.errors import RobotRLError
from robot_rl.typed_yaml import ConfigError, build, read_yaml


class GateConfigError(RobotRLError, ValueError):
    """A threshold out of its range; ``key`` names it."""

    def __init__(self, key: str, problem: str):
        self.key, self.problem = key, problem
        super().__init__(f"gate config: {key} {problem}")


def _doc(default, doc: str, unit: str = ""):
    return field(default=default, metadata={"doc": doc, "unit": unit})


@dataclass(frozen=True)
class GateConfig:
    # -- what is scored ---------------------------------------------------------------------------------
    settle_s: float = _doc(
        1.0, "after every command change and every push, this long is not scored for tracking (the policy "
        "is still accelerating or recovering; a fall in it still counts, but for a low base right after the policy "
        "takes over: see fall_height_fraction)", "s")
    # -- velocity tracking (velocity tasks), per channel, over the scored ticks ------------------------------
    lin_vel_error_mean_max_m_s: float = _doc(
        0.15, "mean |commanded − measured| body-frame vx and vy, each channel separately", "m/s")
    lin_vel_error_p95_max_m_s: float = _doc(
        0.35, "95th percentile of the same per-tick errors (trot oscillation stays under it)", "m/s")
    yaw_rate_error_mean_max_rad_s: float = _doc(
        0.25, "mean |commanded − measured| yaw rate (gyro z, body frame)", "rad/s")
    yaw_rate_error_p95_max_rad_s: float = _doc(0.6, "95th percentile of the yaw-rate errors", "rad/s")
    segment_lin_vel_error_mean_max_m_s: float = _doc(
        0.25, "mean vx and vy error within each scripted segment, worst segment and channel (the whole-run "
        "mean is diluted by the standing segments; this catches a command that is ignored)", "m/s")
    segment_yaw_rate_error_mean_max_rad_s: float = _doc(
        0.4, "mean yaw-rate error within each scripted segment, worst segment", "rad/s")
    # -- falls (floating-base robots) ---------------------------------------------------------------------
    fall_height_fraction: float = _doc(
        0.5, "a fall: base height below this fraction of the spec's nominal sim_model.base_height, from settle_s "
        "after the policy takes over (the robot powers up passive and may lie low before it)")
    fall_tilt_rad: float = _doc(
        0.8, "a fall: base tilt from upright beyond this (kept under the A1's 1.0 rad safety fault, so a "
        "fall is seen even where the safety chain has no tilt limit)", "rad")
    max_falls: int = _doc(0, "falls allowed per simulator (a runtime fault counts as a fall)")
    # -- safety chain -------------------------------------------------------------------------------------
    max_intervention_rate: float = _doc(
        0.05, "safety-chain interventions (clips, rate and position limits; not faults) per policy tick, "
        "all filters together, from the runtime's diagnostics")
    # -- timing -------------------------------------------------------------------------------------------
    max_step_compute_p99_fraction: float = _doc(
        0.5, "99th percentile of the CPU time the control thread spends inside runtime.step (observation, "
        "policy, safety chain) while the policy runs, as a fraction of the policy period. CPU time, not wall "
        "time: the gate runs in lockstep on shared machines, and another process's preemption is not the "
        "policy's cost; real-time loop behaviour is measured by benchmarks/bench_loop_timing.py and "
        "bench_policy_tick.py")
    # -- reach tasks --------------------------------------------------------------------------------------
    reach_final_error_max_m: float = _doc(
        0.03, "tool-point distance to each target at the end of its segment, worst target", "m")
    reach_mean_error_max_m: float = _doc(
        0.05, "mean tool-point distance to each target over its scored ticks, worst target", "m")
    # -- object-goal tasks --------------------------------------------------------------------------------
    object_goal_final_error_max_m: float = _doc(
        0.03, "the object's distance to the goal at the end of the run (panda-push's success radius)", "m")
    object_goal_layouts: int = _doc(
        10, "layouts the object-goal gate runs in each simulator (layout seeds 0, 1, …; seed 0 is plotted)", "")
    object_goal_off_max: float = _doc(
        0.2, "share of those layouts whose object ends farther from its goal than object_goal_final_error_max_m "
        "(0.2: the task's 80 % success bar)", "")

    # -- robustness suite (``--suite full``) ----------------------------------------------------------------
    robust_tracking_ratio_min: float = _doc(
        0.9, "a LOWER bound: at each corner of the training randomization, the nominal runs' mean tracking error "
        "divided by the corner runs' (1: as good as nominal), over the same seeds' scripts in the same simulator")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not value >= 0:  # also refuses NaN
                raise GateConfigError(f.name, f"must be ≥ 0, got {value!r}")
        if self.object_goal_layouts < 1:
            raise GateConfigError("object_goal_layouts", f"must be ≥ 1, got {self.object_goal_layouts!r}")
        if not 0.0 < self.fall_height_fraction < 1.0:
            raise GateConfigError("fall_height_fraction", f"must be in (0, 1), got {self.fall_height_fraction!r}")

    @classmethod
    def from_yaml(cls, path: str | Path) -> GateConfig:
        """Defaults, with the file's fields overriding them. Raises ConfigError naming file, key and value."""
        data = read_yaml(path)
        if data is None:  # an empty file: all defaults
            data = {}
        try:
            return build(cls, data, path)
        except GateConfigError as exc:
            raise ConfigError(path, exc.key, exc.problem) from None

    def describe(self) -> list[tuple[str, str, str, str]]:
        """(name, value, unit, meaning) of every threshold, for reports."""
        return [(f.name, f"{getattr(self, f.name):g}", f.metadata.get("unit", ""), f.metadata.get("doc", ""))
                for f in dataclasses.fields(self)]
