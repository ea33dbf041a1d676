"""Gamepad teleop through the Linux joystick API (``/dev/input/js*``), no SDL or ROS needed.

Each ``read`` of a joystick device returns whole 8-byte ``struct js_event`` records (linux/joystick.h):
``u32 time`` (ms), ``s16 value``, ``u8 type``, ``u8 number``; type ``0x01`` button (value 0/1), ``0x02`` axis
(−32767…32767), OR'd with ``0x80`` for the synthetic events that report the initial state on open.

Conventions: axes are normalized to [−1, 1] and then negated into the ``sensor_msgs/Joy`` convention
(stick up / left = +1, what ROS's ``joy`` driver publishes), so the twist mapping is the very
:func:`robot_rl.ros.teleop.joy_to_twist` the ROS teleop node uses, with its :class:`JoyMapping` (Xbox
layout under the ``xpad`` driver: axes 0/1 left stick, 3/4 right stick, 6/7 d-pad; left bumper = dead-man,
B = E-stop). Buttons are edges taken from the events themselves, so a press and release between two
polls still counts.

Arm layout (``ee_delta``, dead-man held): left stick = x (up) / y (left); right stick = z (up) / yaw
(left); d-pad = roll (left) / pitch (up). Buttons: Start = start an episode, A = success, X = stop and
keep, Y = discard, RB = gripper toggle.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from robot_rl.ros.conversions import MessageError
from robot_rl.ros.teleop import JoyMapping, joy_to_twist
from robot_rl.teleop.command import RecorderButtons, TeleopCommand
from robot_rl.teleop.devices import DeviceError, open_nonblocking, read_nonblocking

JS_EVENT = struct.Struct("<IhBB")  # time ms, value, type, number
JS_EVENT_BUTTON, JS_EVENT_AXIS, JS_EVENT_INIT = 0x01, 0x02, 0x80
AXIS_FULL_SCALE = 32767.0


@dataclass(frozen=True)
class JsEvent:
    time_ms: int
    value: int
    type: int  # JS_EVENT_BUTTON or JS_EVENT_AXIS (INIT bit removed; see ``init``)
    number: int
    init: bool


def parse_js_events(data: bytes) -> tuple[list[JsEvent], bytes]:
    """Whole events in ``data`` and the leftover bytes of a partial one."""
    whole = len(data) - len(data) % JS_EVENT.size
    events = [JsEvent(t, v, kind & ~JS_EVENT_INIT, number, bool(kind & JS_EVENT_INIT))
              for t, v, kind, number in JS_EVENT.iter_unpack(data[:whole])]
    return events, data[whole:]


@dataclass
class GamepadState:
    """Axes (normalized, js convention: stick up / left negative) and buttons, by number."""

    axes: dict[int, float] = field(default_factory=dict)
    buttons: dict[int, bool] = field(default_factory=dict)

    def apply(self, events: list[JsEvent]) -> set[int]:
        """Update from events; returns the buttons pressed by these events (initial-state events excluded)."""
        pressed: set[int] = set()
        for event in events:
            if event.type == JS_EVENT_AXIS:
                self.axes[event.number] = max(-1.0, min(1.0, event.value / AXIS_FULL_SCALE))
            elif event.type == JS_EVENT_BUTTON:
                down = event.value != 0
                if down and not event.init and not self.buttons.get(event.number, False):
                    pressed.add(event.number)
                self.buttons[event.number] = down
        return pressed

    def joy(self, min_axes: int, min_buttons: int) -> tuple[list[float], list[int]]:
        """(axes, buttons) as a ``sensor_msgs/Joy`` message would carry them (axes negated)."""
        n_axes = max([min_axes, *(k + 1 for k in self.axes)])
        n_buttons = max([min_buttons, *(k + 1 for k in self.buttons)])
        axes = [-self.axes.get(i, 0.0) + 0.0 for i in range(n_axes)]
        return axes, [int(self.buttons.get(i, False)) for i in range(n_buttons)]


@dataclass(frozen=True)
class GamepadMapping:
    # Twist: the ROS teleop mapping, normalized (scales 1: the runtime scales to the policy's command ranges).
    joy: JoyMapping = field(default_factory=lambda: JoyMapping(scale_linear_x=1.0, scale_linear_y=1.0,
                                                               scale_angular_z=1.0, deadzone=0.08))
    # ee_delta axes in Joy convention: (x, y, z, roll, pitch, yaw); -1 = unused.
    ee_axes: tuple[int, int, int, int, int, int] = (1, 0, 4, 6, 7, 3)
    start_button: int = 7
    success_button: int = 0
    stop_button: int = 2
    discard_button: int = 3
    gripper_button: int = 5

    def max_axis(self) -> int:
        return max((*self.ee_axes, self.joy.axis_linear_x, self.joy.axis_linear_y, self.joy.axis_angular_z))

    def max_button(self) -> int:
        return max(self.start_button, self.success_button, self.stop_button, self.discard_button,
                   self.gripper_button, self.joy.enable_button, self.joy.estop_button)


def gamepad_command(state: GamepadState, pressed: set[int], mapping: GamepadMapping, gripper: float) -> TeleopCommand:
    """The command for the pad's current state and the buttons pressed since the last poll."""
    axes, buttons = state.joy(mapping.max_axis() + 1, mapping.max_button() + 1)
    try:
        linear, angular = joy_to_twist(axes, buttons, mapping.joy)
    except MessageError as exc:  # only with a mapping that names an axis beyond max_axis(): a bug here
        raise DeviceError(f"gamepad mapping: {exc}") from None
    enabled = mapping.joy.enable_button < 0 or bool(buttons[mapping.joy.enable_button])
    ee = np.zeros(6)
    if enabled:
        for i, index in enumerate(mapping.ee_axes):
            value = axes[index] if index >= 0 else 0.0
            ee[i] = 0.0 if abs(value) < mapping.joy.deadzone else value
    twist = np.array([linear[0], linear[1], angular[2]])
    record = RecorderButtons(start=mapping.start_button in pressed, stop=mapping.stop_button in pressed,
                             discard=mapping.discard_button in pressed, success=mapping.success_button in pressed,
                             estop=mapping.joy.estop_button in pressed)
    return TeleopCommand(twist=twist, ee_delta=ee, gripper=gripper, buttons=record,
                         intervention=enabled and bool(np.any(twist) or np.any(ee)))


class GamepadDevice:
    """A joystick device file (default ``/dev/input/js0``), read without blocking."""

    def __init__(self, path: str = "/dev/input/js0", mapping: GamepadMapping = GamepadMapping()) -> None:
        self.path = path
        self.mapping = mapping
        self.fd = open_nonblocking(path, "gamepad", hint="ls /dev/input/js*")
        self.state = GamepadState()
        self.gripper = 0.0
        self._pending = b""

    def poll(self) -> TeleopCommand:
        events, self._pending = parse_js_events(self._pending + read_nonblocking(self.fd, self.path, "gamepad"))
        pressed = self.state.apply(events)
        if self.mapping.gripper_button in pressed:
            self.gripper = 1.0 - self.gripper
        return gamepad_command(self.state, pressed, self.mapping, self.gripper)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
