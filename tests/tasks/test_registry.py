"""The task registry and the task configs' own checks."""

import dataclasses

import pytest

from robot_rl.robots.spec import load_robot
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.tasks.registry import TASKS, UnknownTaskError, make_task
from robot_rl.tasks.task import MEASURED_TERMS, actor_history_added, resume_mismatches


def test_every_registered_task_builds_with_its_own_name():
    for name in TASKS:
        task = make_task(name)
        assert task.name == name
        load_robot(task.robot)  # the robot it names exists


def test_every_task_that_starts_from_another_fits_its_checkpoints():
    starting = {name: task.starts_from for name in TASKS if (task := make_task(name)).starts_from}
    assert starting == {"a1-flat-history": "a1-flat", "a1-rough": "a1-flat", "a1-flat-trot": "a1-rough-trot"}
    for name, start in starting.items():
        assert resume_mismatches(make_task(name), make_task(start)) == []
    # Five ticks of every measurement fit a checkpoint without them (it is widened); another observation does not.
    assert actor_history_added(make_task("a1-flat-history"), make_task("a1-flat"))
    assert not actor_history_added(make_task("a1-rough"), make_task("a1-flat"))  # the same observation
    assert resume_mismatches(make_task("a1-flat-history"), make_task("a1-flat-trot")) == [
        "actor observation", "critic observation"]  # the trot's observations carry its clock


def test_unknown_task_error_lists_the_known_tasks():
    with pytest.raises(UnknownTaskError) as err:
        make_task("a1-flatt")
    message = str(err.value)
    assert "a1-flatt" in message
    for name in TASKS:
        assert name in message


def test_actors_only_observe_what_a_real_robot_measures():
    for name in TASKS:
        task = make_task(name)
        assert {t.name for t in task.actor_obs.terms} <= MEASURED_TERMS, name


def test_a1_actor_and_critic_observations():
    task = make_task("a1-flat")
    actor = [t.name for t in task.actor_obs.terms]
    assert actor == ["base_ang_vel", "projected_gravity", "command", "joint_pos_rel", "joint_vel", "last_action"]
    assert "base_lin_vel" in [t.name for t in task.critic_obs.terms]
    assert task.commands.names == ("lin_vel_x", "lin_vel_y", "ang_vel_z")
    assert task.terrain is None
    assert make_task("a1-rough").terrain is not None


def test_a1_termination_tilt_comes_from_the_spec():
    assert make_task("a1-flat").terminations.max_tilt_rad == load_robot("a1").safety.max_tilt_rad


def test_a_privileged_actor_term_is_refused():
    task = make_task("a1-flat")
    layout = ObservationLayout(terms=(ObsTerm("base_lin_vel"), *task.actor_obs.terms))
    with pytest.raises(ValueError, match="base_lin_vel"):
        dataclasses.replace(task, actor_obs=layout)


def test_panda_reach_commands_are_a_target():
    task = make_task("panda-reach")
    assert task.commands.names == ("target_x", "target_y", "target_z")
    success = next(t for t in task.rewards.terms if t.name == "reach_success")
    assert success.param("tolerance_m") == task.terms.tool_target_m == pytest.approx(0.02)
    with pytest.raises(ValueError, match="target_x"):
        dataclasses.replace(task, commands=make_task("a1-flat").commands)


def test_an_action_encodes_back_from_the_target_it_decodes_to():
    import numpy as np

    from robot_rl.robots.spec import load_robot
    from robot_rl.tasks.registry import make_task

    task, spec = make_task("panda-push"), load_robot("panda")
    action = np.linspace(-6.0, 6.0, spec.num_joints)  # beyond the clip (4) at both ends
    q = task.action.decode(action, spec.default_positions)
    np.testing.assert_allclose(task.action.encode(q, spec.default_positions),
                               np.clip(action, -task.action.clip, task.action.clip), atol=1e-12)


def test_a1_flat_history_is_a1_flat_with_five_ticks_of_every_measurement():
    flat, history = make_task("a1-flat"), make_task("a1-flat-history")
    for f, h in zip(flat.actor_obs.terms, history.actor_obs.terms, strict=True):
        assert (h.name, h.scale, h.clip, h.noise) == (f.name, f.scale, f.clip, f.noise)
        assert h.history_length == (1 if h.name == "command" else 5), h.name
    spec = load_robot("a1")
    sizes = (len(spec.joint_names), flat.commands.size, len(spec.joint_names))
    assert history.actor_obs.size(*sizes) == 5 * flat.actor_obs.size(*sizes) - 4 * flat.commands.size
    assert history.critic_obs == flat.critic_obs and history.rewards == flat.rewards and history.ppo == flat.ppo
    # The training the shipped a1_flat line ended with; every range is a1-flat's.
    assert history.randomization == dataclasses.replace(flat.randomization, all_corners_probability=0.2,
                                                        push_overshoot=1.3)
    assert history.terms.commands.turn_fraction == 0.15 and flat.terms.commands.turn_fraction == 0.0
