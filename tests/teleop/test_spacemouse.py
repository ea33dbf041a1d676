"""SpaceMouse teleop: hidraw reports (as a 3Dconnexion device sends them) → TeleopCommand."""

import os
import struct

import numpy as np
import pytest

from robot_rl.teleop.devices import DeviceError
from robot_rl.teleop.spacemouse import (
    SpaceMouseDevice,
    SpaceMouseMapping,
    SpaceMouseState,
    find_spacemouse,
    parse_report,
    spacemouse_ee_delta,
)


def translation(x, y, z):
    return b"\x01" + struct.pack("<hhh", x, y, z)


def rotation(rx, ry, rz):
    return b"\x02" + struct.pack("<hhh", rx, ry, rz)


def buttons(mask, size=2):
    return b"\x03" + mask.to_bytes(size, "little")


def test_reports_are_parsed_by_id():
    assert parse_report(translation(10, -20, 350)).translation == (10, -20, 350)
    assert parse_report(rotation(-1, 2, -350)).rotation == (-1, 2, -350)
    compact = b"\x01" + struct.pack("<hhhhhh", 1, 2, 3, 4, 5, 6)  # newer devices: both in report 1
    report = parse_report(compact)
    assert (report.translation, report.rotation) == ((1, 2, 3), (4, 5, 6))
    assert parse_report(buttons(0b10)).buttons == 2
    assert parse_report(b"\x17\x00\x01") is None  # battery / LED reports
    assert parse_report(b"\x01\x00") is None  # too short


def _ee(*reports):
    state = SpaceMouseState()
    for r in reports:
        state.apply(parse_report(r))
    return spacemouse_ee_delta(state, SpaceMouseMapping())


def test_device_frame_maps_to_the_base_frame_of_an_operator_behind_the_robot():
    np.testing.assert_allclose(_ee(translation(0, -350, 0)), [1, 0, 0, 0, 0, 0])  # push away: forward
    np.testing.assert_allclose(_ee(translation(-350, 0, 0)), [0, 1, 0, 0, 0, 0])  # push left: +y
    np.testing.assert_allclose(_ee(translation(0, 0, -350)), [0, 0, 1, 0, 0, 0])  # pull up: +z
    np.testing.assert_allclose(_ee(rotation(0, -350, 0)), [0, 0, 0, 1, 0, 0])  # roll
    np.testing.assert_allclose(_ee(rotation(-350, 0, 0)), [0, 0, 0, 0, 1, 0])  # pitch
    np.testing.assert_allclose(_ee(rotation(0, 0, -350)), [0, 0, 0, 0, 0, 1])  # twist left: +yaw


def test_deadzone_is_rescaled_and_values_saturate():
    np.testing.assert_allclose(_ee(translation(0, -30, 0)), np.zeros(6))  # rest offset < 10 %
    np.testing.assert_allclose(_ee(translation(0, -193, 0))[0], (193 / 350 - 0.1) / 0.9)  # ≈ 0.5
    np.testing.assert_allclose(_ee(translation(0, -500, 0))[0], 1.0)


def test_button_edges_from_the_mask():
    state = SpaceMouseState()
    assert state.apply(parse_report(buttons(0b01))) == 0b01
    assert state.apply(parse_report(buttons(0b11))) == 0b10
    assert state.apply(parse_report(buttons(0b11))) == 0
    assert state.apply(parse_report(buttons(0b00))) == 0


@pytest.fixture
def fifo_mouse(tmp_path):
    """A FIFO stands in for /dev/hidrawN (one report per read there; here one write per poll)."""
    path = tmp_path / "hidraw3"
    os.mkfifo(path)
    device = SpaceMouseDevice(str(path))
    writer = os.open(path, os.O_WRONLY)
    yield device, writer
    device.close()
    os.close(writer)


def test_spacemouse_device_reads_reports_and_toggles(fifo_mouse):
    device, writer = fifo_mouse
    os.write(writer, translation(0, -350, 0))
    cmd = device.poll()
    assert cmd.ee_delta[0] == 1.0 and cmd.twist[0] == 1.0 and cmd.intervention
    os.write(writer, buttons(0b10))
    assert device.poll().buttons.start  # right button: start an episode ...
    os.write(writer, buttons(0b00))
    device.poll()
    os.write(writer, buttons(0b10))
    cmd = device.poll()
    assert cmd.buttons.stop and not cmd.buttons.start  # ... and stop it on the next press
    os.write(writer, buttons(0b01))
    assert device.poll().gripper == 1.0  # left button: gripper toggle
    os.write(writer, translation(0, 0, 0))
    assert not np.any(device.poll().ee_delta)


def test_find_spacemouse_reads_hid_ids_from_sysfs(tmp_path):
    for name, hid_id in (("hidraw0", "0003:0000046D:0000C52B"),  # a Logitech Unifying receiver
                         ("hidraw1", "0003:0000046D:0000C626"),  # SpaceNavigator (3Dconnexion under Logitech)
                         ("hidraw2", "0003:0000256F:0000C635")):
        (tmp_path / name / "device").mkdir(parents=True)
        (tmp_path / name / "device" / "uevent").write_text(f"DRIVER=hid-generic\nHID_ID={hid_id}\n")
    assert find_spacemouse(tmp_path) == "/dev/hidraw1"
    (tmp_path / "hidraw1" / "device" / "uevent").write_text("HID_ID=0003:0000046D:0000C077\n")
    assert find_spacemouse(tmp_path) == "/dev/hidraw2"


def test_no_spacemouse_is_a_clear_error(tmp_path):
    with pytest.raises(DeviceError, match="no 3Dconnexion SpaceMouse"):
        find_spacemouse(tmp_path)
    with pytest.raises(DeviceError, match="no SpaceMouse at"):
        SpaceMouseDevice(str(tmp_path / "hidraw9"))
