"""Recurrent G1 policies (Unitree's unitree_rl_gym motion.pt, rl_sar's robomimic locomotion): the LSTM state (and
unitree_rl_gym's gait clock) become explicit ONNX inputs/outputs, carried by the runtime and reset on (re-)arm.

The reference is each trainer's own deploy computation, written out here independently of the importer: the
observation from the robot state with the trainer's scales, order and joint map, fed to the TorchScript
archive itself (its state living in its buffers, as in the trainer's deploy loop). No G1 model is needed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.control.state_machine import ControllerMode
from robot_rl.core.types import RobotState
from robot_rl.policy.contract import action_for_policy, layout_for_policy
from robot_rl.policy.importers import PolicyImportError
from robot_rl.policy.importers.convert import convert
from robot_rl.policy.onnx_policy import load_policy, read_contract
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, projected_gravity

torch = pytest.importorskip("torch")

UNITREE_CONFIG = "unitree_rl_gym/deploy/deploy_mujoco/configs/g1.yaml"
ROBOMIMIC_CONFIG = "rl_sar/policy/g1/robomimic/locomotion/config.yaml"
STEPS = 300  # 6 s at 50 Hz
COMMAND = np.array([0.5, 0.0, 0.0])


def _controller(path: Path, robot: str | None = None):
    contract = read_contract(path)
    spec = load_robot(robot or contract.robot)
    policy = load_policy(path, contract)
    commands = CommandSpec(contract.commands.names, contract.commands.ranges)
    layout = layout_for_policy(ObservationLayout(()), contract)
    action = action_for_policy(JointPositionAction(1.0, 1.0), contract)
    return spec, policy, PolicyController(spec, layout, commands, action, policy)


def _states(spec, steps: int, seed: int = 0):
    """A walking-like trajectory: each joint swinging about the default pose at a gait frequency, a rocking base."""
    rng = np.random.default_rng(seed)
    n, dt = spec.num_joints, spec.timing.policy_period_s
    amp, phase = rng.uniform(0.05, 0.3, n), rng.uniform(0, 2 * np.pi, n)
    w = 2 * np.pi * 1.25
    for k in range(steps):
        t = k * dt
        roll, pitch = 0.05 * np.sin(w * t), 0.04 * np.cos(w * t)
        quat = np.array([np.cos(roll / 2) * np.cos(pitch / 2), np.sin(roll / 2) * np.cos(pitch / 2),
                         np.cos(roll / 2) * np.sin(pitch / 2), -np.sin(roll / 2) * np.sin(pitch / 2)])
        yield RobotState(timestamp=t, tick=k, q=np.asarray(spec.default_positions) + amp * np.sin(w * t + phase),
                         dq=amp * w * np.cos(w * t + phase), tau=np.zeros(n), base_quat=quat / np.linalg.norm(quat),
                         base_ang_vel=np.array([0.3 * np.cos(w * t), -0.2 * np.sin(w * t), 0.05]))


def _import(external: Path, config: str, tmp_path: Path, allow, robot: str = "g1", task: str | None = "g1-flat"):
    out = tmp_path / "policy.onnx"
    convert(external / config, None, robot, task, out, allow)
    return out


def _g1_all_joints(tmp_path: Path) -> str:
    """The G1 spec with every joint a policy joint (the user's spec for a whole-body policy: it extends the shipped
    one, copying nothing)."""
    (tmp_path / "spec").mkdir()
    path = tmp_path / "spec" / "g1.yaml"
    path.write_text("extends: g1\npolicy_joints: []  # every joint\n")
    return str(path)


def test_a_legs_only_policy_needs_hold_missing_on_a_whole_body_spec(external, tmp_path):
    with pytest.raises(PolicyImportError, match=r"joint 'waist_yaw_joint' \(and 16 more\) is not driven by the "
                                                r"policy; pass --allow hold-missing"):
        _import(external, UNITREE_CONFIG, tmp_path, (), robot=_g1_all_joints(tmp_path), task=None)


def test_a_whole_body_policy_is_refused_on_a_legs_only_spec(external, tmp_path):
    with pytest.raises(PolicyImportError, match=r"'waist_yaw_joint' .* is a joint of robot 'g1' .* that the spec "
                                                r"holds \(not in its policy_joints\)"):
        _import(external, ROBOMIMIC_CONFIG, tmp_path, ("gains", "default-pose"))


def test_unitree_g1_onnx_equals_torchscript_along_an_episode(external, tmp_path):
    path = _import(external, UNITREE_CONFIG, tmp_path, ())  # the G1 spec's policy joints are its legs
    contract = read_contract(path)
    assert [s.input_name for s in contract.recurrent.states] == ["lstm_h", "lstm_c", "gait_clock"]
    spec, _, controller = _controller(path)
    controller.set_command(COMMAND)
    cfg = yaml.safe_load((external / UNITREE_CONFIG).read_text())
    archive = torch.jit.load(str(external / "unitree_rl_gym/deploy/pre_train/g1/motion.pt"))
    default = np.array(cfg["default_angles"])
    legs = [spec.joint_names.index(n) for n in contract.provenance.notes["imported"]["policy_joint_order"]]
    assert legs == list(range(12)) and contract.joint_names == spec.policy_joint_names  # the G1's first 12 motors
    action = np.zeros(12)
    worst = 0.0
    for k, state in enumerate(_states(spec, STEPS)):
        controller.step(state)
        phase = ((k + 1) * 0.02 % 0.8) / 0.8  # deploy_mujoco.py: count = counter · dt at the policy's ticks
        obs = np.concatenate([
            state.base_ang_vel * cfg["ang_vel_scale"], projected_gravity(state.base_quat[None])[0],
            COMMAND * np.array(cfg["cmd_scale"]), (state.q[legs] - default) * cfg["dof_pos_scale"],
            state.dq[legs] * cfg["dof_vel_scale"], action, [np.sin(2 * np.pi * phase), np.cos(2 * np.pi * phase)],
        ]).astype(np.float32)
        with torch.no_grad():
            action = archive(torch.from_numpy(obs)[None])[0].numpy().astype(np.float64)
        raw = controller.last_raw_action
        worst = max(worst, float(np.max(np.abs(raw - action))))  # raw is in the contract's (policy) joints
    assert worst < 1e-3, worst


def test_robomimic_g1_onnx_equals_torchscript_along_an_episode(external, tmp_path):
    """Trainer's joint order (joint_mapping), its own gains and default pose: the targets are the trainer's."""
    robot = _g1_all_joints(tmp_path)
    path = _import(external, ROBOMIMIC_CONFIG, tmp_path, ("gains", "default-pose"), robot=robot, task=None)
    spec, _, controller = _controller(path, robot)
    controller.set_command(COMMAND)
    cfg = next(iter(yaml.safe_load((external / ROBOMIMIC_CONFIG).read_text()).values()))
    base = yaml.safe_load((external / "rl_sar/policy/g1/base.yaml").read_text())["g1"]
    mapping = cfg["joint_mapping"]
    robot_index = [spec.joint_names.index(base["joint_names"][m]) for m in mapping]
    default = np.array(cfg["default_dof_pos"])
    archive = torch.jit.load(str(external / "rl_sar/policy/g1/robomimic/locomotion/policy_29dof.pt"))
    action = np.zeros(29)
    worst = 0.0
    for state in _states(spec, STEPS, seed=1):
        command = controller.step(state)
        obs = np.concatenate([state.base_ang_vel, projected_gravity(state.base_quat[None])[0], COMMAND,
                              state.q[robot_index] - default, state.dq[robot_index], action])
        obs = np.clip(obs, -cfg["clip_obs"], cfg["clip_obs"]).astype(np.float32)
        with torch.no_grad():
            action = archive(torch.from_numpy(obs)[None])[0].numpy().astype(np.float64)
        target = default + np.array(cfg["action_scale"]) * action  # rl_sar's target, policy order
        worst = max(worst, float(np.max(np.abs(command.q_target[robot_index] - target))))
    assert worst < 1e-3, worst


def test_rearming_resets_the_recurrent_state(external, tmp_path):
    path = _import(external, UNITREE_CONFIG, tmp_path, ())
    spec, policy, controller = _controller(path)
    runtime = DeployRuntime(spec, controller)
    states = list(_states(spec, 60))
    ticks = iter(range(1_000_000))
    now = 0.0

    def tick(state: RobotState):
        """One runtime step on a fresh measurement (the chain's stale-state watchdog wants new ticks)."""
        nonlocal now
        k = next(ticks)
        result = runtime.step(dataclasses.replace(state, tick=k, timestamp=now), now)
        now += spec.timing.policy_period_s
        return result

    def episode() -> list[np.ndarray]:
        """Arm, ramp, then record the policy's raw actions over 40 running ticks on the same states."""
        runtime.arm()
        actions: list[np.ndarray] = []
        for _ in range(1000):
            running = runtime.mode is ControllerMode.RUNNING
            result = tick(states[len(actions)] if running else states[0])
            if result.mode is ControllerMode.RUNNING:
                actions.append(controller.last_raw_action.copy())
                if len(actions) == 40:
                    return actions
        raise AssertionError(f"never ran 40 ticks: mode {runtime.mode}, diagnostics {runtime.diagnostics()}")

    first = episode()
    assert np.any(np.abs(policy.state[0]) > 1e-3)  # the LSTM moved
    runtime.stop()
    tick(states[0])
    second = episode()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)  # the same process, the same inputs, the state reset at re-arm
