"""Training and evaluation loops end to end, at toy sizes."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import robot_rl.learn.train as train_module
from robot_rl.learn.play import PlayArgs, offscreen_backend_problem, play
from robot_rl.learn.ppo import CheckpointError, read_checkpoint_info
from robot_rl.learn.train import TrainArgs, configure_task, train
from robot_rl.sim.randomization import UnknownRandomizationKey
from robot_rl.sim.world import ModelCopiesDoNotFit
from robot_rl.tasks.registry import TASKS, UnknownTaskError, make_task
from robot_rl.typed_yaml import ConfigError

POLICIES = Path(__file__).resolve().parents[2] / "policies"

TINY = dict(num_envs=4, max_iterations=2, num_steps_per_env=8, progress=False, physics_threads=1)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("runs")
    return train(TrainArgs(task="a1-flat", log_dir=log_dir, seed=3, dr=("push_max_vel_m_s=0.5",), **TINY))


def test_training_writes_a_stamped_checkpoint_and_tensorboard_logs(checkpoint):
    assert checkpoint.is_file() and checkpoint.name == "model_1.pt"
    info = read_checkpoint_info(checkpoint)
    assert info["task"] == "a1-flat" and info["seed"] == 3 and info["env_steps"] == 2 * 4 * 8
    assert info["randomization_overrides"] == ["push_max_vel_m_s=0.5"]
    run_dir = checkpoint.parent
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())
    assert (run_dir / "config.json").is_file()
    assert "Learning iteration" in (run_dir / "rsl_rl.log").read_text()  # rsl_rl's report, off the terminal


def test_play_loads_the_checkpoint_and_reports_metrics(checkpoint):
    report = play(PlayArgs(checkpoint=checkpoint, task="a1-flat", num_envs=2, episodes=2, physics_threads=1))
    assert report.episodes >= 2
    assert 0 < report.mean_episode_length_s <= 20.0
    assert "Episode/lin_vel_error_m_s" in report.metrics
    assert 0 <= report.falls <= report.episodes
    assert report.video is None and report.video_skipped


def test_play_can_hold_a_command(checkpoint):
    report = play(PlayArgs(checkpoint=checkpoint, task="a1-flat", num_envs=1, episodes=1, command=(0.5, 0.0, 0.0),
                           physics_threads=1))
    assert report.metrics["Episode/mean_vel_error_m_s"] >= 0
    with pytest.raises(ConfigError, match="takes 3 values, got 2"):
        play(PlayArgs(checkpoint=checkpoint, task="a1-flat", command=(0.5, 0.0)))


def test_resume_continues_from_a_checkpoint(checkpoint, tmp_path):
    final = train(TrainArgs(task="a1-flat", log_dir=tmp_path, resume=checkpoint, **{**TINY, "max_iterations": 1}))
    assert final.name == "model_1.pt"  # rsl_rl continues at the stored iteration
    # The step count carries over, so the resumed checkpoint (and its model card) counts all of training.
    assert read_checkpoint_info(final)["env_steps"] == read_checkpoint_info(checkpoint)["env_steps"] + 4 * 8


def test_the_committed_candidate_resumes_with_its_recipe(tmp_path, monkeypatch):
    """policies/candidates/a1_flat_turn keeps a run's checkpoint where run directories are not kept (a fresh
    machine): it resumes, with the command mix its config.json records, as its README says."""
    candidate = POLICIES / "candidates" / "a1_flat_turn"
    recorded = json.loads((candidate / "config.json").read_text())["task"]["terms"]["commands"]
    assert recorded["turn_fraction"] == 0.15

    def with_turns(name):
        task = make_task(name)
        commands = dataclasses.replace(task.terms.commands, turn_fraction=recorded["turn_fraction"])
        return dataclasses.replace(task, terms=dataclasses.replace(task.terms, commands=commands))

    monkeypatch.setattr(train_module, "make_task", with_turns)
    start = candidate / "model_2999.pt"
    final = train(TrainArgs(task="a1-flat", log_dir=tmp_path, resume=start, **{**TINY, "max_iterations": 1}))
    assert read_checkpoint_info(final)["env_steps"] == read_checkpoint_info(start)["env_steps"] + 4 * 8
    resumed = json.loads((final.parent / "config.json").read_text())["task"]["terms"]["commands"]
    assert resumed == recorded


@pytest.mark.parametrize(("checkpoint", "task"), [
    ("candidates/g1_flat/model_375.pt", "g1-flat"),
    ("candidates/go2_flat/model_6600.pt", "go2-flat"),
    ("candidates/a1_rough/model_8838.pt", "a1-rough"),
    ("candidates/a1_rough_trot/model_3600.pt", "a1-rough-trot"),
    ("candidates/a1_flat_trot/model_5900.pt", "a1-flat-trot"),
])
def test_a_committed_training_checkpoint_still_fits_its_task(checkpoint, task):
    """The lines kept to resume from (a GPU session's G1, the Go2) must stay resumable: --resume accepts them (task
    and robot spec unchanged) and the task's actor observation and action sizes are still the network's."""
    import torch

    from robot_rl.learn.ppo import check_checkpoint
    from robot_rl.robots.spec import load_robot

    path = POLICIES / checkpoint
    cfg = make_task(task)
    spec = load_robot(cfg.robot)
    assert check_checkpoint(path, cfg, spec)["task"] == task
    actor = torch.load(path, weights_only=False, map_location="cpu")["actor_state_dict"]
    joints = len(spec.policy_joint_names)
    assert actor["mlp.0.weight"].shape[1] == cfg.actor_obs.size(joints, cfg.commands.size, joints)
    assert actor["distribution.std_param"].shape == (joints,)


@pytest.mark.parametrize(("checkpoint", "onnx", "task"), [
    ("candidates/a1_flat_turn/model_6050.pt", "a1_flat/policy.onnx", "a1-flat"),
    ("candidates/a1_flat_history/model_7350.pt", "candidates/a1_flat_history/policy.onnx", "a1-flat-history"),
])
def test_a_committed_policy_is_its_committed_checkpoint_exported(tmp_path, checkpoint, onnx, task):
    """policies/a1_flat/policy.onnx is policies/candidates/a1_flat_turn/model_6050.pt exported (the same function of
    the observation), so the shipped policy can be resumed; the history candidate likewise. Compared by output, not
    by the graph's bytes: those depend on the exporter's version."""
    import numpy as np
    import onnxruntime as ort

    from robot_rl.learn.export_checkpoint import export_checkpoint
    from robot_rl.policy.onnx_policy import read_contract

    out = tmp_path / "policy.onnx"
    assert export_checkpoint(str(POLICIES / checkpoint), str(out)) == 0
    committed = POLICIES / onnx
    contract = read_contract(committed)
    assert contract.provenance.task == read_contract(out).provenance.task == task
    obs = np.random.default_rng(0).normal(size=(64, contract.obs_dim)).astype(np.float32)  # the file's own layout

    def actions(path):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return np.concatenate([session.run(None, {session.get_inputs()[0].name: o[None]})[0] for o in obs])

    shipped, exported = actions(committed), actions(out)
    assert np.allclose(shipped, exported, rtol=0, atol=1e-5)
    assert np.abs(shipped).max() > 0.1  # a policy that acts, not a constant


def _exported(tmp_path: Path, candidate: str) -> Path:
    """policies/candidates/<candidate> (a checkpoint) exported to ONNX in ``tmp_path``."""
    from robot_rl.learn.export_checkpoint import export_checkpoint

    out = tmp_path / "policy.onnx"
    assert export_checkpoint(str(POLICIES / "candidates" / candidate), str(out)) == 0
    return out


def test_the_trot_candidate_exported_walks_the_gate_scenario_on_its_own_clock(tmp_path):
    """A quadruped's gait clock end to end: the exported a1-rough-trot checkpoint's contract carries the 2 Hz period,
    and the deploy runtime's clock (counted from the policy's first tick) drives it through the gate's scripted
    run in MuJoCo without a fall and within the gate's tracking limits (the line passed the gate at every
    checkpoint checked from 2400 to 5000)."""
    from robot_rl.evaluation import robustness as rb
    from robot_rl.evaluation.gate_config import GateConfig
    from robot_rl.policy.onnx_policy import read_contract
    from robot_rl.robots.spec import load_robot

    out = _exported(tmp_path, "a1_rough_trot/model_3600.pt")
    assert read_contract(out).observation.gait_period_s == 0.5
    task = make_task("a1-rough-trot")
    nominal = {c.key: c for c in rb.suite_conditions(task, load_robot("a1"))}[
        ("nominal", "gate scenario, random shove directions", "mujoco")]
    outcome = rb.run_condition(str(out), nominal, 0, GateConfig())
    assert outcome.error is None and not outcome.fell and outcome.gate_tracking_passed, outcome


def test_the_flat_trot_candidate_takes_the_side_shove_that_felled_the_flat_trained_trots(tmp_path):
    """The trot line moved to flat ground keeps the rough line's footing: under the suite's 1 m/s shove from 90° while
    walking (stiff MuJoCo), where the trot trained on flat ground from scratch, or resumed with a1-flat's
    orientation penalty, fell in 1 to 8 of 10 runs at 7 of the 9 checkpoints checked, it stays up (0 of 10 in its
    committed suite table)."""
    from robot_rl.evaluation import robustness as rb
    from robot_rl.evaluation.gate_config import GateConfig
    from robot_rl.robots.spec import load_robot

    out = _exported(tmp_path, "a1_flat_trot/model_5900.pt")
    config = GateConfig()
    shove = {c.key: c for c in rb.suite_conditions(make_task("a1-flat-trot"), load_robot("a1"))}[
        ("shove", "1 m/s from 90°, walking", "mujoco")]
    for seed in range(3):
        outcome = rb.run_condition(str(out), shove, seed, config)
        assert outcome.error is None and not outcome.fell, (seed, outcome)
        assert outcome.intervention_rate <= config.max_intervention_rate, (seed, outcome)


def test_a_wall_clock_budget_stops_and_saves(tmp_path):
    final = train(TrainArgs(task="panda-reach", log_dir=tmp_path, max_minutes=0.0, **{**TINY, "max_iterations": 50}))
    assert final.name == "model_0.pt" and final.is_file()  # stopped after the first iteration


def test_a_rough_run_starts_from_a_flat_checkpoint_and_only_a_run_does(checkpoint, tmp_path):
    """a1-rough's starts_from: --resume takes an a1-flat checkpoint (same observations, action and networks) and
    the run's checkpoints are a1-rough's; play (and export) still refuse it as an a1-rough policy."""
    final = train(TrainArgs(task="a1-rough", log_dir=tmp_path, resume=checkpoint, **{**TINY, "max_iterations": 1}))
    assert final.name == "model_1.pt" and read_checkpoint_info(final)["task"] == "a1-rough"
    with pytest.raises(CheckpointError, match="trained for task 'a1-flat', not 'a1-rough'"):
        play(PlayArgs(checkpoint=checkpoint, task="a1-rough"))


def test_the_flat_trot_starts_from_the_committed_rough_trot_line(tmp_path):
    """a1-flat-trot is the trot line moved to flat ground: --resume takes the committed a1-rough-trot checkpoint, and
    the run's checkpoints are a1-flat-trot's."""
    start = POLICIES / "candidates" / "a1_rough_trot" / "model_3600.pt"
    final = train(TrainArgs(task="a1-flat-trot", log_dir=tmp_path, resume=start, **{**TINY, "max_iterations": 1}))
    info = read_checkpoint_info(final)
    assert info["task"] == "a1-flat-trot" and info["env_steps"] == read_checkpoint_info(start)["env_steps"] + 4 * 8


def test_the_history_task_starts_from_the_shipped_flat_checkpoint_widened(tmp_path):
    """a1-flat-history starts from an a1-flat checkpoint: --resume widens its actor to five ticks (the older frames at
    zero weight; robot_rl.learn.history_widening), as the committed history candidate was started from the shipped
    line, and trains on; the file it started from is left as it was."""
    import torch

    start = POLICIES / "candidates" / "a1_flat_turn" / "model_6050.pt"
    before = start.read_bytes()
    final = train(TrainArgs(task="a1-flat-history", log_dir=tmp_path, resume=start, **{**TINY, "max_iterations": 1}))
    info = read_checkpoint_info(final)
    assert info["task"] == "a1-flat-history"
    assert info["env_steps"] == read_checkpoint_info(start)["env_steps"] + 4 * 8
    assert torch.load(final, weights_only=False)["actor_state_dict"]["mlp.0.weight"].shape == (128, 213)
    assert start.read_bytes() == before


def test_a_start_whose_network_differs_is_refused(checkpoint):
    from robot_rl.learn.ppo import check_checkpoint
    from robot_rl.robots.spec import load_robot

    rough = make_task("a1-rough")
    wider = dataclasses.replace(rough, ppo=dataclasses.replace(rough.ppo, actor_hidden_dims=(256, 128, 64)))
    with pytest.raises(CheckpointError, match="cannot start 'a1-rough': their actor network differ"):
        check_checkpoint(checkpoint, wider, load_robot("a1"), resuming=True)


def test_a_checkpoint_of_another_task_is_refused(checkpoint, tmp_path):
    with pytest.raises(CheckpointError, match="trained for task 'a1-flat'"):
        play(PlayArgs(checkpoint=checkpoint, task="panda-reach"))
    with pytest.raises(CheckpointError, match="trained for task 'a1-flat'"):
        train(TrainArgs(task="panda-reach", log_dir=tmp_path, resume=checkpoint, **TINY))
    assert not any(tmp_path.iterdir())  # refused before writing anything


def test_envs_whose_model_copies_do_not_fit_are_refused_before_a_run_is_created(tmp_path, monkeypatch):
    # As the G1 (41 MB per model, meshes) at 1024 CPU envs on a 24 GB machine, which the kernel killed part-way.
    monkeypatch.setattr("robot_rl.sim.world.available_memory_bytes", lambda: 64 * 2**20)
    with pytest.raises(ModelCopiesDoNotFit, match=r"'a1-flat' on the CPU backend: 100000 envs need .* --num-envs"):
        train(TrainArgs(task="a1-flat", log_dir=tmp_path, **{**TINY, "num_envs": 100_000}))
    assert not list(tmp_path.rglob("*")), "no run directory for a run that never started"
    with pytest.raises(ModelCopiesDoNotFit, match=r"100000 envs need"):  # FastTD3 builds the same env first too
        train(TrainArgs(task="a1-flat", algo="fasttd3", log_dir=tmp_path, num_envs=100_000, max_iterations=2,
                        progress=False, physics_threads=1))
    assert not list(tmp_path.rglob("*"))


def test_bad_task_and_randomization_keys_are_clear_errors():
    with pytest.raises(UnknownTaskError, match="known tasks: a1-flat"):
        configure_task(TrainArgs(task="a2-flat"))
    with pytest.raises(UnknownRandomizationKey, match="friction"):
        configure_task(TrainArgs(task="a1-flat", dr=("friction=0.2,0.4",)))
    for name in TASKS:
        if make_task(name).terms.trained_by != "ppo":  # e.g. panda-push, learned from demos
            with pytest.raises(ConfigError, match="not trained with PPO"):
                configure_task(TrainArgs(task=name))
    with pytest.raises(ConfigError, match="--num-envs: must be ≥ 1, got 0"):
        configure_task(TrainArgs(task="a1-flat", num_envs=0))
    with pytest.raises(ConfigError, match="--max-iterations: must be ≥ 1, got -3"):
        configure_task(TrainArgs(task="a1-flat", max_iterations=-3))
    task = configure_task(TrainArgs(task="a1-flat", num_envs=7, dr=("friction_scale=0.2,0.4",)))
    assert task.ppo.num_envs == 7 and task.randomization.friction_scale == (0.2, 0.4)


def test_video_is_skipped_without_an_offscreen_backend(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    assert "MUJOCO_GL" in offscreen_backend_problem()
    monkeypatch.setenv("MUJOCO_GL", "egl")
    assert offscreen_backend_problem() is None


def test_script_prints_user_errors_without_a_traceback():
    out = subprocess.run([sys.executable, "sim/train.py", "--task", "nope"], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 2
    assert out.stderr.strip() == f"error: unknown task 'nope' (known tasks: {', '.join(TASKS)})"


def _egl_works() -> bool:
    probe = ("import mujoco; m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size=\".1\"/>"
             "</worldbody></mujoco>'); mujoco.Renderer(m, 16, 16).render()")
    env = {**os.environ, "MUJOCO_GL": "egl"}
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=60).returncode == 0


def test_play_renders_a_gif_with_an_offscreen_backend(checkpoint, tmp_path):
    if not _egl_works():
        pytest.skip("no EGL offscreen rendering on this machine")
    video = tmp_path / "a1.gif"
    repo = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    out = subprocess.run(
        [sys.executable, "sim/play.py", "--task", "a1-flat", "--checkpoint", str(checkpoint), "--num-envs", "1",
         "--episodes", "1", "--video", str(video), "--video-seconds", "0.2", "--physics-threads", "1"],
        capture_output=True, text=True, cwd=repo, env={**os.environ, "MUJOCO_GL": "egl"}, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    from PIL import Image

    with Image.open(video) as gif:
        assert gif.n_frames == 10 and gif.size == (320, 240)
