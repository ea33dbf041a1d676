"""Scoring one simulator's run for the sim2sim gate: pure functions of the recorded run, no simulator.

The quantities (tracking error, falls, interventions, timing, tip distance) are defined precisely in the
docstring of :mod:`robot_rl.evaluation.sim2sim`; each has one function here, and :func:`score_run` turns
them into pass/fail :class:`Check` rows against a :class:`GateConfig`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from robot_rl.control.deploy_loop import RunRecord
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.scenarios import Scenario
from robot_rl.robots.spec import RobotSpec

# (channel, command name, unit): what is tracked on a velocity task, in the command's order.
VELOCITY_CHANNELS = (("vx", "lin_vel_x", "m/s"), ("vy", "lin_vel_y", "m/s"), ("yaw_rate", "ang_vel_z", "rad/s"))
RUNNING = "running"
FAULTED = "damping"  # the gate never stops a run, so damping means the safety chain latched a fault


OBJECT_DISTANCE_CHECK = "object distance to goal at the end"
INTERVENTION_CHECK = "safety interventions per tick"


@dataclass(frozen=True)
class Check:
    """One gate criterion: passes when ``value <= limit`` (NaN — nothing measured — fails)."""

    name: str
    value: float
    limit: float
    unit: str = ""
    note: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.value <= self.limit)


@dataclass(frozen=True)
class ChannelError:
    mean: float  # NaN when no tick was scored
    p95: float
    samples: int


@dataclass(frozen=True)
class FallResult:
    fell: bool
    t_s: float | None = None  # loop time of the first fallen tick
    cause: str = ""


@dataclass(frozen=True)
class TimingStats:
    wall_s: float  # the run itself (run_loop), lockstep
    setup_s: float  # building the simulator and loading the policy
    simulated_s: float
    ticks: int
    step_p50_ms: float  # time inside runtime.step while the policy runs
    step_p99_ms: float
    step_max_ms: float

    @property
    def realtime_factor(self) -> float:
        return self.simulated_s / self.wall_s if self.wall_s > 0 else math.inf


@dataclass(frozen=True)
class TargetError:
    label: str
    target: tuple[float, ...]
    final_m: float  # distance at the segment's last tick
    mean_m: float  # mean distance over the segment's scored ticks (NaN when none)
    samples: int


@dataclass
class SimRun:
    """What one simulator produced: the loop's record plus what the gate measured around it."""

    simulator: str
    record: RunRecord
    base_ang_vel: np.ndarray  # (T, 3) gyro as read by the loop, body frame
    step_compute_s: np.ndarray  # (T,) CPU time of the control thread inside runtime.step
    setup_s: float = 0.0
    tip_pos: np.ndarray | None = None  # (T, 3) reach tasks: tool point in the base frame
    object_pos: np.ndarray | None = None  # (T, 3) object-goal tasks: the scene's object in the base frame


@dataclass
class SimScore:
    simulator: str
    checks: tuple[Check, ...] = ()
    tracking: dict[str, ChannelError] = field(default_factory=dict)
    segments: dict[str, dict[str, ChannelError]] = field(default_factory=dict)  # per scripted segment
    fall: FallResult = FallResult(False)
    interventions: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    intervention_rate: float = 0.0
    timing: TimingStats | None = None
    reach: tuple[TargetError, ...] = ()
    error: str | None = None  # the run itself failed (an exception): the simulator fails the gate

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(c.passed for c in self.checks)


def commanded(record: RunRecord, scenario: Scenario) -> np.ndarray:
    """(T, C) the command in force at every tick: as the policy saw it (after clamping) when the runtime
    has a policy, else the scenario's script (a runtime holding the default pose takes no command)."""
    n = len(scenario.command_names)
    if record.command.shape[1] == n:
        return record.command
    steps = scenario.command_steps()
    times = np.array([step.t_s for step in steps])
    values = np.array([step.value for step in steps], dtype=np.float64).reshape(len(steps), n)
    # The step in force at t: the last one starting at or before t (as run_loop picks it).
    out = values[np.clip(np.searchsorted(times, record.t + 1e-9, side="right") - 1, 0, None)]
    return out


