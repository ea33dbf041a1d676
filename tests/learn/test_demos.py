"""Scripted demos through arm teleop, the deploy runtime and the teleop recorder into a LeRobot dataset."""

import numpy as np
import pytest

from robot_rl.data.lerobot_dataset import LeRobotDataset
from robot_rl.data.lerobot_validate import validate_dataset
from robot_rl.learn.demos import EXECUTED_ACTION, TASK_TEXT, collect_demos, executed_action
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task_observation import observation_names

PANDA = load_robot("panda")
TASK = make_task("panda-push")


@pytest.fixture(scope="module")
def two_demos(tmp_path_factory):
    out = tmp_path_factory.mktemp("demos") / "push"
    summary = collect_demos("panda-push", episodes=2, out_dir=str(out), seed=1, progress=False)
    return out, summary


def test_collect_writes_a_valid_lerobot_dataset_of_successful_episodes(two_demos):
    out, summary = two_demos
    assert summary.written == 2 and summary.attempts >= 2 and summary.expert_successes >= 2
    assert validate_dataset(out) == []
    ds = LeRobotDataset(out)
    assert ds.num_episodes == 2 and ds.tasks == [TASK_TEXT]
    assert all(e["success"] for e in ds.episodes)
    assert ds.features["observation.state"].names == observation_names(TASK, PANDA)
    assert ds.features["action"].names == tuple(PANDA.joint_names)
    episode = ds.episode(0)
    assert episode["next.success"][-1] and episode["next.done"][-1]
    cube, goal = episode["observation.environment_state"][-1, :2], episode["observation.environment_state"][-1, 3:]
    assert np.linalg.norm(cube - goal) < 0.03  # the cube ends at the goal
    # Actions are targets a policy could output: inside the task's action clip.
    assert np.abs(episode["action"]).max() <= TASK.action.clip
    # No demo noise by default: the robot executed the labels themselves, and the dataset card says so.
    np.testing.assert_array_equal(episode[EXECUTED_ACTION], episode["action"])
    # LeRobot takes every feature named action* for a policy output: only the label may be one.
    assert [k for k in ds.features if k.startswith("action")] == ["action"]
    legacy = {"action.executed": episode[EXECUTED_ACTION]}  # a dataset recorded before the rename
    np.testing.assert_array_equal(executed_action(legacy), executed_action(episode))
    assert "No noise injection" in (out / "README.md").read_text()


def test_collect_refuses_a_task_the_expert_does_not_know_and_no_episodes(tmp_path):
    from robot_rl.typed_yaml import ConfigError  # the CLI prints these as one line

    with pytest.raises(ConfigError, match="panda-push"):
        collect_demos("panda-reach", episodes=1, out_dir=str(tmp_path / "x"), progress=False)
    with pytest.raises(ConfigError, match="--episodes: must be ≥ 1, got 0"):
        collect_demos("panda-push", episodes=0, out_dir=str(tmp_path / "x"), progress=False)


def test_stratified_layouts_use_every_stratum_of_every_range_once():
    from robot_rl.learn.demos import stratified_episodes
    from robot_rl.tasks import panda_push

    n = 20
    episodes = stratified_episodes(n, np.random.default_rng(0))
    cube = np.array([e.cube_xy for e in episodes])
    push = np.array([e.goal_xy - e.cube_xy for e in episodes])
    values = {"x": (cube[:, 0], panda_push.CUBE_X_RANGE), "y": (cube[:, 1], panda_push.CUBE_Y_RANGE),
              "angle": (np.arctan2(push[:, 1], push[:, 0]), panda_push.PUSH_ANGLE_RANGE_RAD),
              "distance": (np.linalg.norm(push, axis=1), panda_push.PUSH_DISTANCE_RANGE_M)}
    for name, (v, (low, high)) in values.items():
        strata = np.floor((v - low) / (high - low) * n).astype(int)
        assert sorted(strata) == list(range(n)), name
    low, high = TASK.commands.low, TASK.commands.high
    assert all(np.all((e.goal_xy >= low) & (e.goal_xy <= high)) for e in episodes)


def test_collect_demos_command_line(tmp_path):
    from robot_rl.cli import main

    out = tmp_path / "cli"
    assert main(["collect-demos", "--episodes", "1", "--out-dir", str(out), "--layouts", "stratified",
                 "--no-progress"]) == 0
    assert LeRobotDataset(out).num_episodes == 1
    assert "No noise injection" in (out / "README.md").read_text()


def test_the_expert_runs_on_a_shifted_robot_too():
    """The residual benchmark's "real" push robot for the demonstrator: the same layout, another robot (weak
    motors, latency), so another outcome; a shifted robot is a MuJoCo one."""
    from robot_rl.learn.demos import evaluate_expert
    from robot_rl.learn.residual.shifted_sim import RealityShift

    nominal = evaluate_expert(episodes=1, seed=3)
    shifted = evaluate_expert(episodes=1, seed=3, shift=RealityShift(kp_scale=0.5, latency_steps=2))
    assert nominal.episodes == shifted.episodes == 1
    assert nominal.mean_final_distance_m != shifted.mean_final_distance_m
    with pytest.raises(ValueError, match="MuJoCo"):
        evaluate_expert(episodes=1, simulator="pybullet", shift=RealityShift(kp_scale=0.5))
