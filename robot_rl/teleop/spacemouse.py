"""3Dconnexion SpaceMouse teleop through Linux ``hidraw`` (``/dev/hidraw*``), no spacenavd or HID library.

Each ``read`` of a hidraw device returns one HID input report, its first byte the report ID:

- ID 1: translation x, y, z — three little-endian int16 (older devices); newer ones (SpaceMouse Compact
  and wireless models) send 12 bytes here: translation then rotation;
- ID 2: rotation rx, ry, rz — three little-endian int16;
- ID 3: buttons — a little-endian bit mask (bit 0 the left button, bit 1 the right).

Full deflection reads about ±350. The device's frame (spacenavd's raw frame): x right, y towards the user,
z down, rotations right-handed about those axes. ``SpaceMouseMapping.signs`` turns that into the robot
base frame for an operator standing behind the robot, facing +x: x = −y_dev (push away: forward),
y = −x_dev (push left), z = −z_dev (pull up), roll = −ry_dev, pitch = −rx_dev, yaw = −rz_dev. A deadzone
(rescaled, so motion starts from zero) removes the cap's rest offset.

Buttons: left = gripper toggle; right = episode toggle (start, then stop and keep). The device knows no
"success": with a SpaceMouse, mark success from the keyboard (the session keeps the terminal's keys live).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robot_rl.teleop.command import RecorderButtons, TeleopCommand
from robot_rl.teleop.devices import DeviceError, open_nonblocking, read_nonblocking

REPORT_TRANSLATION, REPORT_ROTATION, REPORT_BUTTONS = 1, 2, 3
_INT16X3 = struct.Struct("<hhh")
FULL_SCALE = 350.0
VENDOR_3DCONNEXION, VENDOR_LOGITECH = 0x256F, 0x046D  # older 3Dconnexion devices carry Logitech's ID ...
LOGITECH_3DCONNEXION_PRODUCTS = 0xC600  # ... with product IDs 0xC6xx (SpaceNavigator 0xC626, ...)
MAX_REPORT_BYTES = 64


@dataclass(frozen=True)
class SpaceMouseReport:
    translation: tuple[int, int, int] | None = None
    rotation: tuple[int, int, int] | None = None
    buttons: int | None = None


def parse_report(report: bytes) -> SpaceMouseReport | None:
    """One hidraw report → its fields; None for reports of other IDs (LEDs, battery) or too short ones."""
    if len(report) < 2:
        return None
    kind, body = report[0], report[1:]
    if kind == REPORT_TRANSLATION and len(body) >= 6:
        rotation = _INT16X3.unpack_from(body, 6) if len(body) >= 12 else None
        return SpaceMouseReport(translation=_INT16X3.unpack_from(body, 0), rotation=rotation)
    if kind == REPORT_ROTATION and len(body) >= 6:
        return SpaceMouseReport(rotation=_INT16X3.unpack_from(body, 0))
    if kind == REPORT_BUTTONS:
        return SpaceMouseReport(buttons=int.from_bytes(body, "little"))
    return None


@dataclass
class SpaceMouseState:
    translation: np.ndarray = field(default_factory=lambda: np.zeros(3))  # raw device units
    rotation: np.ndarray = field(default_factory=lambda: np.zeros(3))
    buttons: int = 0

    def apply(self, report: SpaceMouseReport) -> int:
        """Update; returns the bit mask of buttons this report pressed."""
        if report.translation is not None:
            self.translation = np.array(report.translation, dtype=np.float64)
        if report.rotation is not None:
            self.rotation = np.array(report.rotation, dtype=np.float64)
        pressed = 0
        if report.buttons is not None:
            pressed = report.buttons & ~self.buttons
            self.buttons = report.buttons
        return pressed


@dataclass(frozen=True)
class SpaceMouseMapping:
    # Device (x, y, z, rx, ry, rz) → base frame (x, y, z, roll, pitch, yaw): source index and sign each.
    source: tuple[int, ...] = (1, 0, 2, 4, 3, 5)
    signs: tuple[float, ...] = (-1.0, -1.0, -1.0, -1.0, -1.0, -1.0)
    full_scale: float = FULL_SCALE
    deadzone: float = 0.1  # fraction of full scale
    gripper_bit: int = 0
    episode_bit: int = 1


def spacemouse_ee_delta(state: SpaceMouseState, mapping: SpaceMouseMapping) -> np.ndarray:
    """(6,) in [−1, 1], base frame: (x, y, z, roll, pitch, yaw)."""
    raw = np.concatenate([state.translation, state.rotation]) / mapping.full_scale
    out = np.clip(raw[list(mapping.source)] * np.asarray(mapping.signs), -1.0, 1.0)
    magnitude = np.abs(out)
    return np.where(magnitude < mapping.deadzone, 0.0,
                    np.sign(out) * (magnitude - mapping.deadzone) / (1.0 - mapping.deadzone))


def is_3dconnexion(vendor: int, product: int) -> bool:
    if vendor == VENDOR_LOGITECH:
        return product & 0xFF00 == LOGITECH_3DCONNEXION_PRODUCTS
    return vendor == VENDOR_3DCONNEXION


def find_spacemouse(sysfs: str | Path = "/sys/class/hidraw") -> str:
    """The ``/dev/hidrawN`` of the first 3Dconnexion device, from each node's ``device/uevent`` HID_ID
    (``bus:vendor:product`` in hex)."""
    for node in sorted(Path(sysfs).glob("hidraw*")):
        try:
            uevent = (node / "device" / "uevent").read_text()
        except OSError:
            continue
        for line in uevent.splitlines():
            if line.startswith("HID_ID="):
                _bus, vendor, product = line.split("=", 1)[1].split(":")
                if is_3dconnexion(int(vendor, 16), int(product, 16)):
                    return f"/dev/{node.name}"
    raise DeviceError(f"no 3Dconnexion SpaceMouse among the hidraw devices in {sysfs} (is it plugged in? "
                      "ls /dev/hidraw*; pass --device spacemouse:/dev/hidrawN to choose one)")


class SpaceMouseDevice:
    """A hidraw device file, read without blocking; each read is one report."""

    def __init__(self, path: str | None = None, mapping: SpaceMouseMapping = SpaceMouseMapping()) -> None:
        self.path = path or find_spacemouse()
        self.mapping = mapping
        self.fd = open_nonblocking(self.path, "SpaceMouse",
                                   hint="ls /dev/hidraw*; hidraw nodes are root-only unless a udev rule opens them")
        self.state = SpaceMouseState()
        self.gripper = 0.0
        self.recording = False  # the episode toggle's own idea of whether an episode is open

    def poll(self) -> TeleopCommand:
        start = stop = False
        while True:
            data = read_nonblocking(self.fd, self.path, "SpaceMouse", size=MAX_REPORT_BYTES, once=True)
            if not data:
                break
            report = parse_report(data)
            if report is None:
                continue
            pressed = self.state.apply(report)
            if pressed >> self.mapping.gripper_bit & 1:
                self.gripper = 1.0 - self.gripper
            if pressed >> self.mapping.episode_bit & 1:
                start, stop = (start or not self.recording), (stop or self.recording)
                self.recording = not self.recording
        ee = spacemouse_ee_delta(self.state, self.mapping)
        twist = np.array([ee[0], ee[1], ee[5]])
        return TeleopCommand(twist=twist, ee_delta=ee, gripper=self.gripper,
                             buttons=RecorderButtons(start=start, stop=stop), intervention=bool(np.any(ee)))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
