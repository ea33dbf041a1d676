"""Keyboard teleop: terminal bytes (as a terminal sends them) → keys → TeleopCommand, and a real pty."""

import os
import termios

import numpy as np
import pytest

from robot_rl.teleop.devices import DeviceError
from robot_rl.teleop.keyboard import KeyboardDevice, KeyboardState, KeyHoldTiming, parse_keys

# What a terminal sends: arrows as CSI (normal cursor mode) or SS3 (application mode), Enter as CR.
UP, DOWN, RIGHT, LEFT = b"\x1b[A", b"\x1b[B", b"\x1b[C", b"\x1b[D"


def test_escape_sequences_and_plain_keys():
    data = UP + DOWN + RIGHT + LEFT + b"\x1bOA\x1bOD" + b"wAsD" + b" \r\n\x7f\x03q"
    keys, rest = parse_keys(data)
    assert keys == ["up", "down", "right", "left", "up", "left", "w", "a", "s", "d", "space", "enter", "enter",
                    "backspace", "ctrl-c", "q"]
    assert rest == b""


def test_other_sequences_are_consumed_and_ignored():
    f5, ctrl_up, delete = b"\x1b[15~", b"\x1b[1;5A", b"\x1b[3~"
    keys, rest = parse_keys(f5 + b"w" + ctrl_up + delete + b"s")
    assert [k for k in keys if k != "unknown"] == ["w", "s"] and rest == b""


def test_a_sequence_cut_by_a_read_is_completed_by_the_next():
    keys, rest = parse_keys(b"w\x1b[")
    assert (keys, rest) == (["w"], b"\x1b[")
    assert parse_keys(rest + b"A") == (["up"], b"")
    assert parse_keys(b"\x1b") == ([], b"\x1b")
    assert parse_keys(b"\x1bx") == (["escape", "x"], b"")  # ESC followed by an ordinary key


def _state():
    return KeyboardState(KeyHoldTiming(initial_hold_s=0.5, repeat_hold_s=0.1, decay_s=0.2))


def test_a_tap_moves_then_decays_to_zero():
    kb = _state()
    kb.press("w", 0.0)
    cmd = kb.command(0.4)
    assert cmd.twist.tolist() == [1.0, 0.0, 0.0] and cmd.ee_delta.tolist() == [1.0, 0, 0, 0, 0, 0]
    assert cmd.intervention
    assert kb.command(0.6).twist[0] == pytest.approx(0.5)  # halfway down the 0.2 s ramp
    cmd = kb.command(0.71)
    assert cmd.twist[0] == 0.0 and not cmd.intervention


def test_auto_repeat_keeps_a_held_key_moving_until_the_repeats_stop():
    kb = _state()
    kb.press("up", 0.0)
    for t in np.arange(0.0, 0.4, 0.02):  # the terminal's auto-repeat delay: nothing arrives
        assert kb.command(float(t)).twist[0] == 1.0
    for t in np.arange(0.4, 2.0, 0.04):  # then 25 Hz repeats
        kb.press("up", float(t))
        assert kb.command(float(t) + 0.03).twist[0] == 1.0
    last = 1.96
    assert kb.command(last + 0.09).twist[0] == 1.0  # within the repeat hold
    assert kb.command(last + 0.2).twist[0] == pytest.approx(0.5)
    assert kb.command(last + 0.31).twist[0] == 0.0


def test_the_opposite_key_takes_the_axis_over_at_once():
    kb = _state()
    kb.press("w", 0.0)
    kb.press("s", 0.1)
    assert kb.command(0.1).twist[0] == -1.0
    kb.press("a", 0.2)
    assert kb.command(0.2).twist.tolist() == [-1.0, 1.0, 0.0]  # other axes are independent


def test_layout_for_legs_and_arms():
    kb = _state()
    for key in ("q", "r"):
        kb.press(key, 0.0)
    cmd = kb.command(0.0)
    assert cmd.twist.tolist() == [0.0, 0.0, 1.0]  # q: turn left; r has no legged meaning
    assert cmd.ee_delta.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]  # r: up, q: +yaw
    kb.press("right", 1.0)
    kb.press("f", 1.0)
    cmd = kb.command(1.0)
    assert cmd.twist[2] == -1.0 and cmd.ee_delta[5] == -1.0 and cmd.ee_delta[2] == -1.0


def test_recorder_buttons_are_edges_reported_once():
    kb = _state()
    for key in ("enter", "y", "space", "backspace", "x"):
        kb.press(key, 0.0)
    b = kb.command(0.0).buttons
    assert (b.start, b.success, b.stop, b.discard, b.estop) == (True, True, True, True, True)
    b = kb.command(0.01).buttons
    assert not any((b.start, b.success, b.stop, b.discard, b.estop))


def test_ctrl_c_quits_and_g_toggles_the_gripper():
    kb = _state()
    kb.press("g", 0.0)
    assert kb.command(0.0).gripper == 1.0
    kb.press("g", 0.1)
    kb.press("ctrl-c", 0.1)
    cmd = kb.command(0.1)
    assert cmd.gripper == 0.0 and cmd.quit
    assert not kb.command(0.2).quit


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_keyboard_device_on_a_real_pseudo_terminal():
    master, slave = os.openpty()
    clock = _Clock()
    try:
        before = termios.tcgetattr(slave)
        device = KeyboardDevice(slave, clock=clock)
        lflag = termios.tcgetattr(slave)[3]
        assert not lflag & (termios.ICANON | termios.ECHO | termios.ISIG)
        os.write(master, b"w" + LEFT + b"\r")
        cmd = device.poll()
        assert cmd.twist.tolist() == [1.0, 0.0, 1.0] and cmd.buttons.start
        os.write(master, b"\x03")  # Ctrl-C: a byte in raw mode, not SIGINT
        assert device.poll().quit
        os.write(master, b"\x1b")  # a lone ESC: the Escape key once the next poll finds nothing after it
        device.poll()
        assert device._pending == b"\x1b"
        device.poll()
        assert device._pending == b""
        clock.t = 5.0
        assert device.poll().twist.tolist() == [0.0, 0.0, 0.0]
        device.close()
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)


def test_keyboard_device_refuses_a_non_terminal():
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(DeviceError, match="needs a terminal"):
            KeyboardDevice(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
