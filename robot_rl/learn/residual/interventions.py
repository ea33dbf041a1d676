"""Human interventions (HIL-SERL): a person takes over, and what they did becomes training data.

Every tick the episode loop polls an :class:`InterventionSource` with the measured state. It answers with a
:class:`HumanInput`: an optional raw action that replaces the policy's this tick (the residual policy
records the residual that would have produced it, see :mod:`robot_rl.learn.residual.actor`), a sparse
success signal (a key or button), and stop / e-stop requests. The replaced action still goes through the
controller's decoding and the safety chain, like every command.

- :class:`TeleopIntervention` — an arm teleop device (keyboard, gamepad, SpaceMouse: anything with
  ``poll() -> TeleopCommand``) through :class:`~robot_rl.teleop.arm_ik.ArmTeleopController`'s differential
  IK. The device's ``intervention`` flag (a stick or key moved) says when the person drives; releasing
  it hands control back to the policy at once, and the IK re-anchors at the next takeover.
- :class:`ScriptedIntervention` — a function of the state, for tests and benchmarks. It stands in for the
  person at the device.

Legged robots: a teleop twist is a *command* to the walking policy, not a joint action, so a person
steers (``DeployRuntime.set_command``) rather than intervenes; only the buttons apply there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from robot_rl.core.types import RobotState


@dataclass(frozen=True)
class HumanInput:
    action: np.ndarray | None = None  # raw action (the policy's units) replacing the policy's this tick
    success: bool = False  # the person marks the episode successful (ends it)
    stop: bool = False  # end the episode now (truncated)
    estop: bool = False  # emergency stop: the runtime damps at once; the episode ends


NO_INPUT = HumanInput()


class InterventionSource(Protocol):
    def reset(self) -> None: ...  # a new episode starts

    def poll(self, state: RobotState, command: np.ndarray) -> HumanInput: ...


class ScriptedIntervention:
    """``decide(state, command, tick) -> HumanInput`` called every tick (``tick`` counts from the episode's start)."""

    def __init__(self, decide: Callable[[RobotState, np.ndarray, int], HumanInput]):
        self.decide = decide
        self.tick = 0

    def reset(self) -> None:
        self.tick = 0

    def poll(self, state: RobotState, command: np.ndarray) -> HumanInput:
        out = self.decide(state, command, self.tick)
        self.tick += 1
        return out


class TeleopIntervention:
    """An arm teleop device → IK → the person's raw action while they drive; their buttons always."""

    def __init__(self, device, controller):
        """``device``: ``poll() -> TeleopCommand``; ``controller``: an ``ArmTeleopController`` for the task."""
        self.device, self.controller = device, controller
        self._driving = False

    def reset(self) -> None:
        self._driving = False
        self.controller.reset()

    def poll(self, state: RobotState, command: np.ndarray) -> HumanInput:
        cmd = self.device.poll()
        b = cmd.buttons
        action = None
        if cmd.intervention:
            if not self._driving:
                self.controller.reset()  # take over from where the arm is, not from the last takeover
                self._driving = True
            self.controller.set_command(command)
            self.controller.set_teleop(cmd)
            self.controller.step(state)
            action = self.controller.last_raw_action.copy()
        else:
            self._driving = False
        return HumanInput(action=action, success=b.success, stop=b.stop or b.discard, estop=b.estop)
