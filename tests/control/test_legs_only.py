"""Legs-only policies on the whole robot (spec ``policy_joints``): the G1's policy sees and drives its 12 leg
joints; the waist and arms are held at their default pose with their own gains, through the controller, the
runtime's safety chain and the MuJoCo model of Unitree's 29-DoF G1."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np
import pytest

from robot_rl.control.controller import PolicyController
from robot_rl.control.runtime import DeployRuntime
from robot_rl.core.types import RobotState
from robot_rl.policy.contract import PolicyContract
from robot_rl.robots.assets import model_source_missing
from robot_rl.robots.spec import load_robot, load_spec_file
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationLayout, ObsTerm
from robot_rl.typed_yaml import ConfigError

G1 = load_robot("g1")
LEGS = tuple(n for n in G1.joint_names if any(k in n for k in ("hip", "knee", "ankle")))
LAYOUT = ObservationLayout((ObsTerm("base_ang_vel"), ObsTerm("projected_gravity"), ObsTerm("command"),
                            ObsTerm("joint_pos_rel"), ObsTerm("joint_vel"), ObsTerm("last_action")))
COMMANDS = CommandSpec(("lin_vel_x", "lin_vel_y", "ang_vel_z"), ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)))
ACTION = JointPositionAction(scale=0.25, clip=100.0)  # unitree_rl_gym's G1 action scale
CONTRACT = PolicyContract.expected_from(G1, LAYOUT, COMMANDS, ACTION)
LIFT = 0.3  # rad of hip pitch per leg lift (knee twice that)


class ScriptedLegs:
    """A policy whose raw action is a function of its call count: a squat and alternate leg lifts, the kind
    of leg motion that pushes reaction torques into the held upper body. Observations are checked for size."""

    contract = CONTRACT

    def __init__(self) -> None:
        self.calls = 0
        self.obs_dims: set[int] = set()

    def act(self, obs: np.ndarray) -> np.ndarray:
        self.obs_dims.add(obs.shape[-1])
        t = 0.02 * self.calls
        self.calls += 1
        squat = 0.35 * (1 - np.cos(2 * np.pi * 0.5 * t)) / 2  # rad of knee, 0 → 0.35 → 0 every 2 s
        lift = LIFT * np.maximum(np.sin(2 * np.pi * 1.0 * t), 0)  # one leg at a time
        delta = np.zeros(12)
        for side, (hip, knee, ankle) in enumerate(((0, 3, 4), (6, 9, 10))):
            own_lift = lift if side == 0 else LIFT * np.maximum(-np.sin(2 * np.pi * 1.0 * t), 0)
            delta[hip] = -(squat / 2 + own_lift)
            delta[knee] = squat + 2 * own_lift
            delta[ankle] = -(squat / 2 + own_lift)
        return (delta / ACTION.scale)[None, :]


def test_g1_spec_lists_its_legs_as_the_policy_joints():
    assert G1.policy_joints == LEGS and len(LEGS) == 12
    np.testing.assert_array_equal(G1.policy_joint_indices, np.arange(12))
    assert CONTRACT.joint_names == LEGS and CONTRACT.num_actions == 12
    assert CONTRACT.default_positions == tuple(G1.default_positions[:12])
    # 3 + 3 + 3 + 12 + 12 + 12: the observation sees the legs only, as unitree_rl_gym's G1 policy.
    assert CONTRACT.obs_dim == 45
    other = load_robot("a1")
    assert other.policy_joints == () and other.policy_joint_names == other.joint_names


@pytest.mark.parametrize(("value", "message"), [
    ("[left_knee_joint, left_elbo_joint]", r"policy_joints\[1\].*'left_elbo_joint' is not a joint"),
    ("[left_knee_joint, left_hip_pitch_joint]", r"policy_joints\[1\].*out of the joints' order"),
    ("[left_knee_joint, left_knee_joint]", r"policy_joints\[1\].*listed twice"),
])
def test_bad_policy_joints_are_one_line_errors(tmp_path, value, message):
    text = Path(G1.source_file).read_text()
    start = text.index("policy_joints:")
    end = text.index("\n", start)
    path = tmp_path / "g1.yaml"
    path.write_text(text[:start] + f"policy_joints: {value}" + text[end:])
    with pytest.raises(ConfigError, match=message):
        load_spec_file(path)


def test_policy_joints_change_the_spec_hash_only_when_set():
    assert G1.spec_hash != dataclasses.replace(G1, policy_joints=()).spec_hash
    a1 = load_robot("a1")
    assert dataclasses.replace(a1, policy_joints=()).spec_hash == a1.spec_hash


def _state(q: np.ndarray, tick: int = 0) -> RobotState:
    n = G1.num_joints
    return RobotState(timestamp=0.02 * tick, tick=tick, q=q.copy(), dq=np.zeros(n), tau=np.zeros(n),
                      base_quat=np.array([1.0, 0, 0, 0]), base_ang_vel=np.zeros(3), base_lin_acc=np.zeros(3),
                      base_lin_vel=np.zeros(3))


def test_controller_drives_the_legs_and_holds_the_rest_at_default():
    policy = ScriptedLegs()
    controller = PolicyController(G1, LAYOUT, COMMANDS, ACTION, policy)
    q = G1.default_positions.copy()
    q[15:] += 0.3  # the arms far from default: their targets must stay the default anyway
    for tick in range(30):
        command = controller.step(_state(q, tick))
    assert policy.obs_dims == {CONTRACT.obs_dim}
    np.testing.assert_array_equal(command.q_target[12:], G1.default_positions[12:])
    np.testing.assert_array_equal(command.kp, G1.kp)
    np.testing.assert_array_equal(command.kd, G1.kd)
    assert np.abs(command.q_target[:12] - G1.default_positions[:12]).max() > 0.05
    with pytest.raises(ValueError, match="does not fit 'g1'"):
        controller.step(_state(q[:12]))


def test_the_contiguous_legs_path_equals_the_gather_and_scatter():
    """The G1's legs are one run of its joints: the controller copies and decodes through slices; the same
    states give the same observations and targets as the general gather / scatter path, bit for bit."""
    fast = PolicyController(G1, LAYOUT, COMMANDS, ACTION, ScriptedLegs())
    slow = PolicyController(G1, LAYOUT, COMMANDS, ACTION, ScriptedLegs())
    assert fast._policy_slice == slice(0, 12)
    slow._policy_slice = None  # the path a spec with scattered policy joints takes
    rng = np.random.default_rng(12)
    for tick in range(40):
        state = _state(G1.default_positions + rng.normal(size=G1.num_joints) * 0.2, tick)
        state.dq[:] = rng.normal(size=G1.num_joints)
        a, b = fast.step(state), slow.step(state)
        np.testing.assert_array_equal(fast.last_obs, slow.last_obs)
        np.testing.assert_array_equal(a.q_target, b.q_target)
        np.testing.assert_array_equal(a.q_target[12:], G1.default_positions[12:])


def test_the_chain_keeps_held_joints_inside_the_action_bounds_around_their_default():
    runtime = DeployRuntime(G1, PolicyController(G1, LAYOUT, COMMANDS, ACTION, ScriptedLegs()))
    lower, upper = runtime.chain.limits.action_lower, runtime.chain.limits.action_upper
    assert lower.shape == (G1.num_joints,)
    np.testing.assert_allclose((lower + upper) / 2, G1.default_positions)


GANTRY_LIFT_M = 0.1  # the feet hang this far above the ground


def _gantry(mjs) -> None:
    """Hang the pelvis from a gantry, as Unitree's deploy guide hangs the G1 until its walking policy runs (it
    cannot stand on PD alone, see the spec): the pelvis is welded to the world GANTRY_LIFT_M above its standing
    height, as stiff as the 5 ms step allows (solref 0.01 s), so the legs' reactions still rock it a little."""
    pelvis = mjs.body(G1.sim_model.base_body)
    pelvis.pos = [pelvis.pos[0], pelvis.pos[1], pelvis.pos[2] + GANTRY_LIFT_M]
    weld = mjs.add_equality(type=mujoco.mjtEq.mjEQ_WELD, objtype=mujoco.mjtObj.mjOBJ_BODY, name1=pelvis.name)
    weld.solref = [0.01, 1.0]
    weld.solimp = [0.99, 0.999, 0.001, 0.5, 2.0]


