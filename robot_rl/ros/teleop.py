"""Teleoperation input → velocity command: gamepad (sensor_msgs/Joy fields) and keyboard. Pure, no rclpy.

The teleop node reads keys (termios raw mode) or Joy messages, asks this module for the Twist to publish,
and publishes it at a fixed rate, so the deploy node's cmd_vel timeout stops the robot when teleop dies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from robot_rl.ros.conversions import MessageError


@dataclasses.dataclass(frozen=True)
class JoyMapping:
    """Which gamepad axes drive which Twist field, and the scale from stick deflection (±1) to m/s, rad/s.

    Defaults fit an Xbox-layout pad under the ``joy`` driver: left stick translates, right stick turns,
    the left bumper must be held (dead-man), B latches the e-stop. An axis or button of -1 is unused.
    """

    axis_linear_x: int = 1
    axis_linear_y: int = 0
    axis_angular_z: int = 3
    scale_linear_x: float = 1.0
    scale_linear_y: float = 0.5
    scale_angular_z: float = 1.0
    deadzone: float = 0.05
    enable_button: int = 4
    estop_button: int = 1


def _pick(values: Sequence[float], index: int, what: str) -> float:
    if index < 0:
        return 0.0
    if index >= len(values):
        raise MessageError(f"joy: {what} index {index} but the joystick reports only {len(values)}")
    return float(values[index])


def joy_to_twist(axes: Sequence[float], buttons: Sequence[int], mapping: JoyMapping) -> tuple[list[float], list[float]]:
    """(linear xyz, angular xyz) from a sensor_msgs/Joy. All zeros unless the dead-man button is held."""
    if mapping.enable_button >= 0 and not _pick(buttons, mapping.enable_button, "enable_button"):
        return [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]

    def axis(index: int, scale: float, what: str) -> float:
        value = _pick(axes, index, what)
        return 0.0 if abs(value) < mapping.deadzone else scale * value

    vx = axis(mapping.axis_linear_x, mapping.scale_linear_x, "axis_linear_x")
    vy = axis(mapping.axis_linear_y, mapping.scale_linear_y, "axis_linear_y")
    wz = axis(mapping.axis_angular_z, mapping.scale_angular_z, "axis_angular_z")
    return [vx, vy, 0.0], [0.0, 0.0, wz]


def joy_estop_pressed(buttons: Sequence[int], mapping: JoyMapping) -> bool:
    return mapping.estop_button >= 0 and bool(_pick(buttons, mapping.estop_button, "estop_button"))


# key → (field index in (vx, vy, wz), step sign); the step sizes are the node's parameters.
KEY_STEPS: dict[str, tuple[int, int]] = {
    "w": (0, +1), "s": (0, -1), "a": (1, +1), "d": (1, -1), "q": (2, +1), "e": (2, -1),
}
KEY_STOP = " "  # space: all velocities to zero
KEY_ESTOP = "x"
KEYBOARD_HELP = "w/s: forward/back  a/d: left/right  q/e: turn left/right  space: stop  x: E-STOP  Ctrl-C: quit"


@dataclasses.dataclass(frozen=True)
class KeyboardTeleop:
    """Velocity command held by keyboard teleop: each key press steps one field, bounded by ``limits``."""

    steps: tuple[float, float, float] = (0.1, 0.1, 0.2)  # vx m/s, vy m/s, wz rad/s per key press
    limits: tuple[float, float, float] = (1.0, 0.5, 1.5)
    velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    estop: bool = False

    def press(self, key: str) -> KeyboardTeleop:
        """The teleop state after one key. Unknown keys change nothing."""
        key = key.lower()
        if key == KEY_ESTOP:
            return dataclasses.replace(self, velocity=(0.0, 0.0, 0.0), estop=True)
        if key == KEY_STOP:
            return dataclasses.replace(self, velocity=(0.0, 0.0, 0.0))
        if key not in KEY_STEPS:
            return self
        field, sign = KEY_STEPS[key]
        velocity = list(self.velocity)
        stepped = round(velocity[field] + sign * self.steps[field], 9)  # 0.1 + 0.2 stays 0.3
        velocity[field] = min(max(stepped, -self.limits[field]), self.limits[field])
        return dataclasses.replace(self, velocity=tuple(velocity))

    def twist(self) -> tuple[list[float], list[float]]:
        vx, vy, wz = self.velocity
        return [vx, vy, 0.0], [0.0, 0.0, wz]
