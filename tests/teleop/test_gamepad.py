"""Gamepad teleop: js_event byte streams (as /dev/input/js* delivers them) → TeleopCommand."""

import os
import struct

import numpy as np
import pytest

from robot_rl.teleop.devices import DeviceError
from robot_rl.teleop.gamepad import (
    JS_EVENT_AXIS,
    JS_EVENT_BUTTON,
    JS_EVENT_INIT,
    GamepadDevice,
    GamepadMapping,
    GamepadState,
    gamepad_command,
    parse_js_events,
)

PAD = GamepadMapping()  # Xbox layout under xpad: LB (4) dead-man, B (1) E-stop, Start (7), A (0), X (2), Y (3), RB (5)


def js(number, value, kind, t=0):
    return struct.pack("<IhBB", t, value, kind, number)


def axis(number, value, t=0):
    return js(number, value, JS_EVENT_AXIS, t)


def button(number, down, t=0):
    return js(number, int(down), JS_EVENT_BUTTON, t)


def initial_state(n_axes=8, n_buttons=11):
    """What the driver sends on open: every axis and button, flagged JS_EVENT_INIT, all at rest."""
    return b"".join([js(i, 0, JS_EVENT_AXIS | JS_EVENT_INIT) for i in range(n_axes)]
                    + [js(i, 0, JS_EVENT_BUTTON | JS_EVENT_INIT) for i in range(n_buttons)])


def drive(stream: bytes, state=None):
    state = state or GamepadState()
    events, rest = parse_js_events(stream)
    assert rest == b""
    pressed = state.apply(events)
    return gamepad_command(state, pressed, PAD, gripper=0.0), state


def test_event_records_are_parsed_with_the_init_flag_split_off():
    stream = js(3, -12000, JS_EVENT_AXIS | JS_EVENT_INIT, t=77) + button(2, 1, t=80) + b"\x01\x02"
    events, rest = parse_js_events(stream)
    assert [(e.time_ms, e.value, e.type, e.number, e.init) for e in events] == [
        (77, -12000, JS_EVENT_AXIS, 3, True), (80, 1, JS_EVENT_BUTTON, 2, False)]
    assert rest == b"\x01\x02"  # a partial record waits for the rest of its bytes


def test_sticks_drive_twist_and_end_effector_while_the_dead_man_is_held():
    # Left stick fully up (js: negative), half left; right stick a quarter left; LB held.
    cmd, _ = drive(initial_state() + button(4, 1) + axis(1, -32767) + axis(0, -16384) + axis(3, -8192))
    np.testing.assert_allclose(cmd.twist, [1.0, 0.5, 0.25], atol=1e-4)  # forward, left, turn left
    np.testing.assert_allclose(cmd.ee_delta, [1.0, 0.5, 0.0, 0.0, 0.0, 0.25], atol=1e-4)
    assert cmd.intervention


def test_right_stick_and_dpad_drive_the_other_end_effector_axes():
    cmd, _ = drive(initial_state() + button(4, 1) + axis(4, -32767) + axis(6, 32767) + axis(7, -32767))
    np.testing.assert_allclose(cmd.ee_delta, [0.0, 0.0, 1.0, -1.0, 1.0, 0.0], atol=1e-4)  # up; d-pad right, up


def test_nothing_moves_without_the_dead_man_button():
    cmd, _ = drive(initial_state() + axis(1, -32767) + axis(3, 32767))
    assert not np.any(cmd.twist) and not np.any(cmd.ee_delta) and not cmd.intervention


def test_deadzone_removes_stick_noise():
    cmd, _ = drive(initial_state() + button(4, 1) + axis(1, -2000) + axis(4, 1500))
    assert not np.any(cmd.twist) and not np.any(cmd.ee_delta)


def test_buttons_are_edges_from_the_events_even_when_released_before_the_poll():
    cmd, state = drive(initial_state() + button(7, 1) + button(7, 0) + button(0, 1))
    assert cmd.buttons.start and cmd.buttons.success and not cmd.buttons.stop
    cmd, state = drive(button(2, 1) + button(3, 1) + button(1, 1), state)
    assert (cmd.buttons.start, cmd.buttons.stop, cmd.buttons.discard, cmd.buttons.estop) == (False, True, True, True)
    cmd, state = drive(b"", state)  # held, no new events: no new edges
    assert not any((cmd.buttons.stop, cmd.buttons.discard, cmd.buttons.estop))


def test_initial_state_events_are_not_presses():
    start_held_at_open = js(7, 1, JS_EVENT_BUTTON | JS_EVENT_INIT)
    cmd, _ = drive(initial_state() + start_held_at_open)
    assert not cmd.buttons.start


@pytest.fixture
def fifo_pad(tmp_path):
    """A FIFO stands in for /dev/input/js0: the device reads it with the same non-blocking reads."""
    path = tmp_path / "js0"
    os.mkfifo(path)
    device = GamepadDevice(str(path))
    writer = os.open(path, os.O_WRONLY)
    yield device, writer
    device.close()
    os.close(writer)


def test_gamepad_device_reads_events_from_its_file(fifo_pad):
    device, writer = fifo_pad
    assert not np.any(device.poll().twist)  # nothing written yet: a zero command, no blocking
    os.write(writer, initial_state() + button(4, 1) + axis(1, -32767) + button(5, 1)[:5])
    cmd = device.poll()
    assert cmd.twist[0] == pytest.approx(1.0, abs=1e-4) and cmd.gripper == 0.0
    os.write(writer, button(5, 1)[5:])  # the rest of the RB record: gripper toggles
    assert device.poll().gripper == 1.0


def test_missing_gamepad_is_a_clear_error(tmp_path):
    with pytest.raises(DeviceError, match=r"no gamepad at .*js7 \(ls /dev/input/js\*\)"):
        GamepadDevice(str(tmp_path / "js7"))
