"""A calibrated start end to end: the shipped A1 policy logged on a shifted MuJoCo A1 through the runtime, the
training sim fitted to that log, a (tiny) PPO residual trained in the fitted sim, and the robot-side learner
started from it; the counts, the artifacts and the refusals."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from robot_rl.learn.residual.calibrated import CalibratedStartCfg
from robot_rl.learn.residual.calibration import CalibrationCfg
from robot_rl.learn.residual.config import ReplayCfg, ResidualCfg, SACCfg
from robot_rl.learn.residual.finetune import run_finetune
from robot_rl.learn.residual.learner import read_checkpoint
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.learn.residual.sim_ppo import SimResidualCfg
from robot_rl.typed_yaml import ConfigError

A1 = "policies/a1_flat/policy.onnx"
SMALL = CalibratedStartCfg(log_ticks=300, calibration=CalibrationCfg(windows=32, grid_points=4, sweeps=1,
                                                                     horizon_ticks=3),
                           sim=SimResidualCfg(iterations=2, num_envs=8, steps_per_env=6, nthread=1))


@pytest.mark.timeout(240)
def test_a_calibrated_start_fits_the_sim_trains_there_and_starts_the_robot_run(tmp_path):
    shift = RealityShift(kp_scale=0.7, payload_kg=4.0, latency_steps=2, friction_scale=0.3)
    report = run_finetune(A1, "a1", "sim", transitions=700, shift=shift, run_dir=tmp_path / "run",
                          sac=SACCfg(warmup_transitions=100, utd_ratio=0.5, actor_warmup_updates=50),
                          replay=ReplayCfg(), residual=ResidualCfg(), eval_every=0, eval_episodes=1,
                          episode_length_s=3.0, calibrated=SMALL, log=False)
    start = report.calibrated
    assert start["log_transitions"] >= 300
    # The log's ticks count against the budget: the robot run adds only the rest.
    assert report.transitions >= 700 and report.transitions - start["log_transitions"] < 700
    assert start["calibration"]["shift"]["latency_steps"] == 2
    assert start["calibration"]["shift"]["kp_scale"] == pytest.approx(0.7, abs=0.01)
    out = tmp_path / "run" / "calibrated"
    saved = json.loads((out / "calibration.json").read_text())
    assert saved["robot_ticks"] == start["log_transitions"] and saved["sim"]["transitions"] == 2 * 8 * 6
    assert (out / "log.npz").is_file()

    # The robot run's learner started from the sim residual's actor, with fresh critics.
    init = read_checkpoint(out / "sim_residual")
    assert init["received"] == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["learner"]["init_from"] == str(out / "sim_residual")
    assert report.learner["received"] == report.transitions - start["log_transitions"]

    # The sim residual alone is a deployable policy with the base's contract.
    from robot_rl.control.runtime import DeployRuntime

    runtime = DeployRuntime.load("a1", out / "policy_sim_residual.onnx")
    assert runtime.controller is not None
    assert report.exported is not None and report.exported.is_file()
    assert np.isfinite(report.evaluations[-1]["return"])


def test_a_calibrated_start_refuses_what_it_cannot_do(tmp_path):
    for kwargs, match in ((dict(resume=str(tmp_path)), "not with --resume"),
                          (dict(residual=ResidualCfg(history=2)), "without history")):
        with pytest.raises(ConfigError, match=match):
            run_finetune(A1, "a1", "sim", transitions=10, run_dir=tmp_path / "x", calibrated=SMALL, log=False,
                         **kwargs)


@pytest.mark.timeout(240)
def test_a_calibrated_start_on_a_push_task_logs_with_the_cube_and_trains_in_the_push_sim(tmp_path, push_base):
    """panda-push: the log's episodes reset the cube to their layouts, the arm's motors are fitted from its
    torques, and the sim residual trains in the vectorized env with the table and cube."""
    shift = RealityShift(kp_scale=0.5, latency_steps=1)
    report = run_finetune(str(push_base), "panda", "sim", transitions=400, shift=shift, run_dir=tmp_path / "run",
                          sac=SACCfg(warmup_transitions=50, utd_ratio=0.5, actor_warmup_updates=20),
                          replay=ReplayCfg(), residual=ResidualCfg(), eval_every=0, eval_episodes=1,
                          episode_length_s=2.0, calibrated=dataclasses.replace(SMALL, chain="calibrated"), log=False)
    fit = report.calibrated["calibration"]["shift"]
    assert report.calibrated["sim"]["chain"] == "calibrated"  # the chain told the fitted motors from here on
    assert fit["latency_steps"] == 1 and fit["kp_scale"] == pytest.approx(0.5, abs=0.02)
    assert report.calibrated["sim"]["transitions"] == 2 * 8 * 6
    assert (tmp_path / "run" / "calibrated" / "policy_sim_residual.onnx").is_file()
    assert report.evaluations and "success" in report.evaluations[-1]


def test_bad_calibration_flags_get_one_line_errors(capsys):
    from robot_rl.cli import main

    assert main(["finetune", "--policy", A1, "--robot", "a1", "--calibrate", "--calibration-ticks", "10"]) == 2
    err = capsys.readouterr().err
    assert "log_ticks must be ≥ 200" in err and "Traceback" not in err
    assert main(["finetune", "--policy", A1, "--robot", "a1", "--calibrate", "--sim-iterations", "-1"]) == 2
    assert "sim residual" in capsys.readouterr().err


def test_calibrate_fills_in_the_measured_settings_and_keeps_what_is_given(monkeypatch):
    """``--calibrate`` defaults to the bound and the robot-side learner measured for a calibrated start; a flag
    given on the command line wins; without ``--calibrate`` the plain defaults hold."""
    from robot_rl.learn.residual import finetune_command

    seen = {}

    def fake_run(policy, robot, interface, **kwargs):
        seen.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(finetune_command, "run_finetune", fake_run)
    with pytest.raises(SystemExit):
        finetune_command.finetune(A1, calibrate=True, anchor_penalty=0.5)
    assert seen["residual"].fraction == 0.2 and seen["sac"].actor_lr == 3e-4
    assert seen["sac"].actor_warmup_updates == 2000 and seen["sac"].anchor_penalty == 0.5
    assert seen["calibrated"] is not None
    with pytest.raises(SystemExit):
        finetune_command.finetune(A1)
    assert seen["residual"].fraction == 0.1 and seen["sac"].anchor_penalty == 0.0 and seen["calibrated"] is None
    assert seen["sac"].actor_lr == 1e-3  # the A1 task's measured rate from scratch


def test_the_sim_residual_settings_come_from_the_task_unless_given():
    from robot_rl.learn.residual.calibrated import sim_residual_cfg
    from robot_rl.tasks.registry import make_task

    push = sim_residual_cfg(make_task("panda-push"), seed=3)
    assert (push.start, push.iterations, push.seed) == ("actuators", 0, 3)
    walk = sim_residual_cfg(make_task("a1-flat"))
    assert (walk.start, walk.iterations) == (SimResidualCfg.start, SimResidualCfg.iterations)
    given = sim_residual_cfg(make_task("panda-push"), iterations=50, start=None)
    assert (given.start, given.iterations) == ("actuators", 50)
