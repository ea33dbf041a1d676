"""A calibrated start end to end: the shipped A1 policy logged on a shifted MuJoCo A1 through the runtime, the
training sim fitted to that log, a (tiny) PPO residual trained in the fitted sim, and the robot-side learner
started from it; the counts, the artifacts and the refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.learn.residual.calibrated import CalibratedStartCfg
from robot_rl.learn.residual.calibration import CalibrationCfg
from robot_rl.learn.residual.config import ReplayCfg, ResidualCfg, SACCfg
from robot_rl.learn.residual.finetune import run_finetune
from robot_rl.learn.residual.learner import read_checkpoint
from robot_rl.learn.residual.settings import PRESETS, FinetuneCfg
from robot_rl.learn.residual.shifted_sim import RealityShift
from robot_rl.learn.residual.sim_ppo import SimResidualCfg
from robot_rl.tasks.registry import make_task

A1 = "policies/a1_flat/policy.onnx"
SMALL = CalibratedStartCfg(log_ticks=300, calibration=CalibrationCfg(windows=32, grid_points=4, sweeps=1,
                                                                     horizon_ticks=3),
                           sim=SimResidualCfg(iterations=2, num_envs=8, steps_per_env=6, nthread=1))


@pytest.mark.timeout(240)
def test_a_calibrated_start_fits_the_sim_trains_there_and_starts_the_robot_run(tmp_path):
    shift = RealityShift(kp_scale=0.7, payload_kg=4.0, latency_steps=2, friction_scale=0.3)
    report = run_finetune(FinetuneCfg.of(A1, "a1", "sim", transitions=700, shift=shift, run_dir=tmp_path / "run",
                                         sac=SACCfg(warmup_transitions=100, utd_ratio=0.5, actor_warmup_updates=50),
                                         replay=ReplayCfg(), residual=ResidualCfg(), eval_every=0, eval_episodes=1,
                                         calibrated=SMALL), episode_length_s=3.0, log=False)
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
    with pytest.raises(ValueError, match="not with resume or init_from"):
        FinetuneCfg.of(A1, "a1", "sim", transitions=10, run_dir=tmp_path / "x", calibrated=SMALL, resume=str(tmp_path))
    with pytest.raises(ValueError, match="needs a calibrated start"):
        FinetuneCfg.of(A1, "a1", "sim", calibrate_chain=True)


@pytest.mark.timeout(240)
def test_a_calibrated_start_on_a_push_task_logs_with_the_cube_and_trains_in_the_push_sim(tmp_path, push_base):
    """panda-push: the log's episodes reset the cube to their layouts, the arm's motors are fitted from its
    torques, and the sim residual trains in the vectorized env with the table and cube."""
    shift = RealityShift(kp_scale=0.5, latency_steps=1)
    report = run_finetune(FinetuneCfg.of(str(push_base), "panda", "sim", transitions=400, shift=shift,
                                         run_dir=tmp_path / "run",
                                         sac=SACCfg(warmup_transitions=50, utd_ratio=0.5, actor_warmup_updates=20),
                                         replay=ReplayCfg(), residual=ResidualCfg(), eval_every=0, eval_episodes=1,
                                         calibrated=SMALL, calibrate_chain=True), episode_length_s=2.0, log=False)
    fit = report.calibrated["calibration"]["shift"]
    assert report.calibrated["sim"]["chain"] == "calibrated"  # the chain told the fitted motors from here on
    assert fit["latency_steps"] == 1 and fit["kp_scale"] == pytest.approx(0.5, abs=0.02)
    assert report.calibrated["sim"]["transitions"] == 2 * 8 * 6
    assert (tmp_path / "run" / "calibrated" / "policy_sim_residual.onnx").is_file()
    assert report.evaluations and "success" in report.evaluations[-1]


def test_calibrate_chain_without_a_calibrated_start_gets_a_one_line_error(capsys):
    from robot_rl.cli import main

    assert main(["finetune", "--policy", A1, "--robot", "a1", "--calibrate-chain"]) == 2
    err = capsys.readouterr().err
    assert "needs a calibrated start" in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_calibrated_preset_holds_the_measured_settings_and_a_flag_given_wins(monkeypatch):
    """``robot-rl finetune calibrated`` starts from the bound and the robot-side learner measured for a calibrated
    start; a flag given on the command line wins; the scratch preset (no preset word) keeps the plain defaults,
    with the task's measured learning rate filled in by the run."""
    from robot_rl.learn.residual import finetune_command

    seen = {}

    def fake_run(cfg):
        seen["cfg"] = cfg
        raise SystemExit(0)

    monkeypatch.setattr(finetune_command, "run_finetune", fake_run)
    with pytest.raises(SystemExit):
        finetune_command.finetune(["calibrated", "--policy", A1, "--anchor-penalty", "0.5", "--calibrate-chain"])
    cfg = seen["cfg"]
    assert cfg.residual.fraction == 0.2 and cfg.sac.lr == 3e-4
    assert cfg.sac.actor_warmup_updates == 2000 and cfg.sac.anchor_penalty == 0.5
    assert cfg.calibrated == CalibratedStartCfg() and cfg.calibrate_chain
    resolved = cfg.for_task(make_task("a1-flat"))
    assert resolved.sac.lr == 3e-4 and resolved.calibrated.chain == "calibrated"
    assert resolved.calibrated.sim == SimResidualCfg()  # the A1's sim residual: SimResidualCfg's own settings
    with pytest.raises(SystemExit):
        finetune_command.finetune(["--policy", A1])
    cfg = seen["cfg"]
    assert cfg.residual.fraction == 0.1 and cfg.sac.anchor_penalty == 0.0 and cfg.calibrated is None
    assert cfg.sac.actor_warmup_updates == 0 and cfg.sac.lr is None
    assert cfg.for_task(make_task("a1-flat")).sac.lr == 1e-3  # the A1 task's measured rate from scratch
    assert cfg.for_task(make_task("panda-reach")).sac.lr == 3e-4  # no measured rate: SAC's


def test_the_sim_residual_settings_come_from_the_task_unless_given():
    from robot_rl.learn.residual.calibrated import sim_residual_cfg

    push = sim_residual_cfg(make_task("panda-push"), seed=3)
    assert (push.start, push.iterations, push.seed) == ("actuators", 0, 3)
    walk = sim_residual_cfg(make_task("a1-flat"))
    assert (walk.start, walk.iterations) == (SimResidualCfg.start, SimResidualCfg.iterations)
    given = sim_residual_cfg(make_task("panda-push"), iterations=50, start=None)
    assert (given.start, given.iterations) == ("actuators", 50)
    preset = PRESETS["calibrated"][0].for_task(make_task("panda-push"))  # a calibrated push run, seed 0
    assert (preset.calibrated.sim.start, preset.calibrated.sim.iterations) == ("actuators", 0)
