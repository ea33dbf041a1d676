"""Real-to-sim calibration: the actuator fit on synthetic torques, and the whole fit on logs of a real shifted
MuJoCo robot (the ``ShiftedSimRobot`` the benchmarks call "real"), driven through the deploy runtime."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.learn.residual.calibration import (
    CalibrationCfg,
    CalibrationLog,
    CalibrationRecorder,
    WindowPredictor,
    calibrate,
    fit_actuators,
)
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.robots.spec import load_robot

SMALL = CalibrationCfg(windows=48, grid_points=5, sweeps=2, horizon_ticks=4)


def _synthetic_log(spec, kp_scale: float, kd_scale: float, latency: int, ticks: int = 400, seed: int = 0):
    """Commands and states drawn at random, torques made by the PD law the motors run, the command ``latency``
    ticks late: what the actuator fit must invert (no simulation involved)."""
    rng = np.random.default_rng(seed)
    j = spec.num_joints
    mid = (spec.position_lower + spec.position_upper) / 2
    arrays = {"q": mid + rng.uniform(-0.3, 0.3, (ticks, j)), "dq": rng.normal(0, 2, (ticks, j)),
              "q_target": mid + rng.uniform(-0.3, 0.3, (ticks, j)), "dq_target": np.zeros((ticks, j)),
              "kp": np.tile(spec.kp, (ticks, 1)), "kd": np.tile(spec.kd, (ticks, 1)), "tau_ff": np.zeros((ticks, j)),
              "base_quat": np.tile([1.0, 0, 0, 0], (ticks, 1)), "base_ang_vel": np.zeros((ticks, 3)),
              "base_lin_vel": np.zeros((ticks, 3)), "base_pos": np.zeros((ticks, 3))}
    tau = np.zeros((ticks, j))
    for t in range(1 + latency, ticks):
        c = t - 1 - latency
        tau[t] = (kp_scale * arrays["kp"][c] * (arrays["q_target"][c] - arrays["q"][t])
                  - kd_scale * arrays["kd"][c] * arrays["dq"][t])
    effort = np.array([js.effort_limit for js in spec.joints])
    arrays["tau"] = np.clip(tau, -effort, effort)  # the motor saturates: those samples must be left out
    return CalibrationLog(arrays, np.zeros(ticks, int), spec.timing.policy_period_s, spec.name)


@pytest.mark.parametrize(("kp", "kd", "latency"), [(0.7, 1.0, 2), (1.2, 0.5, 0), (0.5, 1.5, 1)])
def test_the_actuator_fit_recovers_gains_and_latency_from_torques(kp, kd, latency):
    spec = load_robot("a1")
    fits = fit_actuators(_synthetic_log(spec, kp, kd, latency), spec, max_latency=3)
    best = min(fits, key=lambda k: fits[k]["relative_residual"])
    assert best == latency
    assert fits[best]["kp_scale"] == pytest.approx(kp, rel=1e-6)
    assert fits[best]["kd_scale"] == pytest.approx(kd, rel=1e-6)
    assert fits[best]["relative_residual"] < 1e-6
    assert all(fits[k]["relative_residual"] > 0.05 for k in fits if k != latency)


def test_the_actuator_fit_holds_with_noisy_biased_torque_estimates():
    """Motor-current torque estimates are noisy and biased (friction, a current offset): 1 N·m of noise and a 0.3
    N·m bias per joint still give the gains within a few percent and the right latency."""
    spec = load_robot("a1")
    log = _synthetic_log(spec, 0.7, 1.0, 2, ticks=2000)
    rng = np.random.default_rng(1)
    log.arrays["tau"] += rng.normal(0.0, 1.0, log.arrays["tau"].shape) + 0.3
    fits = fit_actuators(log, spec, max_latency=3)
    best = min(fits, key=lambda k: fits[k]["relative_residual"])
    assert best == 2
    assert fits[best]["kp_scale"] == pytest.approx(0.7, rel=0.03)
    assert fits[best]["kd_scale"] == pytest.approx(1.0, rel=0.05)


def test_a_log_without_torques_gives_no_actuator_fit():
    spec = load_robot("a1")
    log = _synthetic_log(spec, 1.0, 1.0, 0)
    log.arrays["tau"][:] = 0.0
    assert fit_actuators(log, spec, max_latency=2) == {}


def _robot_log(shift: RealityShift, robot_name: str, task_name: str, policy_path: str, episodes: int,
               length_s: float) -> CalibrationLog:
    """The base policy alone on the shifted MuJoCo robot through the deploy runtime, every tick logged."""
    from robot_rl.control.controller import PolicyController
    from robot_rl.control.runtime import DeployRuntime
    from robot_rl.learn.residual.actor import ResidualPolicy
    from robot_rl.learn.residual.config import ResidualCfg
    from robot_rl.learn.residual.episodes import EpisodeCfg, EpisodeLoop
    from robot_rl.learn.residual.evaluation import eval_commands
    from robot_rl.learn.residual.rewards import StateReward
    from robot_rl.learn.residual.shifted_sim import ShiftedSimRobot
    from robot_rl.policy.onnx_policy import load_policy, read_contract
    from robot_rl.tasks.registry import make_task

    spec, task = load_robot(robot_name), make_task(task_name)
    alone = ResidualPolicy(load_policy(policy_path, read_contract(policy_path)), ResidualCfg())
    alone.enabled = False
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, alone))
    robot = ShiftedSimRobot(spec, shift)
    recorder = CalibrationRecorder(spec)
    loop = EpisodeLoop(runtime, robot, alone, StateReward(task, spec), EpisodeCfg(length_s=length_s), realtime=False,
                       recorder=recorder)
    robot.connect()
    try:
        for command in eval_commands(task, episodes, seed=4242):
            loop.run_episode(command, explore=False, learn=False)
    finally:
        robot.close()
    return recorder.log()


@pytest.fixture(scope="module")
def a1_shifted_log():
    shift = RealityShift(kp_scale=0.7, payload_kg=4.0, latency_steps=2, friction_scale=0.3)
    return shift, _robot_log(shift, "a1", "a1-flat", "policies/a1_flat/policy.onnx", episodes=2, length_s=6.0)


def test_calibration_recovers_the_shift_of_a_real_shifted_a1(a1_shifted_log):
    """The shipped A1 policy on an A1 with weak motors, a payload, latency and slippery ground: the fit finds
    the gains and latency exactly (torques), the payload within a kilogram, and the calibrated training sim
    predicts the log far better than the nominal one. The friction is left unchecked: the training world's
    pyramidal friction cone is not the robot's elliptic one, so its best friction need not equal the shift's."""
    shift, log = a1_shifted_log
    segments = np.unique(log.segment)
    assert len(segments) == 2  # one per episode: a window never spans a reset
    result = calibrate(log, load_robot("a1"), SMALL)
    fitted = result.shift
    assert fitted.latency_steps == shift.latency_steps
    assert fitted.kp_scale == pytest.approx(shift.kp_scale, abs=0.01)
    assert fitted.kd_scale == pytest.approx(shift.kd_scale, abs=0.02)
    assert fitted.payload_kg == pytest.approx(shift.payload_kg, abs=1.0)
    assert result.error_calibrated < 0.2 * result.error_nominal


def test_the_true_shift_predicts_the_log_better_than_without_its_latency_or_the_nominal_sim(a1_shifted_log):
    _, log = a1_shifted_log
    predictor = WindowPredictor(log, load_robot("a1"), SMALL)
    true = RealityShift(kp_scale=0.7, latency_steps=2, payload_kg=4.0, friction_scale=0.3)
    errors = predictor.errors([true, RealityShift(kp_scale=0.7, latency_steps=0, payload_kg=4.0, friction_scale=0.3),
                               RealityShift()])
    assert errors[0] < errors[1] and errors[0] < errors[2]


def test_the_log_round_trips_and_bad_files_get_clear_errors(a1_shifted_log, tmp_path):
    _, log = a1_shifted_log
    path = log.save(tmp_path / "log.npz")
    back = CalibrationLog.load(path)
    assert back.robot == "a1" and len(back) == len(log)
    np.testing.assert_array_equal(back.arrays["tau"], log.arrays["tau"])
    with pytest.raises(ValueError, match="does not exist"):
        CalibrationLog.load(tmp_path / "nope.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable"):
        CalibrationLog.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "partial.npz", q=np.zeros((3, 12)))
    with pytest.raises(ValueError, match="lacks"):
        CalibrationLog.load(tmp_path / "partial.npz")
    with pytest.raises(ValueError, match="robot 'a1', not 'panda'"):
        WindowPredictor(log, load_robot("panda"), SMALL)


def test_a_legged_robot_without_a_state_estimator_gets_its_motors_fitted_and_the_rest_left_nominal(a1_shifted_log):
    """The Unitree low-level state has no base position or velocity: the log holds NaN there, the motors are
    still fitted from the torques, payload and friction stay nominal and the result says so. Without torques
    either, nothing can be fitted: a clear error."""
    from robot_rl.core.types import JointCommand, RobotState

    spec = load_robot("a1")
    recorder = CalibrationRecorder(spec)
    state = RobotState(timestamp=0.0, tick=0, q=spec.default_positions, dq=np.zeros(12), tau=np.zeros(12))
    recorder(state, JointCommand.hold(spec.default_positions, spec.kp, spec.kd))
    assert np.isnan(recorder.log().arrays["base_lin_vel"]).all()
    with pytest.raises(ValueError, match="saw no ticks"):
        CalibrationRecorder(spec).log()

    shift, log = a1_shifted_log
    blind = CalibrationLog({**log.arrays, "base_lin_vel": np.full_like(log.arrays["base_lin_vel"], np.nan),
                            "base_pos": np.full_like(log.arrays["base_pos"], np.nan)}, log.segment, log.period_s,
                           log.robot)
    result = calibrate(blind, spec, SMALL)
    assert (result.shift.kp_scale, result.shift.latency_steps) == (pytest.approx(shift.kp_scale, abs=0.01), 2)
    assert (result.shift.payload_kg, result.shift.friction_scale) == (0.0, 1.0)
    assert "no base position and velocity" in result.notes[0]
    blind.arrays["tau"] = np.zeros_like(log.arrays["tau"])
    with pytest.raises(ValueError, match="nothing to calibrate from"):
        calibrate(blind, spec, SMALL)


def test_a_log_too_short_to_replay_is_refused():
    spec = load_robot("a1")
    log = _synthetic_log(spec, 1.0, 1.0, 0, ticks=6)
    with pytest.raises(ValueError, match="no unbroken stretch"):
        WindowPredictor(log, spec, SMALL)


@pytest.mark.parametrize("bad", [dict(payload_range_kg=(3.0, 1.0)), dict(friction_range=(0.0, 1.0)),
                                 dict(grid_points=1), dict(windows=0)])
def test_bad_calibration_settings_are_refused(bad):
    with pytest.raises(ValueError, match="calibration"):
        CalibrationCfg(**bad)


def test_an_arm_is_calibrated_from_its_joints_alone(panda_base):
    """Panda (fixed base): a payload on the hand and weak motors; the fit compares joints only and leaves the
    friction alone."""
    shift = RealityShift(kp_scale=0.5, payload_kg=2.0, latency_steps=1)
    log = _robot_log(shift, "panda", "panda-reach", str(panda_base), episodes=2, length_s=3.0)
    result = calibrate(log, load_robot("panda"), SMALL)
    assert result.shift.latency_steps == 1
    assert result.shift.kp_scale == pytest.approx(0.5, abs=0.02)
    assert result.shift.friction_scale == 1.0
    assert result.error_calibrated < result.error_nominal


def test_the_calibrate_command_fits_a_saved_log_and_names_a_bad_one(a1_shifted_log, tmp_path, capsys):
    from robot_rl.cli import main

    _, log = a1_shifted_log
    path = log.save(tmp_path / "log.npz")
    assert main(["calibrate", "--log", str(path), "--windows", "32", "--out", str(tmp_path / "fit.json")]) == 0
    printed = capsys.readouterr().out
    assert "latency 2 policy steps" in printed and "kp ×0.7" in printed
    assert (tmp_path / "fit.json").is_file()
    assert main(["calibrate", "--log", str(tmp_path / "missing.npz")]) == 2
    err = capsys.readouterr().err
    assert "missing.npz does not exist" in err and "Traceback" not in err
