"""A calibrated start for fine-tuning: the robot's log → a calibrated sim → the residual trained there → the robot.

    robot (base alone, ``log_ticks``) ──► CalibrationLog ──► calibrate() ──► RealityShift (the calibrated sim)
                                                                                  │
    robot run (SAC, off-policy) ◄── init checkpoint ◄── residual by PPO in the calibrated vectorized sim
                                                        (push tasks: the calibrated actuators' inverse, fitted there)

Every transition the robot gives is counted, the log's included; the simulator's are free. The robot run that
follows is the usual one (:func:`~robot_rl.learn.residual.finetune.run_finetune`), started from the sim
residual through ``init_from``: its actor is the PPO residual, its critics start fresh, and with
``SACCfg.actor_warmup_updates`` they fit the robot's first transitions before the actor moves.

Artifacts in ``RUN_DIR/calibrated/``: ``log.npz`` (the robot's log), ``calibration.json`` (the fitted shift
and how well each candidate predicted the log), ``sim_residual/checkpoint.pt`` (the learner's start) and
``policy_sim_residual.onnx`` (base + sim residual as one policy, deployable as is), ``sim_residual_tb/``
(TensorBoard: the sim residual's PPO training).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from robot_rl.learn.residual.calibration import CalibrationCfg, CalibrationRecorder, calibrate
from robot_rl.learn.residual.config import LearnerCfg, ResidualCfg, deferred
from robot_rl.learn.residual.sim_ppo import SimResidualCfg, train_sim_residual
from robot_rl.robots.spec import RobotSpec

# The sim residual where a task's measurements differ from SimResidualCfg's (PPO from the base alone), by objective.
# Push (panda-push, BC base): the calibrated actuators' inverse fitted by regression, and no PPO after it. PPO from
# the base alone had not moved the return in 300 iterations; from the fitted start, even after 30 critic-only
# iterations at 3e-4, it drifted away from it (success 0.43 → 0.05 on the robot): with a reward that barely answers a
# change of the residual until a push succeeds or fails seconds later, its normalized advantages are mostly noise.
SIM_RESIDUAL_BY_OBJECTIVE = {"push": {"start": "actuators", "iterations": 0}}


def sim_residual_cfg(task, seed: int = 0, **given) -> SimResidualCfg:
    """The sim residual's settings for ``task``: ``given`` (None: not given) over the task's measured defaults
    (:data:`SIM_RESIDUAL_BY_OBJECTIVE`) over :class:`SimResidualCfg`'s."""
    settings = {**SIM_RESIDUAL_BY_OBJECTIVE.get(task.objective, {}),
                **{k: v for k, v in given.items() if v is not None}}
    return SimResidualCfg(seed=seed, **settings)


@dataclass(frozen=True)
class CalibratedStartCfg:
    log_ticks: int = 3000  # policy ticks of the base alone logged on the robot (≈ 60 s at 50 Hz); counted
    calibration: CalibrationCfg = field(default_factory=CalibrationCfg)
    sim: SimResidualCfg | None = None  # None: the task's measured one (sim_residual_cfg), seeded with the run's seed
    # "calibrated": the safety chain's torque limit is told the fitted motor gains (shifted_sim.
    # with_measured_actuators) for the sim residual and the robot run after it; "spec": it keeps the robot file's.
    # Opt-in: it changes a safety limit's model of the robot, which a person should decide (and then write into
    # the robot's file for deployment).
    chain: Literal["spec", "calibrated"] = "spec"

    def __post_init__(self) -> None:
        if deferred():
            return
        if self.log_ticks < 200:
            raise ValueError(f"calibration log_ticks must be ≥ 200 (4 s at 50 Hz), got {self.log_ticks}")
        if self.chain not in ("spec", "calibrated"):
            raise ValueError(f"calibrated start: chain must be 'spec' or 'calibrated', got {self.chain!r}")


