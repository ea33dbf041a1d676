"""Opening devices by name, and merging a motion device with the terminal's recorder keys."""

import os
import struct

import pytest

from robot_rl.teleop.devices import Device, DeviceError, MergedDevice, open_device
from robot_rl.teleop.gamepad import GamepadDevice
from robot_rl.teleop.keyboard import KeyboardDevice


@pytest.mark.parametrize(("spec", "message"), [
    ("joystick", "unknown teleop device 'joystick' \\(known: keyboard, gamepad, spacemouse"),
    ("keyboard:/dev/tty1", "the keyboard device takes no path"),
])
def test_bad_device_names(spec, message):
    with pytest.raises(DeviceError, match=message):
        open_device(spec)


def test_a_gamepad_is_merged_with_the_terminal_keys(tmp_path):
    path = tmp_path / "js0"
    os.mkfifo(path)
    master, slave = os.openpty()
    writer = None
    try:
        device = open_device(f"gamepad:{path}", terminal_fd=slave)
        assert isinstance(device, MergedDevice) and isinstance(device, Device)
        assert isinstance(device.motion, GamepadDevice) and isinstance(device.buttons, KeyboardDevice)
        writer = os.open(path, os.O_WRONLY)
        lb_down = struct.pack("<IhBB", 0, 1, 0x01, 4)
        stick_up = struct.pack("<IhBB", 0, -32767, 0x02, 1)
        os.write(writer, lb_down + stick_up)
        os.write(master, b"w\r")  # w: motion from the keyboard is ignored; Enter: start recording counts
        cmd = device.poll()
        assert cmd.twist[0] == pytest.approx(1.0, abs=1e-4) and cmd.buttons.start
        os.write(master, b"\x03")
        assert device.poll().quit
        device.close()
        assert device.motion.fd == -1
    finally:
        for fd in (writer, master, slave):
            if fd is not None:
                os.close(fd)


def test_without_a_terminal_the_gamepad_stands_alone(tmp_path):
    path = tmp_path / "js0"
    os.mkfifo(path)
    read_end, write_end = os.pipe()
    try:
        device = open_device(f"gamepad:{path}", terminal_fd=read_end)
        assert isinstance(device, GamepadDevice)
        device.close()
    finally:
        os.close(read_end)
        os.close(write_end)
