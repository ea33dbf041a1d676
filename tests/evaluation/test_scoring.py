"""Each gate check on synthetic run records with known values: tracking error, scored window, falls,
interventions, timing and the verdict."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from robot_rl.control.deploy_loop import Push, RunRecord
from robot_rl.evaluation.gate_config import GateConfig
from robot_rl.evaluation.scenarios import Scenario, Segment, reach_scenario
from robot_rl.evaluation.scoring import (
    Check,
    SimRun,
    SimScore,
    commanded,
    detect_fall,
    event_times,
    reach_errors,
    score_run,
    scored_mask,
    tilt,
    verdict,
    yaw_rate_from_quat,
)
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task

A1 = load_robot("a1")
NAMES = ("lin_vel_x", "lin_vel_y", "ang_vel_z")
DT = 0.1  # a coarse tick keeps the hand-computed numbers readable
T = np.round(np.arange(40) * DT, 10)  # 0.0 … 3.9 s
LEAD_IN = 1.0  # ticks 0–9 ramp, 10–39 running
# loop time: stand 1–2 s, forward 2–4 s
SCENARIO = Scenario("synthetic", "velocity_tracking", NAMES,
                    (Segment("stand", 0.0, 1.0, (0.0, 0.0, 0.0)), Segment("forward", 1.0, 2.0, (0.5, 0.0, 0.0))),
                    (), LEAD_IN)
CONFIG = GateConfig(settle_s=0.5)


def record(vx: np.ndarray | None = None, base_z: float | np.ndarray = 0.27, quat: np.ndarray | None = None,
           mode: list[str] | None = None, diagnostics: dict | None = None,
           command: np.ndarray | None = None) -> RunRecord:
    n, j = len(T), A1.num_joints
    if command is None:
        command = np.zeros((n, 3))
        command[T >= 2.0 - 1e-9, 0] = 0.5
    lin_vel = np.zeros((n, 3))
    lin_vel[:, 0] = 0.0 if vx is None else vx
    base_pos = np.zeros((n, 3))
    base_pos[:, 2] = base_z
    return RunRecord(
        t=T.copy(), mode=mode or ["ramp"] * 10 + ["running"] * 30, q=np.zeros((n, j)),
        q_target_proposed=np.zeros((n, j)), q_target_sent=np.zeros((n, j)), command=command,
        base_pos=base_pos, base_lin_vel=lin_vel,
        base_quat=np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)) if quat is None else quat,
        diagnostics=diagnostics or {"safety": {"steps": n, "interventions": {}, "faults": {}}}, ticks=n,
    )


def known_vx() -> np.ndarray:
    """Scored ticks are 15–19 (stand, after the 1.0 s policy start + 0.5 s) and 25–39 (forward, after the
    2.0 s command change + 0.5 s). Unscored ticks carry absurd values that must not count."""
    vx = np.full(len(T), 7.0)  # ramp and settling windows
    vx[15:20] = 0.05  # error 0.05 on 5 ticks
    vx[25:39] = 0.4  # error 0.1 on 14 ticks
    vx[39] = 0.0  # error 0.5 on 1 tick
    return vx


def run_of(rec: RunRecord, yaw_rate: float = 0.2, compute_s: np.ndarray | None = None) -> SimRun:
    gyro = np.zeros((len(rec.t), 3))
    gyro[:, 2] = yaw_rate
    return SimRun("synthetic", rec, gyro, np.full(len(rec.t), 1e-4) if compute_s is None else compute_s)


def check(score: SimScore, name: str) -> Check:
    return next(c for c in score.checks if c.name == name)


def test_scored_window_excludes_ramp_settling_after_changes_and_pushes_and_after_a_fall():
    rec = record()
    events = event_times(rec.t, rec.mode, rec.command, np.array([3.0]))
    np.testing.assert_allclose(events, [1.0, 2.0, 3.0])  # policy start, command change, push
    mask = scored_mask(rec.t, rec.mode, events, 0.5)
    assert np.flatnonzero(mask).tolist() == [*range(15, 20), *range(25, 30), *range(35, 40)]
    assert np.flatnonzero(scored_mask(rec.t, rec.mode, events, 0.5, end_index=37)).tolist()[-1] == 36


def test_tracking_error_mean_and_p95_match_hand_computed_values():
    score = score_run(run_of(record(vx=known_vx())), SCENARIO, A1, CONFIG)
    vx = score.tracking["vx"]
    assert vx.samples == 20
    assert vx.mean == pytest.approx((5 * 0.05 + 14 * 0.1 + 0.5) / 20)
    # 95th percentile, linear: position 0.95 · 19 = 18.05 between the sorted 0.1 (18) and 0.5 (19).
    assert vx.p95 == pytest.approx(0.1 + 0.05 * 0.4)
    assert score.tracking["vy"].mean == 0.0
    assert score.tracking["yaw_rate"].mean == pytest.approx(0.2)  # the gyro's z, not the quaternion
    assert score.segments["stand"]["vx"].mean == pytest.approx(0.05)
    assert score.segments["forward"]["vx"].mean == pytest.approx((14 * 0.1 + 0.5) / 15)
    assert check(score, "vx error mean").value == pytest.approx(0.1075)
    assert check(score, "vx, vy error mean, worst segment").value == pytest.approx(1.9 / 15)
    assert "vx in 'forward'" in check(score, "vx, vy error mean, worst segment").note


def test_tracking_thresholds_decide_pass_and_fail():
    rec = record(vx=known_vx())
    passing = score_run(run_of(rec), SCENARIO, A1, CONFIG)
    assert passing.passed, [c for c in passing.checks if not c.passed]
    strict = score_run(run_of(rec), SCENARIO, A1, dataclasses.replace(CONFIG, lin_vel_error_p95_max_m_s=0.11))
    assert not strict.passed and [c.name for c in strict.checks if not c.passed] == ["vx error p95"]
    ignored = record(vx=np.zeros(len(T)))  # the robot stands through the forward command
    failed = score_run(run_of(ignored), SCENARIO, A1, CONFIG)
    assert check(failed, "vx, vy error mean, worst segment").value == pytest.approx(0.5)
    assert not check(failed, "vx, vy error mean, worst segment").passed


def test_nothing_scored_fails_instead_of_passing():
    score = score_run(run_of(record(vx=known_vx())), SCENARIO, A1, dataclasses.replace(CONFIG, settle_s=5.0))
    assert math.isnan(check(score, "vx error mean").value) and not score.passed
    assert check(score, "vx error mean").note == "no tick scored"


def test_yaw_rate_from_quaternions_through_the_wrap():
    t = np.arange(200) * 0.02
    yaw = 0.7 * t - 0.5  # passes ±π
    quat = np.stack([np.cos(yaw / 2), np.zeros_like(t), np.zeros_like(t), np.sin(yaw / 2)], axis=1)
    np.testing.assert_allclose(yaw_rate_from_quat(quat, t), 0.7, atol=1e-9)


def _about_x(angle: float) -> np.ndarray:
    return np.array([math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0])


def test_fall_detection_height_tilt_and_runtime_fault():
    assert not detect_fall(record(), A1, CONFIG).fell
    z = np.full(len(T), 0.27)
    z[30:] = 0.5 * 0.27 - 0.001
    fall = detect_fall(record(base_z=z), A1, CONFIG)
    assert fall.fell and fall.t_s == pytest.approx(3.0) and "base height" in fall.cause

    quat = np.tile([1.0, 0.0, 0.0, 0.0], (len(T), 1))
    quat[20:] = _about_x(0.85)
    assert tilt(quat[20:21])[0] == pytest.approx(0.85)
    fall = detect_fall(record(quat=quat), A1, CONFIG)
    assert fall.fell and fall.t_s == pytest.approx(2.0) and "tilt" in fall.cause
    quat[20:] = _about_x(0.75)  # inside the limit
    assert not detect_fall(record(quat=quat), A1, CONFIG).fell

    mode = ["ramp"] * 10 + ["running"] * 15 + ["damping"] * 15
    diag = {"safety": {"steps": 40}, "fault": ["[FAULT] tilt: base tilt 1.02 rad"]}
    fall = detect_fall(record(mode=mode, diagnostics=diag, base_z=z), A1, CONFIG)
    assert fall.fell and fall.t_s == pytest.approx(2.5) and "runtime faulted: [FAULT] tilt" in fall.cause  # earliest


def test_a_low_base_before_the_policy_has_stood_the_robot_up_is_not_a_fall():
    """The robot powers up passive and the ramp holds it at the spec's gains: it may lie low until the policy has
    had ``settle_s`` to stand it up (ticks 10–14 here). A tilt counts from the first tick."""
    low = 0.5 * 0.27 - 0.05
    z = np.full(len(T), 0.27)
    z[2:15] = low  # sinks in the ramp, stood up within settle_s of the take-over (1.0 s + 0.5 s)
    assert not detect_fall(record(base_z=z), A1, CONFIG).fell
    z[15] = low  # still down once the policy has had its time
    fall = detect_fall(record(base_z=z), A1, CONFIG)
    assert fall.fell and fall.t_s == pytest.approx(1.5) and "base height" in fall.cause
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (len(T), 1))
    quat[5:] = _about_x(0.85)  # tipped over in the ramp
    fall = detect_fall(record(quat=quat), A1, CONFIG)
    assert fall.fell and fall.t_s == pytest.approx(0.5) and "tilt" in fall.cause
    # a run where no policy ever takes over: the height counts from the first tick
    fall = detect_fall(record(base_z=z, mode=["ramp"] * 40), A1, CONFIG)
    assert fall.fell and fall.t_s == pytest.approx(0.2)


def test_a_fixed_base_arm_never_falls_by_height_but_does_by_fault():
    panda = load_robot("panda")
    assert not detect_fall(record(base_z=0.0), panda, CONFIG).fell
    mode = ["ramp"] * 10 + ["running"] * 5 + ["damping"] * 25
    assert detect_fall(record(base_z=0.0, mode=mode), panda, CONFIG).fell


def test_a_fall_fails_the_gate_and_stops_scoring():
    z = np.full(len(T), 0.27)
    z[30:] = 0.05
    score = score_run(run_of(record(vx=known_vx(), base_z=z)), SCENARIO, A1, CONFIG)
    assert check(score, "falls").value == 1.0 and not check(score, "falls").passed
    assert score.tracking["vx"].samples == 10  # ticks 15–19 and 25–29 only
    assert not score.passed


@pytest.mark.parametrize(("count", "passes"), [(0, True), (2, True), (3, False)])
def test_intervention_rate_threshold(count, passes):
    diag = {"safety": {"steps": 40, "interventions": {"rate_limit": count}, "faults": {}}}
    config = dataclasses.replace(CONFIG, max_intervention_rate=0.05)  # 2 / 40 = 0.05: at the limit passes
    score = score_run(run_of(record(vx=known_vx(), diagnostics=diag)), SCENARIO, A1, config)
    c = check(score, "safety interventions per tick")
    assert c.value == pytest.approx(count / 40) and c.passed is passes
    assert score.interventions == {"rate_limit": count}


def test_step_timing_counts_running_ticks_only():
    compute = np.full(len(T), 0.5e-3)
    compute[:10] = 1.0  # a slow ramp tick (e.g. the first onnxruntime call) is not the policy's cost
    compute[-1] = 16e-3
    score = score_run(run_of(record(vx=known_vx()), compute_s=compute), SCENARIO, A1, CONFIG)
    assert score.timing.step_p50_ms == pytest.approx(0.5) and score.timing.step_max_ms == pytest.approx(16.0)
    c = check(score, "runtime.step p99")
    assert c.limit == pytest.approx(0.5 * 20.0) and c.value > c.limit and not c.passed  # p99 touches the 16 ms


def test_a_runtime_without_policy_is_scored_against_the_script():
    rec = record(vx=known_vx(), command=np.zeros((len(T), 0)))  # DeployRuntime without a controller
    cmd = commanded(rec, SCENARIO)
    assert cmd[19, 0] == 0.0 and cmd[20, 0] == 0.5 and cmd[0, 0] == 0.0
    assert score_run(run_of(rec), SCENARIO, A1, CONFIG).tracking["vx"].mean == pytest.approx(0.1075)


def test_reach_errors_per_target():
    task = make_task("panda-reach")
    scenario = reach_scenario(task.commands, lead_in_s=1.0, time_scale=1.0 / 3.0)  # 4 targets × 1 s
    t = np.round(np.arange(50) * DT, 10)
    rec = record()
    rec.t, rec.mode = t, ["ramp"] * 10 + ["running"] * 40
    rec.command = commanded(dataclasses.replace(rec, command=np.zeros((50, 0))), scenario)
    tip = rec.command.copy()
    tip[:, 0] += 0.04  # 4 cm off everywhere …
    tip[19, 0] -= 0.03  # … except 1 cm at the end of target 1
    errors = reach_errors(tip, rec, scenario, scored_mask(t, rec.mode, np.array([1.0, 2.0, 3.0, 4.0]), 0.5))
    assert [e.label for e in errors] == ["target 1", "target 2", "target 3", "target 4"]
    assert errors[0].final_m == pytest.approx(0.01) and errors[1].final_m == pytest.approx(0.04)
    assert errors[0].samples == 5 and errors[0].mean_m == pytest.approx((4 * 0.04 + 0.01) / 5)


def test_verdict_needs_every_simulator_to_pass_every_check():
    ok = SimScore("mujoco", checks=(Check("a", 0.1, 0.2), Check("b", 0.2, 0.2)))
    bad = SimScore("pybullet", checks=(Check("a", 0.3, 0.2),))
    unmeasured = SimScore("pybullet", checks=(Check("a", math.nan, 0.2),))
    crashed = SimScore("pybullet", error="RuntimeError: boom")
    assert verdict([ok]) and verdict([ok, ok])
    assert not verdict([ok, bad]) and not verdict([ok, unmeasured]) and not verdict([ok, crashed])
    assert not verdict([]) and not verdict([SimScore("mujoco")])  # nothing checked is no pass


def test_pushes_outside_the_script_are_refused():
    with pytest.raises(ValueError, match="push at 9"):
        Scenario("bad", "velocity_tracking", NAMES, SCENARIO.segments, (Push(9.0, (1.0, 0.0, 0.0)),), 1.0)