@dataclass
class CalibratedStart:
    init_from: Path  # a learner checkpoint: the sim residual's actor, fresh critics
    transitions: int  # policy ticks the log took on the robot
    calibration: dict  # CalibrationResult.to_json()
    sim: dict  # the sim residual's training: transitions, wall time, last iterations
    exported: Path  # base + sim residual as one ONNX policy
    wall_s: float
    spec: RobotSpec  # the robot spec the run continues with (its chain told the fitted motors, if asked)

    def summary(self) -> dict:
        return {"log_transitions": self.transitions, "calibration": self.calibration, "sim": self.sim,
                "exported": str(self.exported), "wall_s": self.wall_s}


def record_log(loop, task, ticks: int, rng: np.random.Generator, recorder: CalibrationRecorder) -> int:
    """Episodes of the base alone (``loop``'s residual disabled) until ``ticks`` policy ticks are logged, commands
    from the task's sampler; returns the policy ticks run (the transitions the log cost)."""
    from robot_rl.learn.residual.scenes import sample_setups

    policy = loop.policy
    enabled, policy.enabled = policy.enabled, False
    loop.recorder = recorder
    done = 0
    try:
        while done < ticks:
            setup = sample_setups(task, rng, 1)[0]
            done += loop.run_episode(setup.command, explore=False, learn=False, scene=setup.scene).ticks
    finally:
        loop.recorder = None
        policy.enabled = enabled
    return done


def write_init_checkpoint(flat: np.ndarray, learner: LearnerCfg, path: Path) -> Path:
    """A learner checkpoint whose actor is ``flat`` (critics and temperature fresh), for ``init_from``."""
    from robot_rl.learn.residual.learner import save_checkpoint
    from robot_rl.learn.residual.sac import SAC

    sac = SAC(learner.sac, learner.state_dim, learner.action_dim, learner.residual.hidden, seed=learner.seed)
    sac.actor.load_flat(flat)
    path.mkdir(parents=True, exist_ok=True)
    save_checkpoint(path / "checkpoint.pt", learner, sac, received=0)
    return path


def calibrated_start(policy: str | Path, task, spec, base, episode, learner: LearnerCfg, cfg: CalibratedStartCfg,
                     run_dir: Path, seed: int, make_robot: Callable[[], object], *, realtime: bool,
                     log: Callable[[str], None] = print) -> CalibratedStart:
    """Log the robot (``make_robot()``: connected here, closed after), calibrate, train the residual in the
    calibrated sim; see the module docstring. ``episode``: the run's ``EpisodeCfg``."""
    from robot_rl.control.controller import PolicyController
    from robot_rl.control.runtime import DeployRuntime
    from robot_rl.learn.residual.actor import ResidualPolicy
    from robot_rl.learn.residual.episodes import EpisodeLoop
    from robot_rl.learn.residual.export import export_residual
    from robot_rl.learn.residual.rewards import StateReward

    started = time.monotonic()
    cfg = cfg if cfg.sim is not None else dataclasses.replace(cfg, sim=sim_residual_cfg(task, seed))
    out = run_dir / "calibrated"
    out.mkdir(parents=True, exist_ok=True)
    residual: ResidualCfg = learner.residual
    alone = ResidualPolicy(base, residual)
    runtime = DeployRuntime(spec, PolicyController.for_task(task, spec, alone))
    robot = make_robot()
    loop = EpisodeLoop(runtime, robot, alone, StateReward(task, spec), episode, realtime=realtime)
    recorder = CalibrationRecorder(spec)
    robot.connect()
    try:
        ticks = record_log(loop, task, cfg.log_ticks, np.random.default_rng(seed + 1000), recorder)
    finally:
        robot.close()
    robot_log = recorder.log()
    robot_log.save(out / "log.npz")
    result = calibrate(robot_log, spec, cfg.calibration)
    log(f"[calibrate] {ticks} policy ticks logged; fitted: {result.shift.describe()} (prediction error "
        f"{result.error_nominal:.3f} uncalibrated → {result.error_calibrated:.3f})")
    for note in result.notes:
        log(f"[calibrate] note: {note}")

    if cfg.sim.start == "actuators":
        log("[calibrate] sim residual: starting from the calibrated actuators' inverse (fitted by regression)")

    def progress(info: dict) -> None:
        if info["iteration"] % 25 == 0 or info["iteration"] == cfg.sim.iterations:
            log(f"[calibrate] sim residual: iteration {info['iteration']}/{cfg.sim.iterations}, mean reward "
                f"{info['mean_reward']:.3f}")

    if cfg.chain == "calibrated":
        from robot_rl.learn.residual.shifted_sim import with_measured_actuators

        spec = with_measured_actuators(spec, result.shift)
        log(f"[calibrate] the safety chain's torque limit now estimates with the fitted motors: kp ×"
            f"{spec.safety.actuator_kp_scale:g}, kd ×{spec.safety.actuator_kd_scale:g} (for deployment, write "
            "safety.actuator_kp_scale / actuator_kd_scale into the robot's file)")
    sim = train_sim_residual(task, base, result.shift, residual, cfg.sim, on_iteration=progress,
                             log_std=learner.sac.init_log_std, log_dir=out / "sim_residual_tb", spec=spec)
    init = write_init_checkpoint(sim.flat, learner, out / "sim_residual")
    exported = export_residual(policy, sim.flat, residual, out / "policy_sim_residual.onnx",
                               notes={"calibrated_shift": result.shift.describe(), "sim_transitions": sim.transitions})
    summary = {"transitions": sim.transitions, "wall_s": sim.wall_s, "last": sim.history[-3:], "start": cfg.sim.start,
               "iterations": cfg.sim.iterations, "start_fit": sim.start_fit, "chain": cfg.chain}
    (out / "calibration.json").write_text(json.dumps({**result.to_json(), "robot_ticks": ticks, "sim": summary},
                                                     indent=2))
    log(f"[calibrate] sim residual: {sim.transitions} sim transitions in {sim.wall_s:.0f} s → {exported}")
    return CalibratedStart(init_from=init, transitions=ticks, calibration=result.to_json(), sim=summary,
                           exported=exported, wall_s=time.monotonic() - started, spec=spec)