def event_times(t: np.ndarray, mode: list[str], command: np.ndarray, push_times: np.ndarray) -> np.ndarray:
    """Loop times after which the robot needs time to settle: the policy taking over, every change of the
    command, every push."""
    running = np.array([m == RUNNING for m in mode])
    starts = np.flatnonzero(running & ~np.concatenate([[False], running[:-1]]))
    changed = np.flatnonzero(np.any(command[1:] != command[:-1], axis=1)) + 1 if len(command) > 1 else np.array([])
    return np.sort(np.concatenate([t[starts], t[changed.astype(int)], np.asarray(push_times, dtype=float)]))


def scored_mask(t: np.ndarray, mode: list[str], events: np.ndarray, settle_s: float,
                end_index: int | None = None) -> np.ndarray:
    """Ticks that count for tracking: policy running, not within ``settle_s`` after an event, before
    ``end_index`` (the first fallen tick)."""
    mask = np.array([m == RUNNING for m in mode], dtype=bool)
    for te in events:
        mask &= ~((t >= te - 1e-9) & (t < te + settle_s - 1e-9))
    if end_index is not None:
        mask[end_index:] = False
    return mask


def channel_error(commanded_values: np.ndarray, measured: np.ndarray, mask: np.ndarray) -> ChannelError:
    """Mean and 95th percentile (linear interpolation) of |commanded − measured| over the masked ticks;
    ticks with a non-finite measurement are left out."""
    err = np.abs(commanded_values - measured)
    keep = mask & np.isfinite(err)
    if not keep.any():
        return ChannelError(math.nan, math.nan, 0)
    e = err[keep]
    return ChannelError(float(e.mean()), float(np.percentile(e, 95)), int(keep.sum()))


def yaw_rate_from_quat(quat_wxyz: np.ndarray, t: np.ndarray) -> np.ndarray:
    """World-frame yaw rate from base orientations (unwrapped yaw, central differences). For records
    without a gyro; equals the body-frame z rate while the base is level."""
    w, x, y, z = quat_wxyz.T
    yaw = np.unwrap(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))
    return np.gradient(yaw, t) if len(t) > 1 else np.zeros_like(yaw)


def tracking_errors(record: RunRecord, yaw_rate: np.ndarray, command: np.ndarray,
                    mask: np.ndarray) -> dict[str, ChannelError]:
    measured = (record.base_lin_vel[:, 0], record.base_lin_vel[:, 1], yaw_rate)
    return {name: channel_error(command[:, i], measured[i], mask)
            for i, (name, _, _) in enumerate(VELOCITY_CHANNELS)}


def segment_errors(record: RunRecord, yaw_rate: np.ndarray, command: np.ndarray, mask: np.ndarray,
                   scenario: Scenario) -> dict[str, dict[str, ChannelError]]:
    """The tracking errors of each scripted segment alone (its scored ticks), by segment label."""
    out = {}
    for seg, start, end in scenario.segment_bounds():
        inside = mask & (record.t >= start - 1e-9) & (record.t < end - 1e-9)
        out[seg.label] = tracking_errors(record, yaw_rate, command, inside)
    return out


def tilt(quat_wxyz: np.ndarray) -> np.ndarray:
    """Angle between the base's z axis and the world's vertical (rad)."""
    x, y = quat_wxyz[:, 1], quat_wxyz[:, 2]
    return np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0))


