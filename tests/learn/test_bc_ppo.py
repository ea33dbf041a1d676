"""Continued PPO on a BC policy: the network rebuilt from its ONNX is the file's, rsl_rl trains it in the real
vectorized push env, and its export is the BC graph while the actor has not moved."""

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
import torch

from robot_rl.learn.bc import Anchor, BCConfig, build_modules, train_bc
from robot_rl.learn.bc_ppo import NotABCPolicy, bc_actor_cfg, bc_modules_from_onnx
from robot_rl.learn.demos import collect_demos
from robot_rl.learn.ppo import RslRlVecEnv, TaskRunner
from robot_rl.policy.contract import contract_for_task
from robot_rl.policy.export import export_onnx
from robot_rl.robots.spec import load_robot
from robot_rl.sim.mujoco_vec_env import MujocoVecEnv
from robot_rl.tasks.registry import make_task

PANDA = load_robot("panda")
TASK = make_task("panda-push")


@pytest.fixture(scope="module")
def bc_onnx(tmp_path_factory):
    """A BC policy as robot_rl.learn.bc trains and exports it (2 demos, 2 epochs: what matters is the graph)."""
    out = tmp_path_factory.mktemp("bc_ppo")
    collect_demos("panda-push", episodes=2, out_dir=str(out / "demos"), seed=3, progress=False)
    train_bc(str(out / "demos"), out=str(out / "bc"), epochs=2, seed=0)
    return out / "bc" / "policy.onnx"


def _run(path, obs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: obs.astype(np.float32)})[0]


def _obs(n: int, normalizer) -> np.ndarray:
    """Observations within 2 σ of the demos' mean: where the network is fitted (far outside, a feature the demos
    barely varied is thousands of σ out and float32 alone differs between two correct implementations)."""
    mean, std = normalizer.mean.numpy(), normalizer.std.numpy()
    return (mean + np.random.default_rng(5).uniform(-2, 2, (n, len(mean))) * std).astype(np.float32)


def test_the_network_rebuilt_from_the_onnx_acts_as_the_file(bc_onnx):
    normalizer, head = bc_modules_from_onnx(bc_onnx, TASK, PANDA)
    obs = _obs(64, normalizer)
    with torch.no_grad():
        got = head(normalizer(torch.as_tensor(obs, dtype=torch.float32))).numpy()
    np.testing.assert_allclose(got, _run(bc_onnx, obs), rtol=1e-5, atol=1e-5)
    assert head.mlp.skip is not None  # the linear skip path came back with the weights
    assert all(p.requires_grad for p in head.parameters())


@pytest.mark.parametrize("chunk,residual", [(3, False), (1, True)])
def test_chunked_and_residual_bc_graphs_are_rebuilt_too(tmp_path, chunk, residual):
    j = PANDA.num_joints
    obs_dim = contract_for_task(TASK, PANDA).obs_dim
    rng = np.random.default_rng(1)
    anchor = Anchor.for_task(TASK, j) if residual else None
    normalizer, _, head = build_modules(rng.normal(size=obs_dim), rng.uniform(0.5, 2, obs_dim),
                                        rng.normal(size=chunk * j), rng.uniform(0.5, 2, chunk * j), j, chunk,
                                        BCConfig().hidden[:1], anchor, linear_skip=not residual)
    path = tmp_path / "policy.onnx"
    export_onnx(head, normalizer, contract_for_task(TASK, PANDA), path)
    normalizer2, head2 = bc_modules_from_onnx(path, TASK, PANDA)
    obs = _obs(8, normalizer2)
    with torch.no_grad():
        np.testing.assert_allclose(head2(normalizer2(torch.as_tensor(obs, dtype=torch.float32))).numpy(),
                                   _run(path, obs), rtol=1e-5, atol=1e-5)


def test_a_policy_that_is_not_bc_is_refused_naming_what_is_missing(tmp_path):
    mlp = torch.nn.Sequential(torch.nn.Linear(contract_for_task(TASK, PANDA).obs_dim, PANDA.num_joints))
    path = tmp_path / "ppo.onnx"
    export_onnx(mlp, None, contract_for_task(TASK, PANDA), path)
    with pytest.raises(NotABCPolicy, match=r"not a robot_rl BC policy.*obs_normalizer\.mean"):
        bc_modules_from_onnx(path, TASK, PANDA)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(NotABCPolicy, match="not a readable ONNX model"):
        bc_modules_from_onnx(garbage, TASK, PANDA)


def test_a_bc_policy_for_another_observation_layout_is_refused(bc_onnx):
    reach = make_task("panda-reach")  # same robot, another actor observation
    env = MujocoVecEnv(reach, 2, seed=0, nthread=1)
    ppo = dataclasses.replace(reach.ppo, num_envs=2, num_steps_per_env=4)
    with pytest.raises(NotABCPolicy, match="observations"):
        TaskRunner(RslRlVecEnv(env), reach, log_dir=None, ppo=ppo, actor=bc_actor_cfg(bc_onnx, reach, PANDA, 0.1))
    env.close()


def test_ppo_trains_the_bc_network_in_the_push_env_and_exports_its_graph(bc_onnx, tmp_path):
    from robot_rl.policy import export_rsl_rl_policy

    torch.manual_seed(0)
    env = MujocoVecEnv(TASK, 8, seed=0, nthread=1)
    ppo = dataclasses.replace(TASK.ppo, num_envs=8, num_steps_per_env=8, entropy_coef=0.0)
    runner = TaskRunner(RslRlVecEnv(env), TASK, log_dir=None, ppo=ppo,
                        actor=bc_actor_cfg(bc_onnx, TASK, PANDA, init_std=0.05))
    actor = runner.alg.get_policy()
    assert float(actor.distribution.log_std_param.detach().exp().mean()) == pytest.approx(0.05)

    # Not trained yet: the export is the BC policy, normalizer baked in.
    before = tmp_path / "before.onnx"
    export_rsl_rl_policy(actor, contract_for_task(TASK, PANDA), before)
    obs = _obs(16, bc_modules_from_onnx(bc_onnx, TASK, PANDA)[0])
    np.testing.assert_allclose(_run(before, obs), _run(bc_onnx, obs), rtol=1e-5, atol=1e-5)

    weights = {k: v.clone() for k, v in actor.state_dict().items()}
    runner.learn(2)
    changed = {k for k, v in actor.state_dict().items() if not torch.equal(v, weights[k])}
    assert "mlp.mlp.mlp.0.weight" in changed  # PPO moved the BC network's own weights …
    assert not any(k.startswith("obs_normalizer") for k in changed)  # … not the normalizer it was fitted with
    after = tmp_path / "after.onnx"
    export_rsl_rl_policy(actor, contract_for_task(TASK, PANDA), after)
    assert not np.allclose(_run(after, obs), _run(bc_onnx, obs))
    env.close()


def test_init_std_must_be_positive(bc_onnx):
    with pytest.raises(ValueError, match="init_std"):
        bc_actor_cfg(bc_onnx, TASK, PANDA, 0.0)