GRAVITY_SAG_RAD = 0.04  # the elbows under kp 50 (Unitree's arm gains) settle 0.037 rad below their default


def test_g1_upper_body_stays_within_0_02_rad_while_the_legs_squat_and_step():
    """Unitree's 29-DoF G1 in MuJoCo, hung from a gantry, the runtime armed with a legs-only policy that squats
    and lifts the legs in turn for 4 s. Every tick the 17 waist and arm joints are commanded to their default pose
    with their spec gains, and none moves more than 0.02 rad from where it held when the legs started. Where it
    holds is the default pose less gravity sag under Unitree's gains (up to 0.037 rad at the elbows, kp 50):
    the hold is a PD hold, on the real robot as here."""
    missing = model_source_missing(G1)
    if missing:
        pytest.skip(f"model source not on this machine: {missing}")
    from robot_rl.robots.mujoco_model import build_mujoco_model

    robot = build_mujoco_model(G1, terrain=_gantry)
    m, d = robot.model, robot.make_data()
    policy = ScriptedLegs()
    runtime = DeployRuntime(G1, PolicyController(G1, LAYOUT, COMMANDS, ACTION, policy))
    held = np.arange(12, G1.num_joints)
    default = G1.default_positions
    runtime.arm()
    ramp_ticks = round(G1.safety.ramp_duration_s / G1.timing.policy_period_s) + 2
    hold_pose, moved, legs_moved, sag = None, 0.0, 0.0, 0.0
    for tick in range(ramp_ticks + 200):
        state = robot.read_state(d, tick=tick, timestamp=0.02 * tick)
        result = runtime.step(state, now=0.02 * tick)
        robot.apply_command(d, result.command)
        for _ in range(G1.timing.decimation):
            mujoco.mj_step(m, d)
        if tick < ramp_ticks:
            continue
        assert result.mode.value == "running", (runtime.mode_changes, str(runtime.diagnostics()["safety"]))
        np.testing.assert_array_equal(result.command.q_target[held], default[held])
        np.testing.assert_array_equal(result.command.kp, G1.kp)
        np.testing.assert_array_equal(result.command.kd, G1.kd)
        q = d.qpos[robot.qpos_adr]
        if hold_pose is None:
            hold_pose = q[held].copy()
        moved = max(moved, float(np.abs(q[held] - hold_pose).max()))
        sag = max(sag, float(np.abs(q[held] - default[held]).max()))
        legs_moved = max(legs_moved, float(np.abs(q[:12] - default[:12]).max()))
    assert policy.calls >= 200
    assert legs_moved > 0.5, legs_moved  # the legs really moved
    assert moved < 0.02, moved
    assert sag < GRAVITY_SAG_RAD, sag