def detect_fall(record: RunRecord, spec: RobotSpec, config: GateConfig) -> FallResult:
    """The first tick where the base is below ``fall_height_fraction`` of the nominal height, tilted
    beyond ``fall_tilt_rad``, or the runtime is in damping (a latched safety fault). Height and tilt
    apply to floating-base robots only.

    The height counts from ``settle_s`` after the policy takes over (from the first tick where none does): the
    motors power up passive and the ramp to the default pose holds it at the spec's gains, so a robot may sink
    to its belly before the policy acts (a Go2 with +4.5 kg in the soft contact does), as a real one starts
    lying down. What the policy is judged on is standing it up. Tilt and faults count from the first tick."""
    n = len(record.t)
    causes: list[tuple[int, str]] = []
    sim = spec.sim_model
    if sim.floating_base:
        if sim.base_height is not None:
            floor = config.fall_height_fraction * sim.base_height
            running = np.flatnonzero(np.array([m == RUNNING for m in record.mode], dtype=bool))
            counted = np.ones(n, dtype=bool) if not len(running) else (
                record.t >= record.t[running[0]] + config.settle_s - 1e-9)
            low = np.flatnonzero((record.base_pos[:, 2] < floor) & counted)
            if len(low):
                k = int(low[0])
                causes.append((k, f"base height {record.base_pos[k, 2]:.3f} m < {floor:.3f} m"))
        tilted = np.flatnonzero(tilt(record.base_quat) > config.fall_tilt_rad)
        if len(tilted):
            k = int(tilted[0])
            causes.append((k, f"tilt {math.degrees(tilt(record.base_quat[k:k + 1])[0]):.0f}° > "
                              f"{math.degrees(config.fall_tilt_rad):.0f}°"))
    faulted = [k for k in range(n) if record.mode[k] == FAULTED]
    if faulted:
        fault = record.diagnostics.get("fault") or ["safety fault"]
        causes.append((faulted[0], f"runtime faulted: {fault[0]}"))
    if not causes:
        return FallResult(False)
    k, cause = min(causes, key=lambda c: c[0])
    return FallResult(True, float(record.t[k]), cause)


def safety_counts(diagnostics: dict) -> tuple[dict[str, int], dict[str, int], int]:
    """(interventions per filter, faults per filter, chain steps) from ``runtime.diagnostics()``."""
    safety = diagnostics.get("safety", {})
    return dict(safety.get("interventions", {})), dict(safety.get("faults", {})), int(safety.get("steps", 0))


def step_timing(run: SimRun) -> TimingStats:
    rec = run.record
    running = np.array([m == RUNNING for m in rec.mode], dtype=bool)
    samples = run.step_compute_s[running] if running.any() else run.step_compute_s
    ms = samples * 1e3 if len(samples) else np.array([math.nan])
    simulated = float(rec.t[-1] - rec.t[0]) + rec_period(rec) if len(rec.t) else 0.0
    return TimingStats(rec.wall_time_s, run.setup_s, simulated, rec.ticks, float(np.percentile(ms, 50)),
                       float(np.percentile(ms, 99)), float(np.max(ms)))


def rec_period(record: RunRecord) -> float:
    return float(record.t[1] - record.t[0]) if len(record.t) > 1 else 0.0


def reach_errors(tip: np.ndarray, record: RunRecord, scenario: Scenario, mask: np.ndarray) -> tuple[TargetError, ...]:
    """Per scripted target: tool-point distance at the segment's last tick, and its mean over the
    segment's scored ticks. Targets are the command as the policy saw it (base frame)."""
    command = commanded(record, scenario)
    dist = np.linalg.norm(tip - command[:, :3], axis=1)
    out = []
    for seg, start, end in scenario.segment_bounds():
        inside = np.flatnonzero((record.t >= start - 1e-9) & (record.t < end - 1e-9))
        if not len(inside):
            out.append(TargetError(seg.label, seg.command, math.nan, math.nan, 0))
            continue
        scored = inside[mask[inside]]
        mean = float(dist[scored].mean()) if len(scored) else math.nan
        out.append(TargetError(seg.label, seg.command, float(dist[inside[-1]]), mean, len(scored)))
    return tuple(out)


def _worst(values: list[float]) -> float:
    """The largest value; NaN (something unmeasured) wins, so it fails the check."""
    return math.nan if not values or any(math.isnan(v) for v in values) else max(values)