def calibrate_command(log: str, robot: str | None = None, out: str | None = None,
                      horizon_ticks: int = CalibrationCfg.horizon_ticks, windows: int = CalibrationCfg.windows) -> int:
    """Fit the training sim to a robot log (a calibrated start's log.npz): gains, latency, payload, friction.

    Args:
        log: the log (.npz) a calibrated start wrote (RUN_DIR/calibrated/log.npz).
        robot: robot spec name (default: the one the log names).
        out: also write the fit here as JSON.
        horizon_ticks: policy periods each replayed window is predicted ahead.
        windows: windows of the log replayed per candidate.
    """
    from robot_rl.learn.residual.calibration import CalibrationLog
    from robot_rl.robots.spec import load_robot
    from robot_rl.typed_yaml import ConfigError

    try:
        robot_log = CalibrationLog.load(log)
        spec = load_robot(robot or robot_log.robot)
        result = calibrate(robot_log, spec, CalibrationCfg(horizon_ticks=horizon_ticks, windows=windows))
    except ValueError as exc:
        raise ConfigError("robot-rl calibrate", log, str(exc)) from None
    print(f"{len(robot_log)} ticks of {robot_log.robot}: {result.shift.describe()}")
    print(f"prediction error (each channel in units of its spread): uncalibrated {result.error_nominal:.3f}, "
          f"calibrated {result.error_calibrated:.3f}")
    for latency, fit in result.actuator_fit.items():
        print(f"  latency {latency}: kp ×{fit['kp_scale']:.3f}, kd ×{fit['kd_scale']:.3f}, torque residual "
              f"{fit['relative_residual']:.3f} of the torques' spread")
    if (result.shift.kp_scale, result.shift.kd_scale) != (1.0, 1.0):
        print(f"the motors deliver kp ×{result.shift.kp_scale:g}, kd ×{result.shift.kd_scale:g} of their commanded "
              f"gains: to give the safety chain's torque limit the real torque, write into the robot's file\n"
              f"  safety:\n    actuator_kp_scale: {result.shift.kp_scale:g}\n"
              f"    actuator_kd_scale: {result.shift.kd_scale:g}")
    if out is not None:
        Path(out).write_text(json.dumps(result.to_json(), indent=2))
        print(f"written: {out}")
    return 0
