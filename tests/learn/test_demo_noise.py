"""DART noise during demo collection: the robot executes a perturbed action, the label stays the expert's."""

import numpy as np
import pytest

from robot_rl.core.types import RobotState
from robot_rl.data.lerobot_dataset import LeRobotDataset
from robot_rl.learn.demo_noise import DemoNoise, NoisyExecution, NoisyTeleop, SmoothNoise
from robot_rl.learn.demos import EXECUTED_ACTION, collect_demos
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.teleop.arm_ik import ArmTeleopController
from robot_rl.teleop.command import TeleopCommand

PANDA = load_robot("panda")
TASK = make_task("panda-push")


def _state(q):
    return RobotState(0.0, 1, np.asarray(q, dtype=np.float64), np.zeros(7), np.zeros(7))


def _teleop_ticks(controller, ticks, rate=(0.3, 0.0, 0.0)):
    """Drive ``controller`` (a real ArmTeleopController, perhaps wrapped) with a steady twist; the measured
    joints follow the previous target exactly (a stand-in for a perfect PD)."""
    q = PANDA.default_positions.copy()
    labels, executed = [], []
    for _ in range(ticks):
        controller.set_teleop(TeleopCommand(ee_delta=np.array([*rate, 0.0, 0.0, 0.0])))
        command = controller.step(_state(q))
        labels.append(np.array(getattr(controller, "expert_action", controller.last_raw_action)))
        executed.append(np.array(controller.last_raw_action))
        np.testing.assert_allclose(command.q_target, PANDA.default_positions + TASK.action.scale * executed[-1])
        q = command.q_target.copy()
    return np.array(labels), np.array(executed)


def test_noise_is_off_by_default_and_rejects_bad_settings():
    assert not DemoNoise().enabled
    assert DemoNoise(joint_std=0.05).enabled and DemoNoise(twist_std=0.1).enabled
    with pytest.raises(ValueError, match="joint_std"):
        DemoNoise(joint_std=-0.1)
    with pytest.raises(ValueError, match="twist_std"):
        DemoNoise(twist_std=float("nan"))
    with pytest.raises(ValueError, match="tau_s"):
        DemoNoise(joint_std=0.1, tau_s=0.0)


def test_smooth_noise_has_the_stationary_std_it_is_given():
    noise = SmoothNoise(np.full(4000, 0.1), tau_s=0.3, dt=0.02, rng=np.random.default_rng(0))
    for _ in range(400):  # 8 s ≫ τ: stationary
        value = noise.step()
    assert 0.09 < value.std() < 0.11
    # Smooth: one tick changes it by a small fraction of its std (a plain OU process: √(2·dt/τ) ≈ 0.37).
    assert np.std(noise.step() - value) < 0.05 * 0.1


def test_label_is_the_clean_expert_action_while_the_executed_one_is_perturbed():
    """The wrapped controller's label equals what an unwrapped expert outputs for the same states."""
    noisy = NoisyExecution(ArmTeleopController(PANDA, TASK), PANDA, TASK, DemoNoise(joint_std=0.05),
                           np.random.default_rng(0))
    labels, executed = _teleop_ticks(noisy, 60)
    gap = np.abs(executed - labels).max(axis=1)
    assert gap[-1] > 1e-2  # the robot was sent something else than the label
    # Replay the visited states (the executed targets the measured joints followed) through a fresh expert:
    # its action at each state is the recorded label.
    clean = ArmTeleopController(PANDA, TASK)
    q = PANDA.default_positions.copy()
    for t in range(60):
        clean.set_teleop(TeleopCommand(ee_delta=np.array([0.3, 0.0, 0.0, 0.0, 0.0, 0.0])))
        clean.step(_state(q))
        np.testing.assert_allclose(clean.last_raw_action, labels[t], atol=1e-9)
        q = PANDA.default_positions + TASK.action.scale * executed[t]


def test_noise_is_seeded_and_fades_out_when_the_gate_closes():
    runs = []
    for _ in range(2):
        noisy = NoisyExecution(ArmTeleopController(PANDA, TASK), PANDA, TASK, DemoNoise(joint_std=0.05),
                               np.random.default_rng(7))
        runs.append(_teleop_ticks(noisy, 20)[1])
    np.testing.assert_array_equal(runs[0], runs[1])
    on = [True]
    noisy = NoisyExecution(ArmTeleopController(PANDA, TASK), PANDA, TASK, DemoNoise(joint_std=0.05, fade_s=0.1),
                           np.random.default_rng(7), active=lambda: on[0])
    _teleop_ticks(noisy, 20)
    on[0] = False
    labels, executed = _teleop_ticks(noisy, 10)  # 0.2 s ≥ fade_s: the noise is gone
    np.testing.assert_array_equal(labels[-1], executed[-1])


def test_noisy_collection_records_the_label_and_the_executed_action_and_says_so(tmp_path):
    out = tmp_path / "noisy"
    summary = collect_demos("panda-push", episodes=1, out_dir=str(out), seed=3, progress=False,
                            noise=DemoNoise(twist_std=0.1))
    assert summary.written == 1
    episode = LeRobotDataset(out).episode(0)
    gap = np.abs(episode[EXECUTED_ACTION] - episode["action"]).max(axis=1)
    assert gap.max() > 1e-3  # perturbed while working on the cube...
    assert gap[-1] == 0.0  # ...and not at the end, going home (the gate faded it out)
    card = (out / "README.md").read_text()
    assert "DART" in card and "twist std 0.1" in card and f"`{EXECUTED_ACTION}`" in card


def test_noisy_teleop_without_noise_executes_exactly_what_the_plain_teleop_would():
    """Rewinding the IK between the label's solve and the executed one leaves no trace."""
    plain = ArmTeleopController(PANDA, TASK)
    command = TeleopCommand(ee_delta=np.array([0.3, -0.2, 0.1, 0.0, 0.0, 0.0]))
    wrapped = NoisyTeleop(ArmTeleopController(PANDA, TASK), PANDA, DemoNoise(twist_std=1e-300),
                          np.random.default_rng(0), clean_command=lambda: command)
    _, expected = _teleop_ticks(plain, 30, rate=(0.3, -0.2, 0.1))
    labels, executed = _teleop_ticks(wrapped, 30, rate=(0.3, -0.2, 0.1))
    np.testing.assert_array_equal(executed, expected)
    np.testing.assert_array_equal(labels, expected)


def test_noisy_teleop_label_is_the_clean_command_from_where_the_noise_took_the_arm():
    """The expert says "hold" while twist noise moves the arm: each label holds the arm where it now is
    (the expert's answer from the visited state), not where it started."""
    hold = TeleopCommand(ee_delta=np.zeros(6))
    wrapped = NoisyTeleop(ArmTeleopController(PANDA, TASK), PANDA, DemoNoise(twist_std=0.5),
                          np.random.default_rng(1), clean_command=lambda: hold)
    labels, executed = _teleop_ticks(wrapped, 50, rate=(0.0, 0.0, 0.0))
    assert np.abs(executed[-1]).max() > 0.02 * np.abs(labels[0]).max() + 1e-2  # the noise moved the arm
    step = np.abs(np.diff(executed, axis=0)).max(axis=1)
    to_previous = np.abs(labels[1:] - executed[:-1]).max(axis=1)
    assert np.all(to_previous < 0.2 * step + 1e-6)