def _worst_scored(segments: dict[str, dict[str, ChannelError]], channels: tuple[str, ...]) -> tuple[float, str]:
    """The largest mean error over the segments that scored any tick (NaN when none did), and a note
    saying which segment it was and how many segments scored."""
    worst, where, scored = math.nan, "", 0
    for label, errors in segments.items():
        means = [(errors[c].mean, c) for c in channels if errors[c].samples]
        scored += bool(means)
        for mean, channel in means:
            if not mean <= worst:  # also takes the first one over NaN
                worst, where = mean, f"{channel} in '{label}'"
    note = f"{where}; {scored} of {len(segments)} segments scored" if where else "no segment scored"
    return worst, note


# The gate's task terms: the checks of each gate a task names (TaskTerms.gate), beside the common ones (falls,
# safety interventions, step time). Each returns (tracking, segments, reach, checks).
GateChecks = Callable[[SimRun, Scenario, np.ndarray, np.ndarray, GateConfig],
                      tuple[dict[str, ChannelError], dict[str, dict[str, ChannelError]], tuple[TargetError, ...],
                            list[Check]]]


def velocity_checks(run: SimRun, scenario: Scenario, command: np.ndarray, mask: np.ndarray,
                    config: GateConfig) -> tuple:
    """Base velocity tracking: each channel's error over the scored ticks, and per segment."""
    rec, checks = run.record, []
    yaw_rate = run.base_ang_vel[:, 2] if len(run.base_ang_vel) == len(rec.t) else yaw_rate_from_quat(
        rec.base_quat, rec.t)
    tracking = tracking_errors(rec, yaw_rate, command, mask)
    segments = segment_errors(rec, yaw_rate, command, mask, scenario)
    limits = {"m/s": (config.lin_vel_error_mean_max_m_s, config.lin_vel_error_p95_max_m_s),
              "rad/s": (config.yaw_rate_error_mean_max_rad_s, config.yaw_rate_error_p95_max_rad_s)}
    for name, _, unit in VELOCITY_CHANNELS:
        err, (mean_max, p95_max) = tracking[name], limits[unit]
        note = f"{err.samples} ticks scored" if err.samples else "no tick scored"
        checks.append(Check(f"{name} error mean", err.mean, mean_max, unit, note))
        checks.append(Check(f"{name} error p95", err.p95, p95_max, unit))
    lin, note = _worst_scored(segments, ("vx", "vy"))
    checks.append(Check("vx, vy error mean, worst segment", lin, config.segment_lin_vel_error_mean_max_m_s,
                        "m/s", note))
    yaw, note = _worst_scored(segments, ("yaw_rate",))
    checks.append(Check("yaw_rate error mean, worst segment", yaw, config.segment_yaw_rate_error_mean_max_rad_s,
                        "rad/s", note))
    return tracking, segments, (), checks


def reach_checks(run: SimRun, scenario: Scenario, command: np.ndarray, mask: np.ndarray,
                 config: GateConfig) -> tuple:
    """Tool-point targets: the tip's final and mean error at each target."""
    rec, checks = run.record, []
    if run.tip_pos is None:
        raise ValueError("a reach scenario needs the tool-point trajectory (SimRun.tip_pos)")
    reach = reach_errors(run.tip_pos, rec, scenario, mask)
    checks.append(Check("tip error final (worst target)", _worst([r.final_m for r in reach]),
                        config.reach_final_error_max_m, "m"))
    checks.append(Check("tip error mean (worst target)", _worst([r.mean_m for r in reach]),
                        config.reach_mean_error_max_m, "m"))
    return {}, {}, reach, checks


