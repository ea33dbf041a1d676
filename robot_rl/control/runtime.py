"""The deploy runtime: state machine + policy controller + safety chain, one ``step`` per policy period.

The same object runs in tests, in the sim2sim gate, in the demo, in the ROS 2 node and on hardware. It
does no I/O and reads no clock: the caller passes the measured state and ``now``, and sends the command it
returns. :func:`run_loop` (in ``robot_rl.control.deploy_loop``) is the fixed-rate loop around it for robot
interfaces; the ROS 2 node calls ``step`` from its timer instead.

Per step:

    pending operator events (arm / stop / e-stop / reset), applied in order
    RAMP finished?  → RUNNING (the controller's history is reset: the policy starts fresh)
    RUNNING         → controller (observation → policy → targets)
    other modes     → the state machine's command (passive, ramp interpolation, damping)
    every command   → safety chain (finite check, limits, watchdogs); a fault → DAMPING, latched

A real-time loop also calls :meth:`check_late` between ``step`` and its write when a deadline passed
meanwhile: a tick stalled past the overrun limit sends damping, never its own (late) command.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from robot_rl.control.controller import PolicyController
from robot_rl.control.state_machine import (
    ControllerEvent,
    ControllerMode,
    ControllerState,
    IllegalTransition,
    PassiveMode,
    allowed_events,
    apply_event,
    command_for,
    ramp_done,
)
from robot_rl.core.types import JointCommand, ObjectSensor, RobotState
from robot_rl.robots.spec import RobotSpec, load_robot
from robot_rl.safety.chain import SafetyChain
from robot_rl.safety.filters import ActionClip, SafetyEvent

if TYPE_CHECKING:
    from robot_rl.policy.contract import PolicyContract


class Controller(Protocol):
    """What the runtime drives while RUNNING: a policy (:class:`PolicyController`) or anything else that
    maps state to joint targets under a policy contract, e.g. arm teleop
    (:class:`robot_rl.teleop.arm_ik.ArmTeleopController`). The contract sets the chain's action clip."""

    contract: PolicyContract
    last_raw_action: np.ndarray  # checked for NaN/inf by the chain

    @property
    def last_command(self) -> np.ndarray: ...

    @property
    def command_clamped(self) -> bool: ...

    def set_command(self, command: Sequence[float] | np.ndarray) -> None: ...

    def reset(self) -> None: ...

    def step(self, state: RobotState) -> JointCommand: ...


@dataclass(frozen=True)
class StepResult:
    command: JointCommand  # what to send (after the safety chain)
    proposed: JointCommand  # what the controller / state machine asked for (before the chain)
    mode: ControllerMode  # the mode this command belongs to
    events: tuple[SafetyEvent, ...]  # safety events raised on this step


