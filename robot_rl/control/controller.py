"""The policy controller: robot state + operator command → joint position targets, through the policy.

One ``step`` per policy period:

    RobotState, command ──► ObsInputs (N = 1) ──► ObservationBuilder (the training code, noise off)
        ──► policy.act ──► JointPositionAction.decode ──► JointCommand (spec kp/kd, dq 0, tau_ff 0)

A spec whose ``policy_joints`` is a subset (the G1's legs): the policy sees and drives those joints only; every
other joint's target stays its default pose, with its own spec gains, on every tick.

The observation and the decoding are the very objects training uses, parameterized by the task; the policy's
contract is checked against them at construction, so a model trained for another layout, robot or action
scale cannot be driven by this controller.

Nothing here hides a non-finite value: a NaN in the state stays NaN through the observation clip, the
network and the action clip, and ``last_tick_finite()`` also catches an ``inf`` that a term clip would
have turned into a plausible number. The safety chain downstream decides what to do about it.

Hot path: every buffer is allocated in ``__init__``; the returned ``JointCommand`` and the ``last_*``
arrays are owned by the controller and overwritten by the next ``step`` (copy them to keep them).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from robot_rl.control.action_chunks import ChunkConsumer
from robot_rl.core.types import JointCommand, ObjectSensor, RobotState
from robot_rl.policy.contract import PolicyContract, action_for_policy, layout_for_policy
from robot_rl.policy.contract_check import check_contract
from robot_rl.policy.onnx_policy import Policy
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.actions import JointPositionAction
from robot_rl.tasks.commands import CommandSpec
from robot_rl.tasks.observations import ObservationBuilder, ObservationLayout, ObsInputs, gait_phase

if TYPE_CHECKING:  # the task module pulls in the simulator side; the deploy runtime need not import it
    from robot_rl.tasks.task import TaskCfg


def _constant(values: np.ndarray) -> np.ndarray:
    arr = np.array(values, dtype=np.float64)
    arr.setflags(write=False)  # shared with every command this controller returns: nobody may edit it
    return arr


class PolicyController:
    def __init__(
        self,
        spec: RobotSpec,
        layout: ObservationLayout,
        commands: CommandSpec,
        action: JointPositionAction,
        policy: Policy,
        check_spec_hash: bool = True,
    ):
        expected = PolicyContract.expected_from(spec, layout, commands, action)
        check_contract(policy.contract, expected, check_spec_hash=check_spec_hash)
        self.spec = spec
        self.contract: PolicyContract = policy.contract
        self.policy = policy
        self.action = action
        j, c = spec.num_policy_joints, commands.size
        self.num_joints, self.num_commands, self.num_actions = spec.num_joints, c, j
        self._joint_shape = (spec.num_joints,)
        self._policy_idx = spec.policy_joint_indices
        self._all_policy = j == spec.num_joints  # the common case: no gather/scatter on the hot path
        self._default_q = _constant(spec.default_positions[self._policy_idx])
        self._policy_target = np.zeros(j)  # legs-only policies: the decoded targets before the scatter
        # Policy joints in one run of the spec's joints (the G1's legs are its first 12): slices in place of a
        # gather and a scatter per tick (≈ 2 µs less), the same values.
        idx = self._policy_idx
        contiguous = j > 0 and np.array_equal(idx, np.arange(idx[0], idx[0] + j))
        self._policy_slice = slice(int(idx[0]), int(idx[0]) + j) if contiguous and not self._all_policy else None

        # Every raw input in one buffer, so one isfinite call covers them all: q | dq | quat | gyro | lin_vel | cmd
        self._raw = np.zeros((1, 2 * j + 10 + c))
        cols = np.cumsum([0, j, j, 4, 3, 3, c])
        q, dq, quat, gyro, lin_vel, cmd = (self._raw[:, a:b] for a, b in pairwise(cols))
        quat[0, 0] = 1.0
        self._q, self._dq, self._quat, self._gyro, self._lin_vel, self._command = q, dq, quat, gyro, lin_vel, cmd
        self._q0, self._dq0, self._quat0, self._gyro0 = q[0], dq[0], quat[0], gyro[0]  # the rows step() fills
        self._last_action = np.zeros((1, j))
        self._object_pos = np.zeros((1, 3))  # the task object (manipulation), when a sensor reports one
        # The task's observation source (a simulator's scene, a perception source): not part of RobotState.
        self.object_sensor: ObjectSensor | None = None
        self._inputs = ObsInputs(
            q=q, dq=dq, default_q=self._default_q, base_quat=quat, base_ang_vel=gyro, command=cmd,
            last_action=self._last_action, base_lin_vel=lin_vel,
        )
        # The gait clock (a layout with a gait_phase term): its phase from the ticks since the policy started driving.
        self._gait_period = layout.gait_period_s
        self._dt = spec.timing.policy_period_s
        if self._gait_period is not None:
            self._inputs.gait_phase = np.zeros(1)
        self._builder = ObservationBuilder(layout, 1, j, c, j, noise=False)
        self._builder.bind(self._inputs)  # these arrays are written in place; bound again when a field changes
        self.obs_dim = self._builder.dim
        bind = getattr(policy, "bind_observation", None)
        if bind is not None:  # the network reads the builder's output in place: no copy per tick
            bind(self._builder.output)

        ranges = self.contract.commands.ranges
        self._command_low = np.array([r[0] for r in ranges], dtype=np.float64)
        self._command_high = np.array([r[1] for r in ranges], dtype=np.float64)
        self._command_requested = np.zeros(c)  # as the operator asked, before clamping
        self.set_command(np.zeros(c))  # zero, or the nearest in-range value where zero is not trained

        self._output = JointCommand(
            q_target=np.array(spec.default_positions, dtype=np.float64),  # held joints keep their default
            dq_target=_constant(np.zeros(spec.num_joints)),
            kp=_constant(spec.kp),
            kd=_constant(spec.kd),
            tau_ff=_constant(np.zeros(spec.num_joints)),
        )
        # The policy joints' run of the returned targets (legs-only specs whose policy joints are contiguous)
        self._policy_run = self._output.q_target[self._policy_slice] if self._policy_slice is not None else None
        # Where step() decodes the action: the targets themselves, their run of policy joints, or a scratch buffer
        # scattered among the held joints' targets.
        self._decoded = (self._output.q_target if self._all_policy else
                         self._policy_run if self._policy_run is not None else self._policy_target)
        self._decoder = action.decoder(self._default_q)
        self.last_obs = np.zeros((1, self.obs_dim), dtype=np.float32)  # as fed to the policy (builder-owned)
        self.last_raw_action: np.ndarray = self._last_action[0]  # (num_actions,), before clip/scale/offset
        # A chunking policy returns (length, num_actions) per tick; the consumer makes the tick's action of it
        # as the contract says (temporal ensembling), so the policy runs as it was trained.
        chunk = self.contract.chunk
        self._chunks = ChunkConsumer(chunk, j) if chunk is not None else None
        self.ticks = 0  # policy steps since the last reset

    @classmethod
    def for_task(cls, task: TaskCfg, spec: RobotSpec, policy: Policy, check_spec_hash: bool = True) -> PolicyController:
        """The controller for a policy trained on ``task`` (its actor observations, commands and action)."""
        if spec.name != task.robot:
            raise ValueError(f"task {task.name!r} is for robot {task.robot!r}, got the spec of {spec.name!r}")
        layout = layout_for_policy(task.actor_obs, policy.contract)  # a composed residual's longer history
        action = action_for_policy(task.action, policy.contract)  # an imported policy's own scale and clip
        return cls(spec, layout, task.commands, action, policy, check_spec_hash=check_spec_hash)

    @property
    def last_inputs(self) -> np.ndarray:
        """(1, 2J + 10 + C) float64: q, dq (the J policy joints), base quat, gyro, base lin vel (0 if unmeasured),
        command."""
        return self._raw

    @property
    def last_command(self) -> np.ndarray:
        """(C,) the command the policy sees, after clamping to the contract's ranges."""
        return self._command[0]

    @property
    def command_clamped(self) -> bool:
        """Was the last command set outside the trained ranges (and so clamped)?"""
        raw = self._command_requested
        return bool(np.any((raw < self._command_low) | (raw > self._command_high)))

    def set_command(self, command: Sequence[float] | np.ndarray) -> None:
        """Clamp into the contract's ranges (the policy never saw anything outside them). NaN stays NaN."""
        try:
            self._command_requested[:] = command
        except ValueError:
            raise ValueError(
                f"command has shape {np.shape(command)}; this policy takes {self.num_commands} "
                f"({', '.join(self.contract.commands.names) or 'none'})"
            ) from None
        # maximum/minimum rather than np.clip: same result (NaN propagates), a third of the call overhead
        out = self._command[0]
        np.maximum(self._command_requested, self._command_low, out=out)
        np.minimum(out, self._command_high, out=out)

    def reset(self) -> None:
        """Forget observation history and the last action; call when the policy (re)starts driving."""
        self._builder.reset()
        self._last_action.fill(0.0)
        if self._chunks is not None:
            self._chunks.reset()
        self.ticks = 0
        reset_policy = getattr(self.policy, "reset", None)  # a policy with its own memory (a residual's history)
        if reset_policy is not None:
            reset_policy()

    def step(self, state: RobotState, command: Sequence[float] | np.ndarray | None = None) -> JointCommand:
        """One policy tick. ``command=None`` keeps the last command. Returns the controller-owned command."""
        if command is not None:
            self.set_command(command)
        # Assignments into the controller's own float64 buffers: np.copyto's values and its broadcasting (a state
        # of another shape raises), without its Python-level dispatch (≈ 0.1 µs each).
        try:
            if self._all_policy:
                self._q0[...] = state.q
                self._dq0[...] = state.dq
            else:  # a slice of a longer or shorter q would fit the policy's joints: the shapes are checked first
                q, dq, shape = state.q, state.dq, self._joint_shape
                if ((q.shape if isinstance(q, np.ndarray) else np.shape(q)) != shape
                        or (dq.shape if isinstance(dq, np.ndarray) else np.shape(dq)) != shape):
                    raise ValueError
                if self._policy_slice is not None:
                    self._q0[...] = state.q[self._policy_slice]
                    self._dq0[...] = state.dq[self._policy_slice]
                else:
                    np.take(state.q, self._policy_idx, out=self._q0)
                    np.take(state.dq, self._policy_idx, out=self._dq0)
            self._quat0[...] = state.base_quat
            self._gyro0[...] = state.base_ang_vel
        except ValueError:
            raise ValueError(
                f"robot state does not fit {self.spec.name!r}: q {np.shape(state.q)}, dq {np.shape(state.dq)}, "
                f"base_quat {np.shape(state.base_quat)}, base_ang_vel {np.shape(state.base_ang_vel)}; "
                f"expected ({self.num_joints},), ({self.num_joints},), (4,), (3,)"
            ) from None
        inputs = self._inputs
        if state.base_lin_vel is None:
            if inputs.base_lin_vel is not None:  # zero it once, when the measurement goes away
                self._lin_vel.fill(0.0)
                inputs.base_lin_vel = None  # a term that needs it raises a clear error in the builder
                self._builder.bind(inputs)
        else:
            self._lin_vel[0] = state.base_lin_vel
            if inputs.base_lin_vel is None:
                inputs.base_lin_vel = self._lin_vel
                self._builder.bind(inputs)
        if self.object_sensor is not None or inputs.object_pos is not None:
            self._object_position(inputs)

        if self._gait_period is not None:  # as training: phase 0 at the first observation
            inputs.gait_phase[0] = gait_phase(self.ticks * self._dt, self._gait_period)
        obs = self._builder.compute(inputs)  # uses the previous action: that is what last_action means
        self.last_obs = obs
        raw_action = self.policy.act(obs)
        if self._chunks is not None:
            raw_action = self._chunks.step(raw_action)
        self.last_raw_action[...] = raw_action
        self._decoder.decode_into(self.last_raw_action, self._decoded)
        if self._policy_target is self._decoded:  # the policy joints' targets, scattered among the held ones'
            self._output.q_target[self._policy_idx] = self._policy_target
        self.ticks += 1
        return self._output

    def _object_position(self, inputs: ObsInputs) -> None:
        """The task object's position from the sensor into the observation inputs (None: it raises where used)."""
        object_pos = None if self.object_sensor is None else self.object_sensor.object_position()
        if object_pos is None:
            if inputs.object_pos is not None:
                self._object_pos.fill(0.0)
                inputs.object_pos = None  # a term that needs it raises a clear error in the builder
                self._builder.bind(inputs)
        else:
            self._object_pos[0] = object_pos
            if inputs.object_pos is None:
                inputs.object_pos = self._object_pos
                self._builder.bind(inputs)

    def last_tick_finite(self) -> bool:
        """Were the raw inputs, the observation and the raw action of the last tick all finite?"""
        return bool(
            np.isfinite(self._raw).all() and np.isfinite(self.last_obs).all() and np.isfinite(self._last_action).all()
            and np.isfinite(self._object_pos).all()
        )