def object_goal_checks(run: SimRun, scenario: Scenario, command: np.ndarray, mask: np.ndarray,
                       config: GateConfig) -> tuple:
    """Object to goal: the object's distance to the commanded goal (the task's own measure) at the end."""
    if run.object_pos is None or scenario.goal_distance is None or not len(run.object_pos):
        raise ValueError("an object-goal scenario needs the object's trajectory (SimRun.object_pos)")
    final = float(scenario.goal_distance(run.object_pos[-1], command[-1]))
    start = float(scenario.goal_distance(run.object_pos[0], command[-1]))
    return {}, {}, (), [Check(OBJECT_DISTANCE_CHECK, final, config.object_goal_final_error_max_m,
                              "m", f"{100 * start:.1f} cm at the start")]


GATE_CHECKS: dict[str, GateChecks] = {"velocity_tracking": velocity_checks, "reach": reach_checks,
                                      "object_goal": object_goal_checks}


def score_run(run: SimRun, scenario: Scenario, spec: RobotSpec, config: GateConfig) -> SimScore:
    rec = run.record
    fall = detect_fall(rec, spec, config)
    end = None if not fall.fell else int(np.searchsorted(rec.t, fall.t_s))
    command = commanded(rec, scenario)
    events = event_times(rec.t, rec.mode, command, scenario.push_times())
    mask = scored_mask(rec.t, rec.mode, events, config.settle_s, end)
    interventions, faults, steps = safety_counts(rec.diagnostics)
    rate = sum(interventions.values()) / max(steps, 1)
    timing = step_timing(run)
    period_ms = spec.timing.policy_period_s * 1e3

    checks = [Check("falls", float(fall.fell), float(config.max_falls), "", fall.cause)]
    tracking, segments, reach, task_checks = GATE_CHECKS[scenario.gate](run, scenario, command, mask, config)
    checks += task_checks
    checks.append(Check(INTERVENTION_CHECK, rate, config.max_intervention_rate, "",
                        f"{sum(interventions.values())} in {steps} ticks"))
    checks.append(Check("runtime.step p99", timing.step_p99_ms, config.max_step_compute_p99_fraction * period_ms,
                        "ms", f"{config.max_step_compute_p99_fraction:g} of the {period_ms:g} ms period"))
    return SimScore(run.simulator, tuple(checks), tracking, segments, fall, interventions, faults, rate, timing, reach)


def layouts_score(first: SimScore, others: list[SimScore], config: GateConfig) -> SimScore:
    """``first`` (the plotted layout's score) with its distance check replaced by the share of all layouts that
    end off the goal, its intervention check by the mean rate over all layouts, and a check that no layout fell,
    faulted or raised (``others``: the further layouts' scores, an error for one that raised)."""
    layouts = [first, *others]
    ran = [s for s in layouts if s.error is None]
    n = len(layouts)
    off = sum(not any(c.name == OBJECT_DISTANCE_CHECK and c.passed for c in s.checks) for s in layouts)
    bad = sum(s.error is not None or s.fall.fell or bool(sum(s.faults.values())) for s in layouts)
    rate = float(np.mean([s.intervention_rate for s in ran])) if ran else float("nan")
    keep = [c for c in first.checks if c.name not in (OBJECT_DISTANCE_CHECK, INTERVENTION_CHECK)]
    first_note = next((c.note for c in first.checks if c.name == OBJECT_DISTANCE_CHECK), "")
    worst = max((s.intervention_rate for s in ran), default=float("nan"))
    checks = [*keep,
              Check(f"layouts with the object off the goal (of {n})", off / n, config.object_goal_off_max, "",
                    f"{n - off}/{n} within {100 * config.object_goal_final_error_max_m:g} cm; layout seed 0: "
                    f"{first_note}"),
              Check(f"layouts with a fall, a safety fault or an error (of {n})", float(bad), 0.0, ""),
              Check(f"{INTERVENTION_CHECK}, mean of {n} layouts", rate, config.max_intervention_rate, "",
                    f"worst layout {worst:.3f}")]
    return replace(first, checks=tuple(checks))


def verdict(scores: list[SimScore]) -> bool:
    """The gate passes when at least one simulator ran and every simulator passed every check."""
    return bool(scores) and all(s.passed for s in scores)
