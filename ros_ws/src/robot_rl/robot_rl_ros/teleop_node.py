"""Teleop node: keyboard (termios raw mode) or gamepad (sensor_msgs/Joy) → geometry_msgs/Twist on cmd_vel.

The Twist is re-published at ``rate_hz`` whether or not input changed, so the deploy node's cmd_vel
timeout brings the robot to a stand when this node dies. The e-stop key / button publishes
``std_msgs/Bool(true)`` on the e-stop topic, which the deploy node latches.

Keyboard mode needs a terminal: run ``ros2 run robot_rl teleop_node`` in its own terminal (``ros2 launch``
gives nodes no keyboard). Key mapping and Joy mapping: robot_rl.ros.teleop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import sys
import termios
import threading
import tty

import rclpy
from geometry_msgs.msg import Twist
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool

from robot_rl.ros.conversions import MessageError
from robot_rl.ros.teleop import KEYBOARD_HELP, JoyMapping, KeyboardTeleop, joy_estop_pressed, joy_to_twist
from robot_rl_ros import messages

CTRL_C = "\x03"


class TeleopNode(Node):
    def __init__(self, **node_options) -> None:
        super().__init__("robot_rl_teleop", **node_options)
        self.declare_parameter("input", "keyboard")  # keyboard | joy
        self.declare_parameter("cmd_vel_topic", "cmd_vel")
        self.declare_parameter("estop_topic", "estop")
        self.declare_parameter("joy_topic", "joy")
        self.declare_parameter("rate_hz", 20.0)
        keyboard = KeyboardTeleop()
        self.declare_parameter("key_steps", list(keyboard.steps))
        self.declare_parameter("key_limits", list(keyboard.limits))
        self._joy_fields = [f.name for f in dataclasses.fields(JoyMapping)]
        for field in self._joy_fields:
            self.declare_parameter(f"joy.{field}", getattr(JoyMapping(), field))

        self.input_mode = self.get_parameter("input").value
        if self.input_mode not in ("keyboard", "joy"):
            raise ValueError(f"parameter input must be keyboard or joy, got {self.input_mode!r}")
        self._lock = threading.Lock()
        self._linear, self._angular = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        self._cmd_pub = self.create_publisher(Twist, self.get_parameter("cmd_vel_topic").value, 10)
        self._estop_pub = self.create_publisher(Bool, self.get_parameter("estop_topic").value, 10)
        self.create_timer(1.0 / self.get_parameter("rate_hz").value, self._publish_twist)
        self._keyboard = KeyboardTeleop(steps=tuple(self.get_parameter("key_steps").value),
                                        limits=tuple(self.get_parameter("key_limits").value))
        if self.input_mode == "joy":
            self._joy = JoyMapping(**{f: self.get_parameter(f"joy.{f}").value for f in self._joy_fields})
            self._estop_held = False
            self.create_subscription(Joy, self.get_parameter("joy_topic").value, self._on_joy, 10)
        self._last_error = ""

    # ------------------------------------------------------------------------------------------ joystick

    def _on_joy(self, msg: Joy) -> None:
        try:
            linear, angular = joy_to_twist(msg.axes, msg.buttons, self._joy)
            estop = joy_estop_pressed(msg.buttons, self._joy)
        except MessageError as exc:
            if str(exc) != self._last_error:  # once per distinct problem, not at the joystick's rate
                self._last_error = str(exc)
                self.get_logger().error(f"{exc} (check the joy.* parameters)")
            linear, angular, estop = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], False
        with self._lock:
            self._linear, self._angular = linear, angular
        if estop and not self._estop_held:
            self._send_estop()
        self._estop_held = estop

    # ------------------------------------------------------------------------------------------ keyboard

    def run_keyboard(self, stop: threading.Event) -> None:
        """Read keys until Ctrl-C (or ``stop``); raw mode so keys arrive without Enter."""
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        tty.setraw(fd)
        try:
            self._print(KEYBOARD_HELP)
            while not stop.is_set():
                ready, _, _ = select.select([fd], [], [], 0.1)
                if not ready:
                    continue
                key = os.read(fd, 1).decode(errors="ignore")
                if key == CTRL_C:
                    break
                with self._lock:
                    before = self._keyboard
                    self._keyboard = before.press(key)
                    self._linear, self._angular = self._keyboard.twist()
                if self._keyboard.estop:
                    self._send_estop()
                    self._keyboard = dataclasses.replace(self._keyboard, estop=False)  # the next x sends again
                if self._keyboard.velocity != before.velocity:
                    vx, vy, wz = self._keyboard.velocity
                    self._print(f"vx {vx:+.2f} m/s  vy {vy:+.2f} m/s  wz {wz:+.2f} rad/s")
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)

    @staticmethod
    def _print(text: str) -> None:
        sys.stdout.write(text + "\r\n")  # raw mode: a newline alone doesn't return the carriage
        sys.stdout.flush()

    # ------------------------------------------------------------------------------------------ output

    def _publish_twist(self) -> None:
        with self._lock:
            linear, angular = list(self._linear), list(self._angular)
        self._cmd_pub.publish(messages.twist(linear, angular))

    def stop_motion(self) -> None:
        with self._lock:
            self._linear, self._angular = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        self._publish_twist()

    def _send_estop(self) -> None:
        with self._lock:
            self._linear, self._angular = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
        self._estop_pub.publish(Bool(data=True))
        self.get_logger().error("E-STOP sent")


# Exit status when keyboard teleop has no terminal to read keys from (EX_USAGE: the command was misused).
NO_TERMINAL_EXIT = 64


def main(args: list[str] | None = None) -> int:
    rclpy.init(args=args)
    node = TeleopNode()
    spinner = None
    status = 0
    try:
        if node.input_mode == "joy":
            rclpy.spin(node)
        elif not sys.stdin.isatty():
            node.get_logger().error(
                "keyboard teleop needs a terminal: run `ros2 run robot_rl teleop_node` in its own terminal, "
                "or use input:=joy"
            )
            status = NO_TERMINAL_EXIT
        else:
            spinner = threading.Thread(target=rclpy.spin, args=(node,), daemon=True)
            spinner.start()
            node.run_keyboard(threading.Event())
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        with contextlib.suppress(Exception):  # leave the robot a zero command before going
            node.stop_motion()
        if rclpy.ok():
            rclpy.shutdown()
        if spinner is not None:
            spinner.join(timeout=1.0)
        node.destroy_node()
    return status


if __name__ == "__main__":
    sys.exit(main())
