"""FastTD3 on the warp backend (``--backend warp``): the env's tensors, the replay and the learner on one device.

On warp's CPU device (no GPU needed; slow: MuJoCo Warp's kernels run on one core, so the runs are a few envs for
12 iterations, the 10 of ``learning_starts`` and 2 with updates), and on cuda:0 too where torch sees a GPU, as
``tests/sim/test_warp_vec_env.py`` does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("mujoco_warp", reason="the warp backend needs the gpu extra: pip install 'robot-rl[gpu]'")

import torch

from robot_rl.learn.export_checkpoint import export_checkpoint
from robot_rl.learn.offpolicy import train_loop
from robot_rl.learn.offpolicy.device_env import DeviceEnv
from robot_rl.learn.offpolicy.fasttd3 import inference_policy
from robot_rl.learn.ppo import read_checkpoint_info
from robot_rl.learn.train import TrainArgs, train
from robot_rl.policy.contract import contract_for_task
from robot_rl.policy.onnx_policy import load_policy
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.sim.warp_vec_env import WarpVecEnv
from robot_rl.tasks.registry import make_task

DEVICES = ["cpu", *(["cuda:0"] if torch.cuda.is_available() else [])]
N = 3


@pytest.mark.parametrize("device", DEVICES)
def test_fasttd3_trains_on_the_warp_backend_with_its_replay_on_the_device(tmp_path, monkeypatch, device: str):
    replays, batches = [], []

    class RecordedReplay(train_loop.NStepReplay):  # the loop's own replay, kept to look at after the run
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            replays.append(self)

        def sample(self, batch, generator=None):
            out = super().sample(batch, generator)
            batches.append(out)
            return out

    monkeypatch.setattr(train_loop, "NStepReplay", RecordedReplay)
    final = train(TrainArgs(task="a1-flat", algo="fasttd3", backend="warp", device=device, num_envs=N,
                            max_iterations=12, log_dir=tmp_path, seed=1, progress=False, torch_threads=1))
    info = read_checkpoint_info(final)
    assert final.name == "model_11.pt" and info["algorithm"] == "fasttd3" and info["backend"] == "warp"
    assert info["env_steps"] == 12 * N and "elliptic" in info["backend_notes"][0]  # a1-flat's one-cone note
    data = torch.load(final, weights_only=False)  # written with CPU tensors: it loads without the device
    assert data["updates"] == 2 * 2
    assert all(t.device.type == "cpu" for t in data["actor_state_dict"].values())
    assert data["critic_optimizer"]["state"][0]["exp_avg"].device.type == "cpu"
    (replay,) = replays
    assert replay.added == 12 and all(t.device == torch.device(device) for t in replay.data.values())
    assert len(batches) == 4 and all(t.device == torch.device(device) for t in batches[0].values())
    assert replay.data["reward"].abs().sum() > 0 and torch.isfinite(replay.data["next_actor_obs"]).all()
    profile = json.loads((final.parent / "profile.json").read_text())
    assert profile["device"] == device and profile["seconds"]["update"] > 0

    onnx = tmp_path / "a1_fasttd3_warp.onnx"
    assert export_checkpoint(str(final), str(onnx)) == 0
    task = make_task("a1-flat")
    policy = load_policy(onnx, contract_for_task(task, load_robot("a1")))  # raises on any contract mismatch
    assert policy.contract.provenance.notes["algorithm"] == "fasttd3"
    obs = np.random.default_rng(0).normal(0.0, 1.0, (16, policy.contract.obs_dim)).astype(np.float32)
    with torch.no_grad():
        expected = inference_policy(data)(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(policy.act_batch(obs), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_the_final_observation_patch_equals_the_cpu_envs_from_the_same_state(device: str):
    """Every env times out on the same step of both backends: the observations stored for their targets are the
    finished episodes' last ones (equal across backends up to float32 physics), not the reset's first ones."""
    task = make_task("a1-flat")
    cmd = (0.5, 0.0, 0.0)
    cpu_env = MujocoVecEnv(task, N, seed=0, randomize=False, nthread=1, fixed_command=cmd)
    warp_env = WarpVecEnv(task, N, seed=0, randomize=False, device=device, fixed_command=cmd)
    nq, nv = cpu_env.models[0].nq, cpu_env.models[0].nv
    warp_env.set_physics_state(cpu_env.state[:, 1 : 1 + nq], cpu_env.state[:, 1 + nq : 1 + nq + nv])
    cpu, gpu = DeviceEnv(cpu_env), DeviceEnv(warp_env)
    assert gpu.device == torch.device(device) and cpu.device == torch.device("cpu")
    action = 0.3 * np.sin(0.7 * np.arange(12)[None] + np.arange(N)[:, None])
    for env in (cpu_env, warp_env):
        env.episode_length[:] = env.max_episode_length - 1  # the next step is the episodes' last
    a = cpu.step(torch.tensor(action, dtype=torch.float32))
    b = gpu.step(torch.tensor(action, dtype=torch.float32, device=device))
    assert a.done.all() and not a.terminated.any() and b.done.all() and not b.terminated.any()
    assert b.actor_obs.device == torch.device(device) and b.reward.dtype == torch.float32
    patched = []
    for env, step in ((cpu, a), (gpu, b)):
        actor, critic = step.actor_obs.clone(), step.critic_obs.clone()
        env.patch_final_obs(step.done, actor, critic)
        patched.append((actor.cpu().numpy(), critic.cpu().numpy()))
        assert np.abs(actor.cpu().numpy() - step.actor_obs.cpu().numpy()).max() > 0.1  # not the reset's obs
    (cpu_actor, cpu_critic), (warp_actor, warp_critic) = patched
    np.testing.assert_allclose(warp_actor, cpu_actor, atol=1e-3)
    np.testing.assert_allclose(warp_critic, cpu_critic, atol=1e-3)
    # only the finished rows are written: an env still running keeps its next observation
    keep = torch.zeros(N, dtype=torch.bool, device=device)
    keep[0] = True
    actor = b.actor_obs.clone()
    gpu.patch_final_obs(keep, actor, b.critic_obs.clone())
    assert torch.equal(actor[1:], b.actor_obs[1:]) and not torch.equal(actor[0], b.actor_obs[0])
    cpu.close()
    gpu.close()
