"""A task's actor observation of one state, as teleop and demo datasets record it and BC reads it back."""

import numpy as np

from robot_rl.control.controller import PolicyController
from robot_rl.core.types import RobotState
from robot_rl.policy.contract import contract_for_task
from robot_rl.robots.spec import load_robot
from robot_rl.tasks.registry import make_task
from robot_rl.tasks.task_observation import TaskObservation, observation_names, task_text

PANDA = load_robot("panda")
TASK = make_task("panda-push")


def test_recorded_observation_is_what_the_policy_controller_feeds_its_policy():
    """The dataset's observation.state must equal the deploy-time policy input for the same state."""

    class Probe:
        contract = None

        def act(self, obs):
            self.seen = obs.copy()
            return np.zeros(PANDA.num_joints, dtype=np.float32)

    probe = Probe()
    probe.contract = contract_for_task(TASK, PANDA)
    controller = PolicyController.for_task(TASK, PANDA, probe)
    rng = np.random.default_rng(0)
    state = RobotState(0.0, 1, PANDA.default_positions + rng.normal(0, 0.1, 7), rng.normal(0, 0.5, 7), np.zeros(7))
    cube = np.array([0.45, -0.02, 0.025])  # from the task's observation source, not the robot state

    class Scene:
        def object_position(self):
            return cube

    command = np.array([0.55, 0.05])
    controller.set_command(command)
    controller.object_sensor = Scene()
    controller.step(state)
    recorded = TaskObservation(TASK, PANDA)(state, command, cube)
    np.testing.assert_array_equal(recorded, probe.seen[0])


def test_names_spell_out_every_element_of_the_observation_in_order():
    names = observation_names(TASK, PANDA)
    assert len(names) == TaskObservation(TASK, PANDA).dim == len(set(names))
    assert names[0] == f"joint_pos_rel.{PANDA.joint_names[0]}"
    assert {f"command.{c}" for c in TASK.commands.names} <= set(names)


def test_task_text_is_the_plain_instruction_or_else_the_description():
    assert task_text(TASK) == "push the red cube to the goal on the table"
    reach = make_task("panda-reach")
    assert task_text(reach) == reach.description
