"""Noise injection while collecting demos (DART, Laskey et al. 2017): the robot executes a perturbed
version of the expert's action, but the dataset's label is the expert's clean action for the state the
robot is actually in.

Why: a cloned policy drifts off the expert's path (its small errors compound) into states no clean demo
visits — on panda-push, a tool a little beside the cube, or a cube a little past the goal — where it has
never seen what to do. With the executed action perturbed, the demos visit those states, and the expert's
answer there (its label) is the recovery. The expert keeps closing the loop on the measured state, so the
perturbation is corrected by the expert itself, never by the recorded label being edited.

Where the noise goes — two places, either or both:

- ``twist_std`` (:class:`NoisyTeleop`): on the teleop command, i.e. the end-effector rates the expert
  asks of the differential IK. The IK integrates a target pose, so the perturbation moves the expert's
  own state with the arm, and the label is the IK's step for the expert's clean command from there.
- ``joint_std`` (:class:`NoisyExecution`, any controller): on the joint position action after the
  controller has chosen it. The teleop IK integrates its own configuration and is not dragged along, so
  its next target is the unperturbed intention and the label pulls the perturbed arm back to it.

Both are smooth coloured noise (:class:`SmoothNoise`: an Ornstein–Uhlenbeck process through one more
low-pass of the same time constant): white noise at 50 Hz would be filtered out by the PD and move
nothing, and a plain OU process, continuous but rough, asks for target rates the safety chain would
rate-limit; a cloned policy's drift, which the noise stands in for, is smooth.

Measured on panda-push (``benchmarks/RESULTS_bc_push.md``): neither helps the cloned policy; joint noise
ruins it (the labels then depend on the IK's hidden, unperturbed state, not on what the policy sees), and
twist noise costs a few points — the expert's rule switches abruptly between pushing and going around the
cube, and the noise fills the data with states on both sides of that switch, which a regressor averages
into standing still. Off by default.

The noise is gated (both wrappers' ``active``): the demo collector switches it off once the expert is
done (rising away from the cube and going home), so a perturbation never knocks a finished cube off the
goal or keeps the expert from reaching home and pressing stop; the gate fades over ``fade_s``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from robot_rl.core.types import JointCommand, RobotState
from robot_rl.robots.spec import RobotSpec
from robot_rl.tasks.task import TaskCfg


@dataclass(frozen=True)
class DemoNoise:
    """Perturbation of the executed action during demo collection; both stds 0 (the default): none."""

    # Added to the teleop command's linear rates (normalized units, 1 = the IK's max speed) and executed
    # by the IK; the label is the IK's step for the expert's clean command (see NoisyTeleop).
    twist_std: float = 0.0
    joint_std: float = 0.0  # per joint, in action units (× action scale = rad)
    z_ratio: float = 0.3  # twist noise: vertical std / horizontal std (a deep dip presses the fingers on the table)
    tau_s: float = 0.3  # correlation time of both
    fade_s: float = 0.25  # the gate switches the noise on and off over this long

    def __post_init__(self) -> None:
        for name in ("twist_std", "joint_std", "z_ratio"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"DemoNoise.{name} must be ≥ 0, got {value!r}")
        for name in ("tau_s", "fade_s"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"DemoNoise.{name} must be positive (seconds), got {getattr(self, name)!r}")

    @property
    def enabled(self) -> bool:
        return self.twist_std > 0 or self.joint_std > 0

    def describe(self) -> str:
        return (f"twist std {self.twist_std:g} (normalized rates, vertical × {self.z_ratio:g}), joint std "
                f"{self.joint_std:g} (action units), τ {self.tau_s:g} s")


class SmoothNoise:
    """Independent smooth noise per element: an OU process (time constant ``tau_s``) low-passed once more
    with the same time constant. Its stationary std is ``std``: a first-order low-pass of OU noise keeps
    half its variance, so the OU stage runs at √2 · std."""

    def __init__(self, std: np.ndarray, tau_s: float, dt: float, rng: np.random.Generator):
        self.std = np.asarray(std, dtype=np.float64)
        self._a = dt / tau_s
        self.rng = rng
        self._ou = np.zeros_like(self.std)
        self.value = np.zeros_like(self.std)

    def reset(self) -> None:
        self._ou.fill(0.0)
        self.value.fill(0.0)

    def step(self) -> np.ndarray:
        a = self._a
        kick = np.sqrt(2 * a) * np.sqrt(2.0) * self.std * self.rng.standard_normal(self._ou.shape)
        self._ou += -a * self._ou + kick
        self.value += a * (self._ou - self.value)
        return self.value


def expert_label(controller) -> np.ndarray:
    """The action to record as the label for ``controller``'s last step: a noise wrapper's clean
    ``expert_action``, else the action it sent (``last_raw_action``)."""
    return getattr(controller, "expert_action", controller.last_raw_action)


class _ControllerWrapper:
    """What both noise wrappers pass through to the controller they wrap (the runtime's Controller surface)."""

    def __init__(self, inner):
        self.inner = inner
        self.contract = inner.contract

    @property
    def last_command(self) -> np.ndarray:
        return self.inner.last_command

    @property
    def command_clamped(self) -> bool:
        return self.inner.command_clamped

    def set_command(self, command: Sequence[float] | np.ndarray) -> None:
        self.inner.set_command(command)

    def set_teleop(self, command) -> None:
        self.inner.set_teleop(command)


class NoisyExecution(_ControllerWrapper):
    """A controller wrapper: ``inner`` chooses the action (the label, :attr:`expert_action`), the robot is
    sent that action plus noise (:attr:`last_raw_action`, what the runtime and its safety chain see).

    ``active``: called every tick; while it returns False the noise fades out (and back in once it returns
    True again). The executed action is clipped to the contract's action range, like any policy's.
    """

    def __init__(self, inner, spec: RobotSpec, task: TaskCfg, noise: DemoNoise, rng: np.random.Generator,
                 active: Callable[[], bool] | None = None):
        super().__init__(inner)
        self.noise = noise
        self._default_q = spec.default_positions
        self._scale = task.action.scale
        self._clip = task.action.clip
        dt = spec.timing.policy_period_s
        self._gate = Gate(active, noise.fade_s, dt)
        self._joint = SmoothNoise(np.full(spec.num_joints, noise.joint_std), noise.tau_s, dt, rng)
        self.expert_action = np.zeros(spec.num_joints)  # the label: the inner controller's clean action
        self.last_raw_action = np.zeros(spec.num_joints)  # the action executed (sent to the safety chain)

    def reset(self) -> None:
        self.inner.reset()
        self._joint.reset()
        self._gate.reset()

    def step(self, state: RobotState) -> JointCommand:
        clean = self.inner.step(state)
        self.expert_action = np.array(expert_label(self.inner), dtype=np.float64)  # the inner may be a NoisyTeleop
        executed = np.clip(self.expert_action + self._gate() * self._joint.step(), -self._clip, self._clip)
        self.last_raw_action = executed
        return JointCommand(self._default_q + self._scale * executed, clean.dq_target.copy(), clean.kp.copy(),
                            clean.kd.copy(), clean.tau_ff.copy())


class Gate:
    """0 → 1 while ``active()`` holds, back to 0 when it stops holding, each over ``fade_s``."""

    def __init__(self, active: Callable[[], bool] | None, fade_s: float, dt: float):
        self.active = active
        self._step = dt / fade_s
        self.gain = 1.0

    def reset(self) -> None:
        self.gain = 1.0

    def __call__(self) -> float:
        on = self.active() if self.active is not None else True
        self.gain = float(np.clip(self.gain + (self._step if on else -self._step), 0.0, 1.0))
        return self.gain


class NoisyTeleop(_ControllerWrapper):
    """DART for arm teleop (:class:`~robot_rl.teleop.arm_ik.ArmTeleopController`): the robot executes the
    IK's answer to the device's command plus smooth twist noise; the label (:attr:`expert_action`) is the
    IK's answer, from the same IK state, to ``clean_command()`` — the expert's command without any noise.

    The IK integrates a target pose, so it is stepped twice per tick: once for the label, then rewound and
    stepped with the noisy twist, which is what it keeps. The perturbation thus moves the IK's target and
    the arm together (the expert's state follows what was executed), and each label is the expert's
    clean answer from where the arm really is — as for clean demos, where the label is the IK's next
    target from its state — so the cloned map from states to labels is the one clean demos show, now
    also off the expert's path.
    """

    def __init__(self, inner, spec: RobotSpec, noise: DemoNoise, rng: np.random.Generator,
                 clean_command: Callable[[], object], active: Callable[[], bool] | None = None):
        super().__init__(inner)
        self.noise = noise
        self.clean_command = clean_command
        dt = spec.timing.policy_period_s
        self._twist = SmoothNoise(noise.twist_std * np.array([1.0, 1.0, noise.z_ratio]), noise.tau_s, dt, rng)
        self._gate = Gate(active, noise.fade_s, dt)
        self._device_command = None
        self._fresh = True  # the inner controller re-anchors its IK at the next state
        self.expert_action = np.zeros(spec.num_joints)
        self.last_raw_action = np.zeros(spec.num_joints)

    def set_teleop(self, command) -> None:  # kept: each step asks the IK twice (clean label, noisy execution)
        self._device_command = command

    def reset(self) -> None:
        self.inner.reset()
        self._twist.reset()
        self._gate.reset()
        self._fresh = True

    def step(self, state: RobotState) -> JointCommand:
        from robot_rl.teleop.command import TeleopCommand

        ik = self.inner.ik
        if self._fresh:
            ik.reset(state.q)  # what the inner controller's resync would do on this step
        snapshot = (ik.configuration.q.copy(), ik.target_pos.copy(), ik.target_rot.copy())
        device = self._device_command
        if device is None:  # nothing received: the inner controller holds, with or without noise
            command = self.inner.step(state)
            self.expert_action = self.last_raw_action = np.array(self.inner.last_raw_action)
            self._fresh = False
            return command
        self.inner.set_teleop(self.clean_command())
        self.inner.step(state)  # consumes the inner controller's resync, if one was pending
        self.expert_action = np.array(self.inner.last_raw_action, dtype=np.float64)
        ik.configuration.update(snapshot[0])
        ik.target_pos, ik.target_rot = snapshot[1], snapshot[2]
        self._fresh = False
        ee = np.array(device.ee_delta, dtype=np.float64)
        ee[:3] += self._gate() * self._twist.step()
        self.inner.set_teleop(TeleopCommand(ee_delta=ee, gripper=device.gripper))
        self.inner.ticks -= 1  # one tick, two solves
        command = self.inner.step(state)
        self.last_raw_action = np.array(self.inner.last_raw_action, dtype=np.float64)
        return command
