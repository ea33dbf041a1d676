"""Gamepad and keyboard → velocity command, without ROS."""

import pytest

from robot_rl.ros.conversions import MessageError
from robot_rl.ros.teleop import JoyMapping, KeyboardTeleop, joy_estop_pressed, joy_to_twist

PAD = JoyMapping()  # Xbox layout: axes 0/1 left stick, 3 right stick x; button 4 = LB (dead-man), 1 = B


def _pad(axes=None, pressed=()):
    axes_values = [0.0] * 8
    for index, value in (axes or {}).items():
        axes_values[index] = value
    buttons = [1 if i in pressed else 0 for i in range(11)]
    return axes_values, buttons


def test_sticks_do_nothing_without_the_dead_man_button():
    axes, buttons = _pad({1: 1.0, 0: 1.0, 3: 1.0})
    assert joy_to_twist(axes, buttons, PAD) == ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])


def test_sticks_scale_to_velocities_while_the_dead_man_is_held():
    axes, buttons = _pad({1: 0.5, 0: -1.0, 3: 0.25}, pressed={PAD.enable_button})
    linear, angular = joy_to_twist(axes, buttons, PAD)
    assert linear == [0.5 * PAD.scale_linear_x, -1.0 * PAD.scale_linear_y, 0.0]
    assert angular == [0.0, 0.0, 0.25 * PAD.scale_angular_z]


def test_deadzone_zeroes_stick_noise():
    axes, buttons = _pad({1: 0.04, 3: -0.049}, pressed={PAD.enable_button})
    assert joy_to_twist(axes, buttons, PAD) == ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])


def test_no_dead_man_when_disabled():
    mapping = JoyMapping(enable_button=-1)
    axes, buttons = _pad({1: 1.0})
    assert joy_to_twist(axes, buttons, mapping)[0][0] == mapping.scale_linear_x


def test_axis_the_pad_does_not_have_is_an_error_naming_the_parameter():
    mapping = JoyMapping(axis_angular_z=9)
    axes, buttons = _pad(pressed={PAD.enable_button})
    with pytest.raises(MessageError, match="axis_angular_z index 9 but the joystick reports only 8"):
        joy_to_twist(axes, buttons, mapping)


def test_estop_button():
    assert joy_estop_pressed(_pad(pressed={PAD.estop_button})[1], PAD)
    assert not joy_estop_pressed(_pad(pressed={PAD.enable_button})[1], PAD)
    assert not joy_estop_pressed(_pad(pressed={PAD.estop_button})[1], JoyMapping(estop_button=-1))


def test_keys_step_velocities_exactly():
    teleop = KeyboardTeleop()
    for _ in range(3):
        teleop = teleop.press("w")
    assert teleop.velocity == (0.3, 0.0, 0.0)  # three 0.1 steps, no float drift
    teleop = teleop.press("a").press("E")  # upper case works too
    assert teleop.velocity == (0.3, 0.1, -0.2)
    assert teleop.twist() == ([0.3, 0.1, 0.0], [0.0, 0.0, -0.2])


def test_keys_stop_at_the_limits():
    teleop = KeyboardTeleop(steps=(0.4, 0.1, 0.2), limits=(1.0, 0.5, 1.5))
    for _ in range(10):
        teleop = teleop.press("s")
    assert teleop.velocity[0] == -1.0


def test_space_stops_and_x_latches_the_estop():
    teleop = KeyboardTeleop().press("w").press("q")
    assert teleop.press(" ").velocity == (0.0, 0.0, 0.0) and not teleop.press(" ").estop
    stopped = teleop.press("x")
    assert stopped.estop and stopped.velocity == (0.0, 0.0, 0.0)


def test_other_keys_change_nothing():
    teleop = KeyboardTeleop().press("w")
    assert teleop.press("z") == teleop and teleop.press("\x1b") == teleop