class DeployRuntime:
    """One robot, one policy (or none: then it can only ramp to and hold the default pose)."""

    def __init__(self, spec: RobotSpec, controller: Controller | None = None, passive: PassiveMode = "damping"):
        self.spec = spec
        self.controller = controller
        self.contract = controller.contract if controller is not None else None
        self.passive: PassiveMode = passive
        clip = None
        if self.contract is not None:
            a = self.contract.action
            # Target space is every joint's: a joint the policy does not drive (spec policy_joints) is bounded
            # around its default pose as a driven one is around its offset; the controller holds it there.
            offset = np.array(spec.default_positions, dtype=np.float64)
            offset[spec.policy_joint_indices] = a.offset
            clip = ActionClip(clip=a.clip, scale=a.scale, offset=offset)
        self.chain = SafetyChain.from_spec(spec, action_clip=clip)
        self.state = ControllerState()
        # Operator requests arrive from other threads (ROS callbacks, a keyboard, a teleop device); they
        # take effect at the start of the next step, in order, so a step never sees half an event.
        self._pending: collections.deque[ControllerEvent] = collections.deque()
        self._pending_command: np.ndarray | None = None
        self._lock = threading.Lock()
        self.steps = 0
        self.mode_changes: list[tuple[float, str]] = []
        self.refused: list[str] = []  # operator requests that could not apply (e.g. ARM with a latched fault)
        self._hold_default = JointCommand.hold(spec.default_positions, spec.kp, spec.kd)

    @classmethod
    def load(cls, robot: str, policy_path: str | Path, task: str | None = None, **kwargs) -> DeployRuntime:
        """Spec + policy, contract checked against the task the policy says it was trained on.

        Raises ConfigError (spec), PolicyLoadError (file) or ContractMismatch, each with a clear message.
        """
        from robot_rl.policy.contract import expected_for_task
        from robot_rl.policy.onnx_policy import load_policy, read_contract
        from robot_rl.tasks.registry import make_task

        spec = load_robot(robot)
        found = read_contract(policy_path)
        task_cfg = make_task(task or found.provenance.task)
        if task_cfg.robot != spec.name:
            raise ValueError(f"task {task_cfg.name!r} is for robot {task_cfg.robot!r}, not {spec.name!r}")
        # A composed residual's longer history, an imported policy's own observation, scale and clip.
        policy = load_policy(policy_path, expected_for_task(found, spec, task_cfg))
        return cls(spec, PolicyController.for_task(task_cfg, spec, policy), **kwargs)

    # -- operator requests (thread-safe) ---------------------------------------------------------------
    @property
    def mode(self) -> ControllerMode:
        return self.state.mode

    def arm(self) -> None:
        self._request(ControllerEvent.ARM)

    def stop(self) -> None:
        self._request(ControllerEvent.STOP)

    def estop(self) -> None:
        self._request(ControllerEvent.ESTOP)

    def reset_fault(self) -> None:
        """Acknowledge a stop or fault: clears the chain's latch; the robot stays damped until armed."""
        self._request(ControllerEvent.RESET)

    def observe_objects(self, source: object) -> None:
        """Let the policy observe the task's object through ``source`` when it is an ObjectSensor (a simulated
        robot's scene; on hardware, a perception source): the robot state does not carry task-specific state."""
        if isinstance(self.controller, PolicyController):
            self.controller.object_sensor = source if isinstance(source, ObjectSensor) else None

    def set_command(self, command: np.ndarray) -> None:
        with self._lock:
            self._pending_command = np.array(command, dtype=np.float64)

    def _request(self, event: ControllerEvent) -> None:
        with self._lock:
            self._pending.append(event)

    # -- the tick ---------------------------------------------------------------------------------------
    def step(self, state: RobotState, now: float, missed_deadlines: int = 0) -> StepResult:
        self._apply_pending(state, now)
        if ramp_done(self.state, now):
            self._event(ControllerEvent.RAMP_DONE, now, state)
            if self.controller is not None:
                self.controller.reset()

        action = None
        if self.state.mode is ControllerMode.RUNNING:
            if self.controller is not None:
                proposed = self.controller.step(state)
                action = self.controller.last_raw_action
            else:
                proposed = self._hold_default
        else:
            proposed = command_for(self.state, self.spec, now, self.passive)

        out = self.chain.step(state, proposed, now, action=action, missed_deadlines=missed_deadlines)
        if out.faulted and self.state.mode is not ControllerMode.DAMPING:
            self._event(ControllerEvent.FAULT, now, state)
        self.steps += 1
        return StepResult(out.command, proposed, self.state.mode, out.events)

    def check_late(self, result: StepResult, state: RobotState, now: float, missed_in_tick: int) -> StepResult:
        """Just before ``result`` (this tick's :meth:`step`, for ``state`` at ``now``) is sent, when
        ``missed_in_tick`` deadlines have passed since: past the overrun limit its command is not sent. The
        chain's overrun fault latches (counted, its event added to the result's), the mode goes to DAMPING as
        on any fault, and the result carries the damping command. Otherwise ``result`` itself."""
        out = self.chain.check_late(missed_in_tick)
        if out is None:
            return result
        if self.state.mode is not ControllerMode.DAMPING:
            self._event(ControllerEvent.FAULT, now, state)
        return StepResult(out.command, result.proposed, self.state.mode, result.events + out.events)

    def _apply_pending(self, state: RobotState, now: float) -> None:
        with self._lock:
            events = list(self._pending)
            self._pending.clear()
            command, self._pending_command = self._pending_command, None
        if command is not None and self.controller is not None:
            self.controller.set_command(command)
        for event in events:
            if event is ControllerEvent.RESET:
                self.chain.reset()
                if self.state.mode is not ControllerMode.DAMPING:
                    continue  # nothing to acknowledge beyond the chain's latch
            elif event is ControllerEvent.ARM and event not in allowed_events(self.state.mode):
                continue  # ARM while ramping or running: already armed
            try:
                self._event(event, now, state)
            except IllegalTransition as exc:
                # Never raise inside the control loop: the robot keeps its current (safe) mode.
                self.refused.append(f"t={now:.3f}s: {exc}")

    def _event(self, event: ControllerEvent, now: float, state: RobotState) -> None:
        before = self.state.mode
        self.state = apply_event(
            self.state, event, now, spec=self.spec, measured_q=state.q, fault_active=self.chain.faulted
        )
        if self.state.mode is not before:
            self.mode_changes.append((now, self.state.mode.value))

    # -- reporting --------------------------------------------------------------------------------------
    def diagnostics(self) -> dict:
        """Plain types: mode, steps, safety counters, and the command the policy is following."""
        diag = {
            "robot": self.spec.name,
            "mode": self.state.mode.value,
            "steps": self.steps,
            "safety": self.chain.report.summary(),
            "fault_latched": self.chain.faulted,
            "fault": [str(e) for e in self.chain.fault],
            "refused": self.refused[-5:],
        }
        if self.controller is not None:
            names, values = self.contract.commands.names, self.controller.last_command.tolist()
            diag["command"] = dict(zip(names, values, strict=True))
            diag["command_clamped"] = self.controller.command_clamped
        return diag
